"""OMA's ``materializeRun`` and ``buildExecutionReceipt``, both the component's rules (its codec
exports ``materialize-run`` and ``build-execution-receipt``, the same ones the JavaScript package
and the Rust host call), reached here through one JSON text each way. The tables
``fixtures/observability/materialize.json`` and ``receipt.json`` hold their cases.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence, cast

from .._runtime import Runtime, default_runtime
from .._runtime import dumps as _dumps
from ._types import TraceRecord
from .store import StoredRun


def materialize_run(records: Sequence[TraceRecord], include_records: bool = False, *,
                    runtime: Optional[Runtime] = None) -> Optional[StoredRun]:
    """The run one run's records describe, in any order (OMA's ``StoredRun``: its attempts,
    spans, agents, models, providers, token and cost totals, metadata), or ``None`` for no
    records; ``include_records`` adds the records sorted by trace, then sequence.

    A record that is not what OMA's schema says raises :class:`OmaError` naming it
    (``records[3].traceId must be a string``)."""
    if isinstance(records, (str, bytes)) or not isinstance(records, Sequence):
        raise TypeError("records must be a list of trace records")
    if not records:
        return None
    rt = runtime or default_runtime()
    text = rt.call("materialize-run", _dumps(list(records)), bool(include_records))
    return cast(Optional[StoredRun], json.loads(text))


def _json_value(value: Any) -> Any:
    """A value of a result that JSON has no form for, as the package's results carry them: an
    error (``result["error"]``) as its dict, a pydantic instance (``structured``) as its data;
    anything else as its text."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


def build_execution_receipt(result: Any, trace: Any = None, *,
                            runtime: Optional[Runtime] = None) -> Dict[str, Any]:
    """OMA's ``buildExecutionReceipt``: the facts of an execution (roles that ran, their order,
    dependency edges, token totals, duration, flags, approvals) read from a run's result and,
    when given, its legacy trace events (what ``on_trace`` received), never from what the agents
    wrote. It never fails on what it reads: what it cannot read makes the receipt ``partial``."""
    rt = runtime or default_runtime()
    result_text = json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=_json_value)
    trace_text = None if trace is None else json.dumps(trace, ensure_ascii=False, separators=(",", ":"),
                                                       default=_json_value)
    return cast(Dict[str, Any], json.loads(rt.call("build-execution-receipt", result_text, trace_text)))
