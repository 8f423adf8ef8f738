"""OMA's ``defineEvalSet``: an eval set checked, copied and normalized (names, versions and case
ids trimmed, as OMA's schema trims them)."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping

from ._types import EvalCase, EvalSet
from ._values import is_trace_attribute

_SET_KEYS = ("name", "version", "description", "cases", "defaults")
_CASE_KEYS = ("id", "input", "expected", "tags", "metadata")


class EvalSetError(ValueError):
    """An eval set that is not one: ``field`` says where (``cases[1].id``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _trimmed(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EvalSetError(field, f"{field} must be a non-empty string")
    return value.strip()


def _unknown(value: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in value:
        if key not in known:
            raise EvalSetError(f"{where}{key}", f"{where}{key} is not a field of an eval set "
                                                f"(known: {', '.join(known)})")


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EvalSetError(field, f"{field} must be a positive integer")
    return value


def _case(value: Any, index: int) -> EvalCase:
    where = f"cases[{index}]"
    if not isinstance(value, Mapping):
        raise EvalSetError(where, f"{where} must be an object")
    _unknown(value, _CASE_KEYS, f"{where}.")
    if "input" not in value:
        raise EvalSetError(f"{where}.input", f"{where}.input is required")
    case: Dict[str, Any] = {"id": _trimmed(value.get("id"), f"{where}.id"), "input": copy.deepcopy(value["input"])}
    if "expected" in value:
        case["expected"] = copy.deepcopy(value["expected"])
    if value.get("tags") is not None:
        tags = value["tags"]
        if isinstance(tags, (str, bytes)) or not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
            raise EvalSetError(f"{where}.tags", f"{where}.tags must be a list of strings")
        case["tags"] = list(tags)
    if value.get("metadata") is not None:
        metadata = value["metadata"]
        if not isinstance(metadata, Mapping):
            raise EvalSetError(f"{where}.metadata", f"{where}.metadata must be an object")
        for key, item in metadata.items():
            if not is_trace_attribute(item):
                raise EvalSetError(f"{where}.metadata.{key}",
                                   f"{where}.metadata.{key} must be a string, number, boolean or a list of one of them")
        case["metadata"] = copy.deepcopy(dict(metadata))
    return case  # type: ignore[return-value]


def define_eval_set(eval_set: EvalSet) -> EvalSet:
    """The eval set checked (``EvalSetError`` naming the field: a missing or empty name,
    version or case id, no cases, tags that are not strings, metadata that is not trace
    attributes, defaults that are not positive integers, a key that is not one) and copied;
    a case id used twice raises OMA's ``EvalSet case id "x" must be unique.``"""
    if not isinstance(eval_set, Mapping):
        raise EvalSetError("", "an eval set must be a dict")
    _unknown(eval_set, _SET_KEYS, "")
    out: Dict[str, Any] = {"name": _trimmed(eval_set.get("name"), "name"),
                           "version": _trimmed(eval_set.get("version"), "version")}
    description = eval_set.get("description")
    if description is not None:
        if not isinstance(description, str):
            raise EvalSetError("description", "description must be a string")
        out["description"] = description
    cases = eval_set.get("cases")
    if isinstance(cases, (str, bytes, Mapping)) or not isinstance(cases, (list, tuple)) or not cases:
        raise EvalSetError("cases", "cases must be a non-empty list")
    made: List[EvalCase] = [_case(c, i) for i, c in enumerate(cases)]
    seen = set()
    for case in made:
        if case["id"] in seen:
            raise EvalSetError("cases", f'EvalSet case id "{case["id"]}" must be unique.')
        seen.add(case["id"])
    out["cases"] = made
    defaults: Any = eval_set.get("defaults")
    if defaults is not None:
        if not isinstance(defaults, Mapping):
            raise EvalSetError("defaults", "defaults must be an object")
        _unknown(defaults, ("repeats", "concurrency"), "defaults.")
        out["defaults"] = {k: _positive(v, f"defaults.{k}") for k, v in defaults.items() if v is not None}
    return out  # type: ignore[return-value]
