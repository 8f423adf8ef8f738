"""OMA's ``materializeRun``: one run's trace records, in any order, as OMA's stored run: its
attempts, spans (a start and an end folded into one), agents, models, providers, token and cost
totals and metadata.

This is a rule, and rules belong to the component: it stands here, held to the shared table
fixtures/observability/materialize.json, until the component exports it; the table is the
contract the component's implementation is to pass too.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from ._types import TraceRecord
from .store import StoredRun

_INPUT = ("oma.usage.input_tokens", "gen_ai.usage.input_tokens")
_OUTPUT = ("oma.usage.output_tokens", "gen_ai.usage.output_tokens")
_CACHE_READ = ("oma.usage.cache_read_input_tokens", "gen_ai.usage.cache_read_input_tokens")
_CACHE_CREATE = ("oma.usage.cache_creation_input_tokens",)
_REASONING = ("oma.usage.reasoning_output_tokens", "oma.reasoning.output_tokens")
_MODELS = ("oma.llm.model", "oma.model", "gen_ai.request.model", "gen_ai.response.model")
_PROVIDERS = ("oma.llm.provider", "oma.provider", "gen_ai.provider.name", "gen_ai.system")
_META = "oma.meta."
_META_OVERRIDDEN = "oma.meta._overridden"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MAX_SAFE = 2 ** 53 - 1


def iso(ms: float) -> str:
    """JavaScript's ``new Date(ms).toISOString()``."""
    moment = _EPOCH + timedelta(milliseconds=math.trunc(ms))
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_iso_ms(text: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 time as :func:`iso` writes it."""
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _number(attributes: Mapping[str, Any], keys: Iterable[str]) -> float:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return value
    return 0


def _strings(attributes: Mapping[str, Any], keys: Iterable[str]) -> List[str]:
    out: List[str] = []
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            out.extend(item for item in value if isinstance(item, str))
    return out


def _record_key(record: Mapping[str, Any]) -> Any:
    return (record["traceId"], record["sequence"], record["recordId"])


def _span_key(span: Mapping[str, Any]) -> Any:
    start = span.get("startUnixMs")
    return (span["traceId"], _MAX_SAFE if start is None else start, span["spanId"])


def _is_root(record: Mapping[str, Any], kind: str) -> bool:
    return record["recordType"] == kind and record.get("kind") == "run" and not record.get("parentSpanId")


def materialize_run(records_in: Sequence[TraceRecord], include_records: bool = False) -> Optional[StoredRun]:
    """The run the records describe (``None`` for no records); ``include_records`` adds the
    records in order (by trace, then sequence)."""
    if not records_in:
        return None
    records: List[Dict[str, Any]] = sorted((dict(r) for r in records_in), key=_record_key)
    run_id = records[0]["runId"]
    spans_by_key: Dict[str, Dict[str, Any]] = {}
    agents: Set[str] = set()
    tasks: Set[str] = set()
    models: Set[str] = set()
    providers: Set[str] = set()
    costs: Dict[str, float] = {}
    tokens = {"input_tokens": 0.0, "output_tokens": 0.0, "cache_read_input_tokens": 0.0,
              "cache_creation_input_tokens": 0.0, "reasoning_output_tokens": 0.0}
    for record in records:
        key = f'{record["traceId"]}:{record["spanId"]}'
        folded = spans_by_key.setdefault(key, {"start": None, "end": None, "events": []})
        kind = record["recordType"]
        if kind == "span_start":
            folded["start"] = folded["start"] or record
        elif kind == "span_end":
            folded["end"] = folded["end"] or record
        else:
            folded["events"].append(record)
        attributes = record.get("attributes") or {}
        agents.update(_strings(attributes, ("oma.agent.name",)))
        tasks.update(_strings(attributes, ("oma.task.id",)))
        models.update(_strings(attributes, _MODELS))
        providers.update(_strings(attributes, _PROVIDERS))
        if kind == "span_end" and (record.get("kind") == "llm"
                                   or (record.get("kind") == "routing" and record.get("name") == "profile_execution_route")):
            tokens["input_tokens"] += _number(attributes, _INPUT)
            tokens["output_tokens"] += _number(attributes, _OUTPUT)
            tokens["cache_read_input_tokens"] += _number(attributes, _CACHE_READ)
            tokens["cache_creation_input_tokens"] += _number(attributes, _CACHE_CREATE)
            tokens["reasoning_output_tokens"] += _number(attributes, _REASONING)
            amount = _number(attributes, ("oma.cost.amount",))
            currencies = _strings(attributes, ("oma.cost.currency",))
            if currencies and currencies[0] and amount != 0:
                costs[currencies[0]] = costs.get(currencies[0], 0) + amount
        error = record.get("error")
        if kind == "span_end" and isinstance(error, Mapping) and error.get("provider"):
            providers.add(error["provider"])

    spans: List[Dict[str, Any]] = []
    for value in spans_by_key.values():
        start, end = value["start"], value["end"]
        source = end or start
        if source is None:
            continue
        span: Dict[str, Any] = {"traceId": source["traceId"], "spanId": source["spanId"]}
        if source.get("parentSpanId"):
            span["parentSpanId"] = source["parentSpanId"]
        kind = (end or {}).get("kind") or (start or {}).get("kind")
        name = (end or {}).get("name") or (start or {}).get("name")
        started = (end or {}).get("startUnixMs", (start or {}).get("startUnixMs"))
        if kind:
            span["kind"] = kind
        if name:
            span["name"] = name
        if started is not None:
            span["startUnixMs"] = started
        if end is not None:
            span["endUnixMs"] = end["endUnixMs"]
            span["durationMs"] = end["durationMs"]
            span["status"] = end["status"]["code"]
        span["attributes"] = {**((start or {}).get("attributes") or {}), **((end or {}).get("attributes") or {})}
        links = (end or {}).get("links")
        if links is None:
            links = (start or {}).get("links")
        span["links"] = list(links or [])
        span["events"] = list(value["events"])
        span["incomplete"] = end is None
        spans.append(span)
    spans.sort(key=_span_key)

    by_trace: Dict[str, List[Dict[str, Any]]] = {}
    for record in records:
        by_trace.setdefault(record["traceId"], []).append(record)
    attempts: List[Dict[str, Any]] = []
    for trace_id, group in by_trace.items():
        root_end = next((r for r in group if _is_root(r, "span_end")), None)
        root_start = next((r for r in group if _is_root(r, "span_start")), None)
        if root_end is not None:
            started_ms = root_end["startUnixMs"]
        elif root_start is not None:
            started_ms = root_start["startUnixMs"]
        else:
            started_ms = min(r["timestampUnixMs"] for r in group)
        attempt: Dict[str, Any] = {"attempt": min(r["attempt"] for r in group), "traceId": trace_id}
        root_span = (root_end or root_start or {}).get("spanId")
        if root_span:
            attempt["rootSpanId"] = root_span
        attempt["startedAt"] = iso(started_ms)
        if root_end is not None:
            attempt["endedAt"] = iso(root_end["endUnixMs"])
            attempt["durationMs"] = root_end["durationMs"]
            attempt["status"] = root_end["status"]["code"]
        attempt["incomplete"] = root_end is None or any(
            r["recordType"] == "span_start" and spans_by_key[f'{r["traceId"]}:{r["spanId"]}']["end"] is None
            for r in group)
        attempts.append(attempt)
    attempts.sort(key=lambda a: (a["attempt"], a["traceId"]))
    latest = attempts[-1]
    latest_start = next((r for r in records if r["traceId"] == latest["traceId"] and _is_root(r, "span_start")), None)
    latest_end = next((r for r in records if r["traceId"] == latest["traceId"] and _is_root(r, "span_end")), None)
    root_attributes = {**((latest_start or {}).get("attributes") or {}), **((latest_end or {}).get("attributes") or {})}
    metadata = {key[len(_META):]: (list(value) if isinstance(value, list) else value)
                for key, value in root_attributes.items() if key.startswith(_META) and key != _META_OVERRIDDEN}
    started_at = min(parse_iso_ms(a["startedAt"]) for a in attempts)
    ended = [parse_iso_ms(a["endedAt"]) for a in attempts if "endedAt" in a]
    token_summary: Dict[str, Any] = {"input_tokens": _whole(tokens["input_tokens"]),
                                     "output_tokens": _whole(tokens["output_tokens"])}
    for key in ("cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_output_tokens"):
        if tokens[key]:
            token_summary[key] = _whole(tokens[key])
    summary: Dict[str, Any] = {"schemaVersion": 2, "runId": run_id, "attempts": attempts, "startedAt": iso(started_at)}
    if ended:
        summary["endedAt"] = iso(max(ended))
        summary["durationMs"] = max(0, max(ended) - started_at)
    if latest.get("status"):
        summary["status"] = latest["status"]
    if metadata:
        summary["metadata"] = metadata
    summary.update({"agents": sorted(agents), "taskIds": sorted(tasks), "models": sorted(models),
                    "providers": sorted(providers), "tokens": token_summary,
                    "costs": [{"currency": c, "amount": _whole(costs[c])} for c in sorted(costs)],
                    "incomplete": any(a["incomplete"] for a in attempts), "spans": spans})
    if include_records:
        summary["records"] = records
    return summary  # type: ignore[return-value]


def _whole(value: float) -> Any:
    """A sum as an int when it is whole (sums start from 0, as JavaScript's do)."""
    return int(value) if float(value).is_integer() else value
