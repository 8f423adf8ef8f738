#!/usr/bin/env bash
# CI for the oma-component npm package; call it from the repository root (any directory works).
# Needs Node >= 20 with npm, and Rust with rustup (the wasm32 targets the guest build asks for).
# Installs the package's dev dependencies from package-lock.json, builds the component and its
# jco transpilation, runs `npm test` and the packaging test, and exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

command -v node >/dev/null || { echo "ci.sh: node is not installed (Node >= 20 needed)" >&2; exit 1; }
command -v npm >/dev/null || { echo "ci.sh: npm is not installed" >&2; exit 1; }
command -v cargo >/dev/null || { echo "ci.sh: cargo is not installed (install Rust with rustup)" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then echo "ci.sh: Node >= 20 needed, found $(node --version)" >&2; exit 1; fi
echo "ci.sh: node $(node --version), npm $(npm --version), $(cargo --version)"

npm ci --no-audit --no-fund
npm run build
status=0
npm test || status=$?
npm run test:pack || status=$?
if [ "$status" -ne 0 ]; then echo "ci.sh: FAILED" >&2; exit "$status"; fi
echo "ci.sh: all passed"
