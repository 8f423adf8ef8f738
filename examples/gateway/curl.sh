#!/usr/bin/env bash
# The gateway with curl: `oma-host serve` (the gateway it carries) in front of a provider on
# loopback (`loopback-provider`, which answers every wire format with canned bodies), then the
# four routes as a client calls them. Offline; every address is 127.0.0.1.
#
#   bash examples/gateway/curl.sh          # builds oma-host and loopback-provider first
#
# Against a real provider, leave out the provider and set its key instead:
#   ANTHROPIC_API_KEY=... cargo run --release -p oma-host -- serve --addr 127.0.0.1:8080
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build -q -p oma-host -p oma-host-tests --bin oma-host --bin loopback-provider
bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug
logs=$(mktemp -d)
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$logs"; }
pids=()
trap cleanup EXIT

# Waits for "listening on http://ADDR" in a log and prints the URL.
listening() {
    for _ in $(seq 1 300); do
        url=$(grep -o 'listening on http://[0-9.:]*' "$1" | head -1 | cut -d' ' -f3 || true)
        [ -n "$url" ] && { echo "$url"; return; }
        sleep 0.1
    done
    echo "no server in $1:" >&2; cat "$1" >&2; exit 1
}

"$bin/loopback-provider" --addr 127.0.0.1:0 --max-seconds 120 2>"$logs/provider" &
pids+=($!)
provider=$(listening "$logs/provider")

OPENAI_BASE_URL="$provider/v1" OPENAI_API_KEY=sk-example \
    "$bin/oma-host" serve --addr 127.0.0.1:0 2>"$logs/gateway" &
pids+=($!)
gateway=$(listening "$logs/gateway")
echo "gateway: $gateway, provider: $provider"

show() { echo; echo "\$ curl $*"; curl -sS -w '\n(HTTP %{http_code})\n' "$@"; }

show "$gateway/healthz"
# A valid conversation comes back validated; a video URL that is not http(s) gets OMA's message.
show "$gateway/v1/validate" -H 'content-type: application/json' \
    --data @examples/conversations/media.json
show "$gateway/v1/validate" -H 'content-type: application/json' \
    --data @examples/conversations/invalid-video-url.json
# The request that would be sent, key redacted; nothing is sent.
show "$gateway/v1/format" -H 'content-type: application/json' \
    -d '{"provider": "openai", "model": "gpt-4o", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello?"}]}]}'
# One agent run through the provider on loopback.
show "$gateway/v1/run" -H 'content-type: application/json' \
    -d '{"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"}'

# The run answered, the refusal refused: what CI checks of this example.
curl -sf "$gateway/v1/run" -H 'content-type: application/json' \
    -d '{"provider": "openai", "model": "gpt-4o", "prompt": "Hello?"}' | grep -q '"success":true'
status=$(curl -s -o /dev/null -w '%{http_code}' "$gateway/v1/validate" \
    -H 'content-type: application/json' --data @examples/conversations/invalid-video-url.json)
[ "$status" = 422 ]
echo; echo "examples/gateway/curl.sh: ok"
