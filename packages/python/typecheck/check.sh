#!/usr/bin/env bash
# The typing check: a typical user program (sync and async) passes `mypy --strict` and pyright
# (strict), and a program with the usual mistakes fails both, on each marked line.
#   bash check.sh PYTHON      (PYTHON: an interpreter with oma_component, mypy and pyright)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
PY="${1:-python3}"
BIN="$(dirname "$PY")"
export PYRIGHT_PYTHON_IGNORE_WARNINGS=1   # no version check against PyPI: pyright runs offline
status=0
"$PY" -m mypy --strict --no-incremental user_program.py || status=1
"$BIN/pyright" --pythonpath "$PY" -p pyrightconfig.json || status=1
expected=$(grep -c "# TYPO" typo_program.py)
for checker in mypy pyright; do
    if [ "$checker" = mypy ]; then
        out=$("$PY" -m mypy --strict --no-incremental typo_program.py 2>&1 || true)
    else
        out=$("$BIN/pyright" --pythonpath "$PY" --level error typo_program.py 2>&1 || true)
    fi
    missed=0
    for line in $(grep -n "# TYPO" typo_program.py | cut -d: -f1); do
        if ! grep -qE "typo_program.py:$line(:[0-9]+)?( -)?:? error" <<<"$out"; then
            echo "$checker did not catch the mistake on typo_program.py line $line"
            missed=1
        fi
    done
    if [ "$missed" = 0 ]; then echo "$checker: all $expected mistakes caught"; else status=1; echo "$out"; fi
done
exit "$status"
