#!/usr/bin/env bash
# CI for the Python package, run from the repository root on a fresh machine:
#   bash packages/python/ci.sh
# Creates a virtual environment, installs what the package and its tests need from PyPI, builds
# oma_portable.wasm with cargo (needs Rust via rustup), runs pytest, then the wheel test (build
# the wheel, install it into a fresh venv, run a script there against a loopback provider).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PKG="$ROOT/packages/python"
VENV="${OMA_PY_VENV:-$PKG/.venv}"
PY="${PYTHON:-python3}"

cd "$PKG"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "wasmtime==50.0.1" "urllib3>=2.3,<3" "httpx>=0.27,<1" "pytest>=7" setuptools wheel

echo "== building oma_portable.wasm (profile ${OMA_WASM_PROFILE:-release})"
"$VENV/bin/python" build_component.py --profile "${OMA_WASM_PROFILE:-release}"

echo "== pytest"
status=0
PYTHONPATH="$PKG/src" timeout 900 "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests || status=$?

echo "== wheel test"
timeout 900 "$VENV/bin/python" wheel_test.py || status=$?

exit "$status"
