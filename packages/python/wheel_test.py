#!/usr/bin/env python3
"""The packaging test: build the wheel, install it into a fresh virtual environment, and run a
small script there against a loopback provider. Prints a closing 'N passed, N failed' line.

    python wheel_test.py            # from packages/python (ci.sh runs it)
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tests"))

from loopback import Loopback  # noqa: E402

SCRIPT = r'''
import json, sys, oma_component as oma
base = sys.argv[1]
assert oma.__file__.startswith(sys.prefix), oma.__file__
agent = oma.Agent(name="wheel", model="claude-test", provider="anthropic", base_url=base, api_key="sk-wheel-secret",
                  call={"egress": "offline", "timeout_ms": 5000})
result = agent.run([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
assert result["success"], result
events = list(agent.stream("hi"))
assert events[-1]["type"] == "done"
try:
    oma.validate("null")
except oma.InvalidMessageError as e:
    assert e.message == "messages must be an array, got null"
assert "sk-wheel-secret" not in json.dumps([result, events])
print(json.dumps({"output": result["output"], "cache": oma.default_runtime().cache_status}))
'''


def main() -> int:
    work = tempfile.mkdtemp(prefix="oma-wheel-")
    server = Loopback()
    try:
        dist = os.path.join(work, "dist")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, HERE], check=True)
        (wheel,) = glob.glob(os.path.join(dist, "oma_component-*.whl"))
        names = zipfile.ZipFile(wheel).namelist()
        assert "oma_component/oma_portable.wasm" in names, names
        venv = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        py = os.path.join(venv, "bin", "python")
        subprocess.run([py, "-m", "pip", "install", "-q", wheel], check=True)
        env = dict(os.environ, OMA_COMPONENT_CACHE_DIR=os.path.join(work, "cache"))
        env.pop("PYTHONPATH", None)
        outs = []
        for _ in range(2):  # the second run loads the compiled component from the cache
            done = subprocess.run([py, "-c", SCRIPT, server.base], env=env, cwd=work, check=True,
                                  stdout=subprocess.PIPE, text=True, timeout=120)
            outs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        assert outs[0]["output"] == "Hello from the loopback.", outs
        assert [o["cache"] for o in outs] == ["miss", "hit"], outs
        print(f"wheel {os.path.basename(wheel)} installed in a fresh venv and ran: {outs}")
        print("wheel: 1 passed, 0 failed")
        return 0
    except Exception as e:  # noqa: BLE001
        print(f"wheel test failed: {e!r}", file=sys.stderr)
        print("wheel: 0 passed, 1 failed")
        return 1
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
