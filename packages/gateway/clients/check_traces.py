"""The traces the gateway exported during run.sh, parsed with OpenTelemetry's own protobuf
schema (`ExportTraceServiceRequest` from PyPI's `opentelemetry-proto`), one directory per host:
every body parses and holds one tree of spans in one trace under the request's server span;
every provider call is a `chat` client span with the GenAI attributes; a `/v1/run` is an
`oma.run` span under the request's, over an `invoke_agent` span over its calls (the spans of
OMA's trace records, each carrying its record's ids); each host exported both kinds, and as many
exports as the others (the same requests); no key or token is in any of them."""

import glob
import json
import os
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

INTERNAL, SERVER, CLIENT = 1, 2, 3


def check_export(path, secrets):
    """Checks one export; returns (provider call spans, agent spans)."""
    text = open(path, encoding="utf-8").read()
    for secret in secrets:
        assert secret not in text, f"{path} holds a secret"
    request = json_format.Parse(text, ExportTraceServiceRequest())
    spans = [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    servers = [s for s in spans if s.kind == SERVER]
    assert len(servers) == 1, f"{path}: {len(servers)} server spans"
    server = servers[0]
    by_id = {s.span_id: s for s in spans}
    assert len(by_id) == len(spans), f"{path}: two spans share an id"
    # The span of a record carries OMA's ids, which are the span's own (read from the JSON text:
    # the protobuf parser reads OTLP's hex ids as base64).
    for raw in (s for r in json.loads(text)["resourceSpans"] for ss in r["scopeSpans"]
                for s in ss["spans"]):
        ids = {a["key"]: a["value"].get("stringValue") for a in raw["attributes"]}
        if raw["kind"] != SERVER:
            assert ids["oma.span.id"] == raw["spanId"], f"{path}: {raw['name']}"
            assert ids["oma.trace.id"] == raw["traceId"], f"{path}: {raw['name']}"
    calls = agents = 0
    for span in spans:
        assert span.trace_id == server.trace_id, path
        if span is server:
            continue
        # Every span hangs, through its parents, from the request's span.
        parent, hops = span.parent_span_id, 0
        while parent != server.span_id:
            assert parent in by_id and hops < 8, f"{path}: {span.name} is not under the request"
            parent, hops = by_id[parent].parent_span_id, hops + 1
        attributes = {a.key: a.value for a in span.attributes}
        if span.name == "oma.run":
            assert span.kind == INTERNAL and span.parent_span_id == server.span_id, path
            continue
        operation = attributes["gen_ai.operation.name"].string_value
        assert span.name == operation, f"{path}: {span.name} is not {operation}"
        if span.kind == CLIENT:
            calls += 1
            assert operation == "chat", span.name
            for key in ["gen_ai.provider.name", "gen_ai.request.model"]:
                assert attributes[key].string_value, f"{path}: no {key}"
            if "error.type" not in attributes:
                assert attributes["gen_ai.usage.input_tokens"].int_value > 0, path
                assert attributes["gen_ai.response.model"].string_value, path
        elif operation == "invoke_agent":
            agents += 1
            assert span.kind == INTERNAL, path
            run = by_id[span.parent_span_id]
            assert run.name == "oma.run" and run.parent_span_id == server.span_id, path
            assert attributes["oma.agent.name"].string_value, f"{path}: no agent name"
            children = [s for s in spans if s.parent_span_id == span.span_id]
            assert children, f"{path}: an agent span without its calls"
        else:
            assert operation == "execute_tool", f"{path}: {span.name}"
    return calls, agents


def main():
    root, *secrets = sys.argv[1:]
    hosts = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    assert hosts, f"no host's traces in {root}"
    counts = {}
    for host in hosts:
        files = sorted(glob.glob(os.path.join(root, host, "*.json")))
        assert files, f"{host} exported no trace"
        calls = agents = 0
        for path in files:
            c, a = check_export(path, secrets)
            calls, agents = calls + c, agents + a
        assert calls > 0, f"{host}: no provider call span"
        assert agents > 0, f"{host}: no /v1/run agent span"
        counts[host] = len(files)
        print(f"traces from {host}: {len(files)} exports, {calls} provider call spans, "
              f"{agents} agent spans, all parsed")
    # Every host answered the same requests: each exported as many (none lost after its answer).
    assert len(set(counts.values())) == 1, f"hosts exported different counts: {counts}"


if __name__ == "__main__":
    main()
