"""The traces the gateway exported during run.sh, parsed with OpenTelemetry's own protobuf
schema (`ExportTraceServiceRequest` from PyPI's `opentelemetry-proto`): every body parses, every
provider call is a `chat <model>` client span with the GenAI attributes under a server span of
its request, and no key or token is in any of them."""

import glob
import os
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

CLIENT, SERVER = 3, 2


def main():
    directory, *secrets = sys.argv[1:]
    files = sorted(glob.glob(os.path.join(directory, "*.json")))
    assert files, f"no trace was exported to {directory}"
    calls = 0
    for path in files:
        text = open(path, encoding="utf-8").read()
        for secret in secrets:
            assert secret not in text, f"{path} holds a secret"
        request = json_format.Parse(text, ExportTraceServiceRequest())
        spans = [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
        servers = [s for s in spans if s.kind == SERVER]
        assert len(servers) == 1, f"{path}: {len(servers)} server spans"
        for span in spans:
            if span.kind != CLIENT:
                continue
            calls += 1
            attributes = {a.key: a.value for a in span.attributes}
            assert span.name.startswith("chat "), span.name
            assert span.parent_span_id == servers[0].span_id, path
            assert span.trace_id == servers[0].trace_id, path
            assert attributes["gen_ai.operation.name"].string_value == "chat"
            for key in ["gen_ai.provider.name", "gen_ai.request.model"]:
                assert attributes[key].string_value, f"{path}: no {key}"
            if "error.type" not in attributes:
                assert attributes["gen_ai.usage.input_tokens"].int_value > 0, path
                assert attributes["gen_ai.response.model"].string_value, path
    assert calls > 0, "no provider call span"
    print(f"traces: {len(files)} exports, {calls} provider call spans, all parsed")


if __name__ == "__main__":
    main()
