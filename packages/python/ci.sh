#!/usr/bin/env bash
# CI for the Python package, run from the repository root on a fresh machine:
#   bash packages/python/ci.sh
# Creates a virtual environment, installs what the package and its tests need from PyPI, builds
# oma_portable.wasm with cargo (the `wasm-release` build, the one the JavaScript package ships
# and oma-guest-build's size check builds), runs pytest on the source tree, then the wheel
# test: a pure-Python wheel carrying that component, installed into a fresh venv with no cargo
# and no rustc on PATH, where the tests and the typing check (mypy --strict, pyright) run again.
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
"$VENV/bin/python" -m pip install -q "wasmtime==48.0.0" "urllib3>=2.3,<3" "httpx>=0.27,<1" "sniffio>=1.3,<2" "pytest>=7" \
    "mypy==2.4.1" "pyright==1.1.414" "pydantic>=2,<3" "mcp==2.3.0" setuptools wheel

echo "== building oma_portable.wasm (profile ${OMA_WASM_PROFILE:-wasm-release})"
"$VENV/bin/python" build_component.py --profile "${OMA_WASM_PROFILE:-wasm-release}"

echo "== pytest (source tree)"
status=0
PYTHONPATH="$PKG/src" timeout 900 "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests || status=$?

echo "== wheel test (no Rust on PATH: pytest and the typing check against the installed wheel)"
timeout 1800 "$VENV/bin/python" wheel_test.py || status=$?

exit "$status"
