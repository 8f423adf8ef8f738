#!/usr/bin/env bash
# CI for the oma-component npm package; call it from the repository root (any directory works).
# Needs Node >= 20 with npm, and Rust with rustup (the wasm32 targets the guest build asks for).
#
# 1. installs the dev dependencies from package-lock.json and checks that `npm install` leaves
#    the committed lock file as it is;
# 2. builds the package (the portable-json world only, transpiled into gen/);
# 3. runs `npm test` (the API, the hostile-provider tests, the OMA compatibility corpus; set
#    OMA_DIR to a built OMA packages/core to compare with OMA live);
# 4. packs the tarball once and tests it installed in an empty project with no cargo, rustc or
#    rustup on PATH (test-pack/);
# 5. runs that tarball in a browser, Deno and Bun (test-browser/): a page bundled by esbuild and
#    by Vite (test-browser's pinned tools, `npm ci`) in headless Chromium (Debian's `chromium`,
#    installed with apt-get when missing), Deno from PyPI's `deno` (pinned, in a venv kept under
#    ~/.cache/oma-component), Bun from npm's binary package; about 45 s with the installs;
# and exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

command -v node >/dev/null || { echo "ci.sh: node is not installed (Node >= 20 needed)" >&2; exit 1; }
command -v npm >/dev/null || { echo "ci.sh: npm is not installed" >&2; exit 1; }
command -v cargo >/dev/null || { echo "ci.sh: cargo is not installed (install Rust with rustup)" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then echo "ci.sh: Node >= 20 needed, found $(node --version)" >&2; exit 1; fi
echo "ci.sh: node $(node --version), npm $(npm --version), $(cargo --version)"

npm ci --no-audit --no-fund
lock=$(mktemp)
cp package-lock.json "$lock"
npm install --no-audit --no-fund --ignore-scripts >/dev/null
if ! cmp -s package-lock.json "$lock"; then
  echo "ci.sh: npm install changed package-lock.json:" >&2
  diff "$lock" package-lock.json | head -40 >&2 || true
  cp "$lock" package-lock.json
  rm -f "$lock"
  exit 1
fi
rm -f "$lock"
echo "ci.sh: npm install leaves package-lock.json as committed"

npm run build
status=0
npm test || status=$?

packdir=$(mktemp -d)
trap 'rm -rf "$packdir"' EXIT
tarball="$packdir/$(npm pack --silent --pack-destination "$packdir" | tail -n 1)"
packed=$(wc -c < "$tarball")
echo "ci.sh: packed $(basename "$tarball"): $packed bytes"
# What an `npm install` downloads is held to 747,200 bytes (docs/performance.md, "What users download"):
# the 600 KB goal held until OMA's structured output and context callbacks joined the
# `wasm-release` build (608,692 bytes on 3 December 2026); the browser's core-module loaders
# (gen/web/, gen/bytes/) added 590 bytes on 6 December 2026, and OMA's bash classifier and
# redaction coming from the component instead of copies in src/ about 7 KB (627,636 bytes);
# `oma-component/observability` (OMA's sinks, their types and README section) 14,332 bytes on
# 6 December 2026 (643,233 bytes against 628,901 for the same tree without it): the ceiling
# rose by that, rounded up (632,000 -> 646,400); its trace stores (InMemoryTraceStore,
# TraceStoreExporter, materializeRun, their types) 11,341 bytes more (654,604): 657,800; the
# `mcp`, `eval` and `eval/file` subpaths (sources, types and README sections) 29,344 bytes,
# measured against the same tree without them (654,599 -> 683,943 bytes): 657,800 -> 687,200;
# `oma-component/observability/file` (FileTraceStore over that durable log) about 3 KB
# (687,242 bytes with it on 6 December 2026): 690,200; OMA's trace records, materializeRun and the
# execution receipt in the component 51,870 bytes (739,112): 742,200.
# The agent's own LLM adapter (its step in the core module, src/agent/llm-adapter.js and its
# types) 18,141 bytes (757,253 on 6 December 2026): 760,400. OpenMultiAgent's observability
# (the run's records to its sinks, src/observability/run-records.js), SharedMemory and
# InMemoryStore (src/memory/), their types and README sections 5,693 bytes, measured against the
# same tree without them (757,326 -> 763,019 on 6 December 2026): 766,200.
# The package's own world, `portable-json` (only the JSON functions the package calls, so neither
# jco's glue nor the core module carries the typed ones): 684,155 bytes on 6 December 2026
# (-78,864 against 763,019): lowered to 694,400, about 1.5% above. The 600 KB goal is still
# missed: the core module alone gzips to about 498 KB (docs/performance.md).
# OMA's built-in scorers, judges and online evaluation (their rules in the core module, src/eval/
# and the types) 51,921 bytes (736,076 on 6 December 2026): 751,000, about 2% above.
# The core's sorts and JSON parsing each compiled once (the core module 1,519,037 -> 1,428,687
# bytes, 541,524 -> 519,198 gzipped): 712,412 bytes on 6 December 2026; 727,938 once merged with
# the direct reading of OMA messages and online evaluation's rules (750,888 without the cut):
# 742,500, about 2% above. The 600 KB goal is still missed
# (docs/performance.md, "Where the core module's bytes go").
# The Node transport's one deadline timer (src/transport.js) and a `stream`-only `event` step in
# json-driver (212 bytes of core module) 862 bytes (741,846 -> 742,708 on 7 December 2026):
# 743,400. Sensitive-data processing reading a record's text in parts (SensitiveDataProcessor
# as fast as the copies it replaced) 3,732 bytes (740,289 -> 744,021 on 7 December 2026, before
# the transport's timer): 747,200.
if [ "$packed" -gt 747200 ]; then
    echo "ci.sh: the tarball is $packed bytes, over its 747200-byte ceiling" >&2
    status=1
fi
OMA_TARBALL="$tarball" npm run test:pack || status=$?

# The browser, Deno and Bun (test-browser/browser.test.js). Chromium is Debian's package: no
# browser is downloaded by any tool (puppeteer-core drives the installed one).
chromium=${OMA_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "ci.sh: installing Debian's chromium for the browser test"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "ci.sh: $chromium is missing (install Debian's chromium, or set OMA_CHROMIUM)" >&2
    exit 1
  fi
fi
deno_version=2.9.8
deno_venv="${XDG_CACHE_HOME:-$HOME/.cache}/oma-component/deno-$deno_version"
if [ ! -x "$deno_venv/bin/deno" ]; then
  python3 -m venv "$deno_venv"
  "$deno_venv/bin/pip" install --quiet --disable-pip-version-check "deno==$deno_version"
fi
(cd test-browser && npm ci --no-audit --no-fund >/dev/null)
OMA_TARBALL="$tarball" OMA_CHROMIUM="$chromium" OMA_DENO="$deno_venv/bin/deno" npm run test:browser || status=$?
if [ "$status" -ne 0 ]; then echo "ci.sh: FAILED" >&2; exit "$status"; fi
echo "ci.sh: all passed"
