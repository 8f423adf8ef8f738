#!/usr/bin/env bash
# Gateway load test: `oma-host serve` (oma_gateway.wasm) against OMA on Node behind node:http and
# LiteLLM's proxy, side by side, on loopback only, against one shared loopback provider. See
# README.md here.
#
#   OMA_DIR=<OMA checkout>/packages/core bench/gateway-load/run.sh
#
# Knobs (environment), with their defaults:
#   DURATION=10            seconds measured per cell (one workload at one concurrency on one side)
#   WARMUP=3               seconds of warm-up per cell, at the cell's concurrency, not measured
#   CONCURRENCY="1 8 32"   connections kept busy by the load generator
#   WORKLOADS="chat-small chat-history-51 tools-rich-20 vision-1mib"
#   SIDES="oma-host oma-node litellm"   which servers to measure (oma-node alone needs no gateway
#                          build; litellm needs python3 and PyPI, once, for its virtual environment)
#   ROUTE=chat             what the gateway is asked: chat, OpenAI's chat completion on
#                          /v1/chat/completions, the same bytes LiteLLM's proxy gets (the model
#                          named anthropic/claude-sonnet-4-6); run, {"provider", "model",
#                          "messages"} on /v1/run. The OMA server always takes /v1/run.
#   PIN=0                  1: the server on CPU 1, the load generator and the provider on CPU 0
#   NODE_WORKERS=1         processes of the OMA server (node:cluster when > 1)
#   LITELLM_WORKERS=1      worker processes of LiteLLM's proxy (its --num_workers)
#   LITELLM_VERSION=1.108.7  the litellm[proxy] release installed into LITELLM_VENV
#   LITELLM_VENV=target/litellm-venv   the virtual environment (created when missing)
#   QUIET_WAIT=300         seconds to wait, at most, for no rustc and a 1-minute load below
#                          QUIET_LOAD (1.0) before starting; then it starts anyway, noting it
#   CELL_QUIET_WAIT=600    seconds to wait, at most, before each cell while a rustc runs
#   RESULTS_DIR=bench/gateway-load   where results.md, results.json and rps.svg are written
#   SKIP_BUILD=0           1: use the binaries already built
#   SERVE_ARGS=""          more options for `oma-host serve` (e.g. "--max-instances 16")
#   PRESSURE=1             1: also the pressure cases of oma-host serve (abandoned clients, large
#                          requests in parallel), written to pressure.md in RESULTS_DIR
#   PRESSURE_ONLY=0        1: the pressure cases only (no OMA, no cells; SIDES is oma-host)
#   ABANDONED=300          clients that post a run to a provider holding it, then leave after 1 s
#   LARGE_PARALLEL=24      large requests sent at once (each case)
#   BURST=256              connections of the burst before the idle case (the pool's slots)
#   IDLE_SECONDS=10        how long the server idles after the burst before its memory is read
#
# Every run is bounded: each server and the provider exit by themselves after a deadline, each
# request has a timeout, each cell lasts WARMUP + DURATION seconds plus start and stop.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
CONCURRENCY=${CONCURRENCY:-"1 8 32"}
WORKLOADS=${WORKLOADS:-"chat-small chat-history-51 tools-rich-20 vision-1mib"}
SIDES=${SIDES:-"oma-host oma-node litellm"}
ROUTE=${ROUTE:-chat}
[[ "$ROUTE" == chat || "$ROUTE" == run ]] || { echo "ROUTE must be chat or run" >&2; exit 2; }
PIN=${PIN:-0}
NODE_WORKERS=${NODE_WORKERS:-1}
LITELLM_WORKERS=${LITELLM_WORKERS:-1}
LITELLM_VERSION=${LITELLM_VERSION:-1.108.7}
LITELLM_VENV=${LITELLM_VENV:-$root/target/litellm-venv}
QUIET_WAIT=${QUIET_WAIT:-300}
QUIET_LOAD=${QUIET_LOAD:-1.0}
CELL_QUIET_WAIT=${CELL_QUIET_WAIT:-600}
RESULTS_DIR=${RESULTS_DIR:-$here}
SKIP_BUILD=${SKIP_BUILD:-0}
read -r -a serve_args <<< "${SERVE_ARGS:-}"
PRESSURE=${PRESSURE:-1}
PRESSURE_ONLY=${PRESSURE_ONLY:-0}
ABANDONED=${ABANDONED:-300}
LARGE_PARALLEL=${LARGE_PARALLEL:-24}
BURST=${BURST:-256}
IDLE_SECONDS=${IDLE_SECONDS:-10}
if [[ "$PRESSURE_ONLY" == 1 ]]; then SIDES=oma-host; PRESSURE=1; fi

MODEL=claude-sonnet-4-6
CHAT_MODEL=anthropic/$MODEL
CANNED_TEXT='Hello from the simulator.'
GATEWAY_WASM=$root/target/oma-guest/wasm32-wasip2/wasm-release/oma_gateway.wasm
OMA_HOST=$root/target/release/oma-host
PROVIDER=${LOOPBACK_PROVIDER:-$root/target/release/loopback-provider}
work=$root/target/gateway-load/run-$(date +%Y%m%dT%H%M%S)

say() { printf 'gateway-load: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }
has_side() { [[ " $SIDES " == *" $1 "* ]]; }

# --- Inputs and tools ---------------------------------------------------------------------------

if has_side oma-node; then
  [[ -n "${OMA_DIR:-}" ]] || die "OMA_DIR must name a built OMA package directory (<checkout>/packages/core, holding dist/index.js); bench/oma-node/README.md says how to build it. (SIDES=oma-host measures the gateway alone.)"
  [[ -f "$OMA_DIR/dist/index.js" ]] || die "OMA_DIR=$OMA_DIR has no dist/index.js: build OMA first (bench/oma-node/README.md)"
  OMA_DIR=$(cd "$OMA_DIR" && pwd)
fi
command -v node >/dev/null || die "node (20 or later) is required"
if has_side litellm; then
  command -v python3 >/dev/null || die "python3 is required for LiteLLM's proxy"
  if [[ ! -x "$LITELLM_VENV/bin/litellm" ]] ||
    [[ "$("$LITELLM_VENV/bin/python" -c 'from importlib.metadata import version; print(version("litellm"))')" != "$LITELLM_VERSION" ]]; then
    say "installing litellm[proxy]==$LITELLM_VERSION into $LITELLM_VENV (PyPI, a few minutes)"
    python3 -m venv "$LITELLM_VENV"
    "$LITELLM_VENV/bin/python" -m pip install -q "litellm[proxy]==$LITELLM_VERSION" >&2
  fi
fi
command -v curl >/dev/null || die "curl is required"

if ! command -v oha >/dev/null; then
  [[ -x "$HOME/.cargo/bin/oha" ]] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v oha >/dev/null; then
  say "oha not found: installing it with 'cargo install oha --locked' (a few minutes)"
  cargo install oha --locked >&2
  export PATH="$HOME/.cargo/bin:$PATH"
fi
oha --version >/dev/null || die "oha does not run"

if [[ "$SKIP_BUILD" != 1 ]]; then
  say "building (release): oma-host, loopback-provider, gen-workloads, and the guest's artifacts"
  cargo build --release -p oma-host -p oma-host-tests --bin oma-host --bin loopback-provider --bin gen-workloads >&2
fi
[[ -x "$PROVIDER" ]] || die "$PROVIDER is missing (cargo build --release -p oma-host-tests --bin loopback-provider)"
if has_side oma-host; then
  [[ -x "$OMA_HOST" ]] || die "$OMA_HOST is missing (cargo build --release -p oma-host)"
  "$OMA_HOST" --help 2>&1 | grep -q '^ *serve ' || die "this oma-host has no 'serve' command yet"
  [[ -f "$GATEWAY_WASM" ]] || die "$GATEWAY_WASM is missing (cargo run --release -p oma-guest-build)"
fi

workloads_dir=$root/target/workloads
for w in $WORKLOADS; do
  if [[ ! -f "$workloads_dir/$w.json" ]]; then
    say "writing the workloads to $workloads_dir"
    cargo run --release -q -p oma-host-tests --bin gen-workloads -- "$workloads_dir" >&2
    break
  fi
done
# The request bodies: {"provider", "model", "messages": <the workload>}, the same bytes for both.
bodies=$work/bodies
mkdir -p "$bodies"
for w in $WORKLOADS; do
  [[ -f "$workloads_dir/$w.json" ]] || die "no workload $w in $workloads_dir"
  node -e '
    const fs = require("fs");
    const [src, dst, model] = process.argv.slice(1);
    const messages = JSON.parse(fs.readFileSync(src, "utf8"));
    fs.writeFileSync(dst, JSON.stringify({ provider: "anthropic", model, messages }));
  ' "$workloads_dir/$w.json" "$bodies/$w.json" "$MODEL"
  # LiteLLM's proxy takes OpenAI chat messages: the same workload converted block for block, by
  # the converter of the Python benchmark (packages/python/bench/litellm_paired.py, to_openai).
  # With ROUTE=chat the gateway gets the same bytes, its model named <provider>/<model>
  # (LiteLLM's proxy is configured with that name too, so that both bodies are identical).
  if has_side litellm || [[ "$ROUTE" == chat ]]; then
    python3 -c '
import json, sys
sys.path.insert(0, sys.argv[1])
from litellm_paired import to_openai
src, dst, model = sys.argv[2:]
with open(src) as f:
    messages = json.load(f)
with open(dst, "w") as f:
    json.dump({"model": model, "messages": to_openai(messages)}, f, separators=(",", ":"))
' "$root/packages/python/bench" "$workloads_dir/$w.json" "$bodies/$w.chat.json" "$CHAT_MODEL"
  fi
done

# --- Helpers ------------------------------------------------------------------------------------

pin_server=() pin_client=()
if [[ "$PIN" == 1 ]]; then
  command -v taskset >/dev/null || die "PIN=1 needs taskset (util-linux)"
  pin_server=(taskset -c 1) pin_client=(taskset -c 0)
fi

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# Waits until no rustc runs and the 1-minute load is below QUIET_LOAD, QUIET_WAIT seconds at most.
wait_quiet() {
  local waited=0
  while :; do
    local load1 busy
    load1=$(cut -d' ' -f1 /proc/loadavg)
    busy=$(pgrep -x rustc >/dev/null && echo rustc || true)
    if [[ -z "$busy" ]] && awk -v l="$load1" -v q="$QUIET_LOAD" 'BEGIN { exit !(l < q) }'; then
      return 0
    fi
    if (( waited >= QUIET_WAIT )); then
      say "still busy after ${QUIET_WAIT}s (load $load1${busy:+, $busy running}); going on, noted in the results"
      echo "not quiet at start: load $load1${busy:+, $busy running}" >>"$work/notes.txt"
      return 0
    fi
    (( waited % 30 == 0 )) && say "waiting for a quiet machine (load $load1${busy:+, $busy running})"
    sleep 5
    waited=$((waited + 5))
  done
}

# The listening URL a server printed on stderr ("...: listening on http://ADDR"), 60 s at most.
wait_listening() {
  local log=$1 pid=$2 i
  for ((i = 0; i < 600; i++)); do
    local url
    url=$(cat "$log" "$log.ready" 2>/dev/null | grep -o 'listening on http://[^ ]*' | head -n1 | cut -d' ' -f3 || true)
    if [[ -n "$url" ]]; then echo "$url"; return 0; fi
    kill -0 "$pid" 2>/dev/null || { say "the server exited:"; cat "$log" >&2; return 1; }
    sleep 0.1
  done
  say "no 'listening on' line in $log after 60 s"
  return 1
}

# The process and its descendants.
tree_pids() {
  local pid=$1 child
  echo "$pid"
  for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do tree_pids "$child"; done
}

# Sum over the tree of a /proc/PID/status field, in kB.
tree_status_kb() {
  local pid=$1 field=$2 sum=0 p v
  for p in $(tree_pids "$pid"); do
    v=$(awk -v f="$field:" '$1 == f { print $2 }' /proc/"$p"/status 2>/dev/null || true)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}

# CPU time (user + system) of the tree, in clock ticks.
tree_cpu_ticks() {
  local pid=$1 sum=0 p v
  for p in $(tree_pids "$pid"); do
    v=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' /proc/"$p"/stat 2>/dev/null || true)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}

# Samples the tree's summed RSS every 0.2 s while the file $3 exists; writes the peak (kB) to $2.
sample_rss() {
  local pid=$1 out=$2 flag=$3 peak=0 now
  while [[ -e "$flag" ]] && kill -0 "$pid" 2>/dev/null; do
    now=$(tree_status_kb "$pid" VmRSS)
    (( now > peak )) && peak=$now
    echo "$peak" >"$out"
    sleep 0.2
  done
}

# Busy CPU ticks of the whole machine (all cores): user, nice, system, irq, softirq, steal.
machine_busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# Waits while a rustc runs (another build), CELL_QUIET_WAIT seconds at most.
wait_no_rustc() {
  local waited=0
  while pgrep -x rustc >/dev/null; do
    if (( waited >= CELL_QUIET_WAIT )); then
      say "a rustc still runs after ${CELL_QUIET_WAIT}s; going on"
      return 0
    fi
    (( waited % 60 == 0 )) && say "waiting for a build to end (rustc running)"
    sleep 5
    waited=$((waited + 5))
  done
}

# "REQUESTS CONNECTIONS" from the provider's counters (this request's own connection included).
provider_stats() {
  { curl -sf "$provider_url/__stats"; echo; } |
    sed -E 's/.*"requests":([0-9]+).*"connections":([0-9]+).*/\1 \2/'
}

# What each side is asked: the path, the extra headers and the body of a workload. LiteLLM's
# proxy takes an OpenAI chat completion on /v1/chat/completions, with its master key (it refuses
# to start without one); the gateway the same bytes on the same route (ROUTE=chat), or
# {"provider", "model", "messages"} on /v1/run (ROUTE=run), as the OMA server always does.
LITELLM_MASTER_KEY=sk-bench-master-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
is_chat() { [[ "$1" == litellm || ("$1" == oma-host && "$ROUTE" == chat) ]]; }
side_path() { is_chat "$1" && echo /v1/chat/completions || echo /v1/run; }
side_body() { is_chat "$1" && echo "$bodies/$2.chat.json" || echo "$bodies/$2.json"; }
side_headers() {
  if [[ "$1" == litellm ]]; then echo "authorization: Bearer $LITELLM_MASTER_KEY"; else echo "x-bench: 1"; fi
}

# One run through the server: must be 200 with success true and the canned output (for
# LiteLLM's proxy: the canned text as the first choice's content).
probe() {
  local url=$1 side=$2 workload=$3 out=$4
  local code
  code=$(curl -s -o "$out" -w '%{http_code}' -X POST -H 'content-type: application/json' \
    -H "$(side_headers "$side")" --max-time 60 --data-binary @"$(side_body "$side" "$workload")" \
    "$url$(side_path "$side")" || true)
  [[ "$code" == 200 ]] || { say "probe: status $code: $(head -c 600 "$out" 2>/dev/null)"; return 1; }
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const ok = process.argv[3] === "chat"
      ? r.choices?.[0]?.message?.content === process.argv[2]
      : r.success === true && r.output === process.argv[2];
    if (!ok) { console.error(JSON.stringify(r).slice(0, 600)); process.exit(1); }
  ' "$out" "$CANNED_TEXT" "$(is_chat "$side" && echo chat || echo run)" || { say "probe: the run did not succeed"; return 1; }
}

server_pid=
stop_server() {
  if [[ -n "$server_pid" ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; i++)); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}

provider_pid=
cleanup() {
  stop_server
  [[ -n "$provider_pid" ]] && kill "$provider_pid" 2>/dev/null || true
  [[ -n "${holding_pid:-}" ]] && kill "$holding_pid" 2>/dev/null || true
  rm -f "$work"/*.sampling
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Server deadline: the whole cell and a margin.
server_seconds=$((WARMUP + DURATION + 120))

# LiteLLM's proxy: one model, the provider's Anthropic Messages endpoint; no database (no
# DATABASE_URL), no callbacks; everything it would fetch at start (model cost map, beta headers,
# templates) read from its own package instead.
litellm_env=(
  LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS=True
  LITELLM_LOCAL_POLICY_TEMPLATES=True LITELLM_LOCAL_AUTOROUTER_PRESETS=True
  LITELLM_LOCAL_BLOG_POSTS=True LITELLM_MODE=PRODUCTION LITELLM_LOG=ERROR
  LITELLM_TELEMETRY=False NO_PROXY='*'
)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# START_WRAP: a command put in front of the server (the network check runs it under strace).
START_WRAP=()
start_server() {
  local side=$1 log=$2
  case "$side" in
    litellm)
      local port
      port=$(free_port)
      cat >"$work/litellm.yaml" <<YAML
model_list:
  - model_name: $CHAT_MODEL
    litellm_params:
      model: anthropic/$MODEL
      api_base: $provider_url
      api_key: os.environ/ANTHROPIC_API_KEY
litellm_settings:
  telemetry: false
YAML
      env -i PATH="$PATH" HOME="$HOME" ANTHROPIC_API_KEY=sk-bench LITELLM_MASTER_KEY="$LITELLM_MASTER_KEY" \
        "${litellm_env[@]}" \
        timeout -k 5 "$server_seconds" "${pin_server[@]}" "${START_WRAP[@]}" \
        "$LITELLM_VENV/bin/litellm" --config "$work/litellm.yaml" --host 127.0.0.1 --port "$port" \
        --num_workers "$LITELLM_WORKERS" >"$log.out" 2>"$log" &
      server_pid=$!
      # it prints no address line of its own: the script writes one when it answers
      local i
      for ((i = 0; i < 1800; i++)); do
        if curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/health/liveliness"; then
          echo "litellm: listening on http://127.0.0.1:$port" >"$log.ready"
          return 0
        fi
        kill -0 "$server_pid" 2>/dev/null || return 0
        sleep 0.1
      done
      return 0
      ;;
    oma-host)
      env -i PATH="$PATH" HOME="$HOME" \
        ANTHROPIC_BASE_URL="$provider_url" ANTHROPIC_API_KEY=sk-bench \
        OMA_GATEWAY_EGRESS="$provider_url" \
        timeout -k 5 "$server_seconds" "${pin_server[@]}" \
        "${START_WRAP[@]}" "$OMA_HOST" serve --addr 127.0.0.1:0 --component "$GATEWAY_WASM" \
        "${serve_args[@]}" >"$log.out" 2>"$log" &
      ;;
    oma-node)
      env -i PATH="$PATH" HOME="$HOME" OMA_DIR="$OMA_DIR" \
        ANTHROPIC_BASE_URL="$provider_url" ANTHROPIC_API_KEY=sk-bench \
        timeout -k 5 "$server_seconds" "${pin_server[@]}" \
        "${START_WRAP[@]}" node "$here/oma-server.mjs" --addr 127.0.0.1:0 --workers "$NODE_WORKERS" \
        --max-seconds "$server_seconds" >"$log.out" 2>"$log" &
      ;;
  esac
  server_pid=$!
}

# The server's own process: `timeout` (and taskset's exec) sit above it.
server_leaf() {
  local pid=$1 child
  child=$(cat /proc/"$pid"/task/*/children 2>/dev/null | awk '{ print $1 }')
  while [[ -n "$child" && "$(cat /proc/"$pid"/comm 2>/dev/null)" =~ ^(timeout|strace)$ ]]; do
    pid=$child
    child=$(cat /proc/"$pid"/task/*/children 2>/dev/null | awk '{ print $1 }')
  done
  echo "$pid"
}

# --- Machine state ------------------------------------------------------------------------------

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cores: $(nproc)"
  echo "cpu: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
  echo "memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "kernel: $(uname -sr)"
  echo "node: $(node --version)"
  echo "oha: $(oha --version | head -n1)"
  echo "rustc: $(rustc --version)"
  echo "commit: $(git rev-parse --short HEAD)"
  if has_side oma-node; then
    echo "oma: $(node -p 'const p = require(process.argv[1]); `${p.name} ${p.version}`' "$OMA_DIR/package.json")"
  fi
  if has_side oma-host && [[ -f "$GATEWAY_WASM" ]]; then
    echo "gateway: oma_gateway.wasm $(stat -c %s "$GATEWAY_WASM") bytes"
  fi
  echo "pinning: $([[ "$PIN" == 1 ]] && echo 'server on CPU 1; load generator and provider on CPU 0' || echo none)"
  echo "node workers: $NODE_WORKERS"
  echo "route: $([[ "$ROUTE" == chat ]] && echo "/v1/chat/completions on the gateway and LiteLLM's proxy (the same request bytes)" || echo "/v1/run on the gateway, /v1/chat/completions on LiteLLM's proxy")"
  echo "duration: ${DURATION}s after ${WARMUP}s of warm-up per cell"
} >"$work/machine.txt"

# --- The provider -------------------------------------------------------------------------------

wait_quiet
say "load average before: $(loadavg)"
echo "before: $(loadavg)" >"$work/loadavg.txt"

total_cells=$(( $(wc -w <<<"$WORKLOADS") * $(wc -w <<<"$CONCURRENCY") * $(wc -w <<<"$SIDES") ))
provider_seconds=$(( total_cells * (WARMUP + DURATION + 60) + 300 ))
"${pin_client[@]}" "$PROVIDER" --addr 127.0.0.1:0 --threads 2 --max-seconds "$provider_seconds" \
  2>"$work/provider.log" &
provider_pid=$!
provider_url=$(wait_listening "$work/provider.log" "$provider_pid") || die "the provider did not start"
say "provider: $provider_url"

if [[ "$PRESSURE_ONLY" != 1 ]]; then
# --- Priming -------------------------------------------------------------------------------------
# Each side started once and stopped before any cell: the first start of oma-host compiles the
# component (then cached on disk), which would otherwise land in the first cell's peak memory.
# Each side is primed under `strace -f -e trace=connect` when strace is there, with every workload
# probed and a second of load: a connect() to anything but 127.0.0.1 or a Unix socket (telemetry,
# a price list, a package index) stops the run. Recorded in notes.txt.
for side in $SIDES; do
  START_WRAP=()
  if command -v strace >/dev/null; then
    START_WRAP=(strace -f -qq -e trace=connect -o "$work/$side.prime.strace")
  fi
  start_server "$side" "$work/$side.prime.log"
  url=$(wait_listening "$work/$side.prime.log" "$server_pid") || { stop_server; die "$side did not start"; }
  for w in $WORKLOADS; do
    probe "$url" "$side" "$w" "$work/$side.prime.$w.json" || { stop_server; die "$side: the probe run failed on $w"; }
  done
  first=$(awk '{ print $1 }' <<<"$WORKLOADS")
  oha --no-tui --output-format json -z 1s -w -c 4 -t 60s -m POST -T application/json \
    -H "$(side_headers "$side")" -D "$(side_body "$side" "$first")" "$url$(side_path "$side")" \
    >"$work/$side.prime.oha.json" 2>>"$work/$side.prime.oha.log" || true
  stop_server
  START_WRAP=()
  if [[ -f "$work/$side.prime.strace" ]]; then
    total=$(grep -c 'connect(' "$work/$side.prime.strace" || true)
    outside=$(grep 'connect(' "$work/$side.prime.strace" | grep -v -e AF_UNIX -e AF_UNSPEC \
      -e 'inet_addr("127.0.0.1")' || true)
    if [[ -n "$outside" ]]; then
      say "$side connected outside loopback while primed:"; echo "$outside" >&2
      die "stopping: $side made a non-loopback connection (see $work/$side.prime.strace)"
    fi
    echo "$side: $total connect() calls while primed (every workload probed, 1 s of load), all to 127.0.0.1 or Unix sockets" >>"$work/notes.txt"
  fi
done

# --- The provider alone -------------------------------------------------------------------------
# Its capacity with each workload's body (the load generator posting straight to it, at the
# highest concurrency, 3 s): to show it is not the bottleneck of either side.
max_c=$(tr ' ' '\n' <<<"$CONCURRENCY" | sort -n | tail -n1)
provider_cells=$work/provider.jsonl
: >"$provider_cells"
for workload in $WORKLOADS; do
  "${pin_client[@]}" oha --no-tui --output-format json -z 3s -w -c "$max_c" -t 60s \
    -m POST -T application/json -D "$bodies/$workload.json" "$provider_url/v1/messages" \
    >"$work/provider.$workload.oha.json" 2>>"$work/provider.oha.log" || true
  printf '{"workload":"%s","concurrency":%s,"oha":"%s"}\n' "$workload" "$max_c" \
    "$work/provider.$workload.oha.json" >>"$provider_cells"
done
sleep 1

# --- The cells ----------------------------------------------------------------------------------

cells=$work/cells.jsonl
: >"$cells"
n=0
for workload in $WORKLOADS; do
  for c in $CONCURRENCY; do
    for side in $SIDES; do
      n=$((n + 1))
      tag=$side.$workload.c$c
      log=$work/$tag.server.log
      wait_no_rustc
      load_before=$(loadavg)
      say "[$n/$total_cells] $side $workload c=$c (load $load_before)"
      start_server "$side" "$log"
      url=$(wait_listening "$log" "$server_pid") || { stop_server; die "$side did not start"; }
      pid=$(server_leaf "$server_pid")
      probe "$url" "$side" "$workload" "$work/$tag.probe.json" || {
        stop_server; die "$side: the probe run failed on $workload (see $work)"; }

      "${pin_client[@]}" oha --no-tui --output-format json -z "${WARMUP}s" -w -c "$c" -t 60s \
        -m POST -T application/json -H "$(side_headers "$side")" -D "$(side_body "$side" "$workload")" \
        "$url$(side_path "$side")" \
        >"$work/$tag.warmup.json" 2>>"$work/$tag.oha.log" || true

      read -r before conns_before < <(provider_stats)
      cpu_before=$(tree_cpu_ticks "$pid")
      provider_cpu_before=$(tree_cpu_ticks "$provider_pid")
      touch "$work/$tag.sampling"
      sample_rss "$pid" "$work/$tag.rss" "$work/$tag.sampling" &
      sampler=$!
      busy_before=$(machine_busy_ticks)
      t0=$(date +%s%N)
      # bash's `time` gives oha's own CPU time (user and system, in seconds).
      TIMEFORMAT='%3U %3S'
      { time "${pin_client[@]}" oha --no-tui --output-format json -z "${DURATION}s" -w -c "$c" -t 60s \
          -m POST -T application/json -H "$(side_headers "$side")" -D "$(side_body "$side" "$workload")" \
          "$url$(side_path "$side")" \
          >"$work/$tag.oha.json" 2>>"$work/$tag.oha.log" || say "oha failed (see $work/$tag.oha.log)"
      } 2>"$work/$tag.oha.time"
      t1=$(date +%s%N)
      busy_after=$(machine_busy_ticks)
      read -r after conns_after < <(provider_stats)
      cpu_after=$(tree_cpu_ticks "$pid")
      provider_cpu_after=$(tree_cpu_ticks "$provider_pid")
      oha_cpu_s=$(awk '{ print $1 + $2 }' "$work/$tag.oha.time" 2>/dev/null || echo 0)
      hwm=$(tree_status_kb "$pid" VmHWM)
      rm -f "$work/$tag.sampling"
      wait "$sampler" 2>/dev/null || true
      probe "$url" "$side" "$workload" "$work/$tag.probe-after.json" \
        && probe_after=true || probe_after=false
      stop_server

      printf '{"side":"%s","workload":"%s","concurrency":%s,"oha":"%s","provider_requests":%s,"provider_connections":%s,"cpu_ticks":%s,"provider_cpu_ticks":%s,"oha_cpu_s":%s,"machine_busy_ticks":%s,"wall_s":%s,"clk_tck":%s,"vm_hwm_kb":%s,"rss_peak_kb":%s,"probe_after":%s,"load_before":"%s"}\n' \
        "$side" "$workload" "$c" "$work/$tag.oha.json" "$((after - before))" "$((conns_after - conns_before - 1))" \
        "$((cpu_after - cpu_before))" "$((provider_cpu_after - provider_cpu_before))" "$oha_cpu_s" \
        "$((busy_after - busy_before))" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')" \
        "$(getconf CLK_TCK)" "$hwm" "$(cat "$work/$tag.rss" 2>/dev/null || echo 0)" \
        "$probe_after" "$load_before" >>"$cells"
      sleep 1
    done
  done
  echo "after $workload: $(loadavg)" >>"$work/loadavg.txt"
done

echo "after: $(loadavg)" >>"$work/loadavg.txt"
say "load average after: $(loadavg)"

node "$here/report.mjs" "$work" "$RESULTS_DIR"
fi

# --- Pressure (oma-host serve only) -------------------------------------------------------------
# Two cases, each on a fresh server with its default limits (1024 requests in flight, a 1 GiB
# memory budget for all instances together), the peak memory of the server's process sampled
# throughout:
#
# 1. Abandoned clients: ABANDONED clients post a run while the provider holds every request for
#    60 s, and leave after 1 s. Recorded: how many provider connections are still open 2 s after
#    the last client left (0 when every abandoned run was cancelled), and how long /healthz takes
#    then.
# 2. Large requests in parallel: LARGE_PARALLEL bodies of a million empty text blocks (26 MB,
#    under the 32 MiB body limit; refused before parsing), then LARGE_PARALLEL valid 16 MiB
#    conversations, all at once. Recorded: the statuses (200, 413, 503) and the peak memory.
if [[ "$PRESSURE" == 1 ]] && has_side oma-host; then
  say "pressure: abandoned clients and large requests in parallel"
  wait_no_rustc
  holding_log=$work/holding-provider.log
  "$PROVIDER" --addr 127.0.0.1:0 --threads 2 --hold-ms 60000 --max-seconds 900 2>"$holding_log" &
  holding_pid=$!
  holding_url=$(wait_listening "$holding_log" "$holding_pid") || die "the holding provider did not start"
  # The provider's open connections, less the one this question itself opens.
  open_connections() {
    local n
    n=$({ curl -sf "$holding_url/__stats"; echo; } | sed -E 's/.*"open":([0-9]+).*/\1/')
    echo $((n - 1))
  }
  # pressure_server LOG [PROVIDER_URL]: oma-host serve with its default limits.
  pressure_server() {
    local log=$1 upstream=${2:-$holding_url}
    env -i PATH="$PATH" HOME="$HOME" \
      ANTHROPIC_BASE_URL="$upstream" ANTHROPIC_API_KEY=sk-bench \
      OMA_GATEWAY_EGRESS="$upstream" \
      timeout -k 5 600 "$OMA_HOST" serve --addr 127.0.0.1:0 --component "$GATEWAY_WASM" \
      >"$log.out" 2>"$log" &
    server_pid=$!
  }
  rss_kb() { tree_status_kb "$1" VmRSS; }

  # 1. Abandoned clients.
  pressure_server "$work/pressure.abandoned.log"
  url=$(wait_listening "$work/pressure.abandoned.log" "$server_pid") || die "oma-host did not start"
  pid=$(server_leaf "$server_pid")
  touch "$work/pressure.abandoned.sampling"
  sample_rss "$pid" "$work/pressure.abandoned.rss" "$work/pressure.abandoned.sampling" &
  sampler=$!
  run_body='{"provider": "anthropic", "model": "'"$MODEL"'", "prompt": "hi"}'
  clients=()
  for ((i = 0; i < ABANDONED; i++)); do
    curl -s -o /dev/null --max-time 1 -X POST -H 'content-type: application/json' \
      --data-binary "$run_body" "$url/v1/run" &
    clients+=($!)
  done
  held=0
  for ((i = 0; i < 8; i++)); do
    sleep 0.1
    now=$(open_connections)
    (( now > held )) && held=$now
  done
  wait "${clients[@]}" 2>/dev/null || true
  sleep 2
  left_open=$(open_connections)
  health_s=$(curl -s -o /dev/null -w '%{time_total}' --max-time 30 "$url/healthz" || echo timeout)
  abandoned_hwm=$(tree_status_kb "$pid" VmHWM)
  rm -f "$work/pressure.abandoned.sampling"; wait "$sampler" 2>/dev/null || true
  stop_server

  # 2. Large requests in parallel.
  node -e '
    const fs = require("fs");
    const [dir] = process.argv.slice(1);
    const blocks = new Array(1000000).fill("{\"type\":\"text\",\"text\":\"\"}").join(",");
    fs.writeFileSync(dir + "/million-blocks.json", `[{"role":"user","content":[${blocks}]}]`);
    const text = "x".repeat(16 << 20);
    fs.writeFileSync(dir + "/text-16mib.json",
      JSON.stringify([{ role: "user", content: [{ type: "text", text }] }]));
  ' "$work"
  pressure_server "$work/pressure.large.log"
  url=$(wait_listening "$work/pressure.large.log" "$server_pid") || die "oma-host did not start"
  pid=$(server_leaf "$server_pid")
  touch "$work/pressure.large.sampling"
  sample_rss "$pid" "$work/pressure.large.rss" "$work/pressure.large.sampling" &
  sampler=$!
  : >"$work/pressure.large.codes"
  for body in million-blocks text-16mib; do
    clients=()
    for ((i = 0; i < LARGE_PARALLEL; i++)); do
      curl -s -o /dev/null -w "$body %{http_code}\n" --max-time 120 -X POST \
        -H 'content-type: application/json' --data-binary @"$work/$body.json" \
        "$url/v1/validate" >>"$work/pressure.large.codes" &
      clients+=($!)
    done
    wait "${clients[@]}" 2>/dev/null || true
  done
  large_health=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$url/healthz" || echo none)
  large_hwm=$(tree_status_kb "$pid" VmHWM)
  sleep "$IDLE_SECONDS"
  large_idle=$(rss_kb "$pid")
  rm -f "$work/pressure.large.sampling"; wait "$sampler" 2>/dev/null || true
  stop_server
  kill "$holding_pid" 2>/dev/null || true

  # 3. The pool after a burst: each instance's memory goes back to the pooling allocator, whose
  #    warm slots keep up to ServeOptions::keep_resident of it resident. A fresh server, BURST
  #    connections of vision-1mib runs (the fast provider) for 5 s, then IDLE_SECONDS of nothing.
  idle_w=vision-1mib
  [[ -f "$bodies/$idle_w.json" ]] || idle_w=$(awk '{ print $1 }' <<<"$WORKLOADS")
  pressure_server "$work/pressure.idle.log" "$provider_url"
  url=$(wait_listening "$work/pressure.idle.log" "$server_pid") || die "oma-host did not start"
  pid=$(server_leaf "$server_pid")
  probe "$url" oma-host "$idle_w" "$work/pressure.idle.probe.json" || die "the idle case's probe failed"
  idle_start=$(rss_kb "$pid")
  oha --no-tui --output-format json -z 5s -w -c "$BURST" -t 60s -m POST -T application/json \
    -D "$bodies/$idle_w.json" "$url/v1/run" >"$work/pressure.idle.oha.json" 2>>"$work/pressure.idle.oha.log" || true
  idle_burst=$(rss_kb "$pid")
  sleep "$IDLE_SECONDS"
  idle_after=$(rss_kb "$pid")
  idle_hwm=$(tree_status_kb "$pid" VmHWM)
  idle_codes=$(node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    console.log(Object.entries(r.statusCodeDistribution ?? {}).map(([k, v]) => `${v} x ${k}`).join(", ") || "none");
  ' "$work/pressure.idle.oha.json" 2>/dev/null || echo unknown)
  stop_server

  {
    echo "# Pressure cases of oma-host serve"
    echo
    echo "Written by bench/gateway-load/run.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD), load $(loadavg)."
    echo
    echo "| case | result | peak MiB (VmHWM) |"
    echo "| --- | --- | ---: |"
    echo "| $ABANDONED abandoned runs (provider holds 60 s, clients leave after 1 s) | provider connections open: $held while held, $left_open 2 s after the clients left; /healthz then in ${health_s} s | $((abandoned_hwm / 1024)) |"
    for body in million-blocks text-16mib; do
      codes=$(awk -v b="$body" '$1 == b { print $2 }' "$work/pressure.large.codes" | sort | uniq -c | awk '{ printf "%s%s x %s", sep, $1, $2; sep = ", " }')
      echo "| $LARGE_PARALLEL x $body to /v1/validate at once | $codes | |"
    done
    echo "| the large cases together | /healthz afterwards: $large_health; resident ${IDLE_SECONDS} s later: $((large_idle / 1024)) MiB | $((large_hwm / 1024)) |"
    echo "| burst of $BURST connections of $idle_w runs for 5 s ($idle_codes), then ${IDLE_SECONDS} s idle | resident: $((idle_start / 1024)) MiB before, $((idle_burst / 1024)) MiB at the end of the burst, $((idle_after / 1024)) MiB after ${IDLE_SECONDS} s idle | $((idle_hwm / 1024)) |"
  } >"$RESULTS_DIR/pressure.md"
  say "pressure: written to $RESULTS_DIR/pressure.md"
  cat "$RESULTS_DIR/pressure.md" >&2
fi
