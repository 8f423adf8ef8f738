#!/usr/bin/env python3
"""The packaging test: a pure-Python wheel that carries the component, installed into a fresh
virtual environment whose PATH has no cargo and no rustc, and the package's tests run there.

    python wheel_test.py            # from packages/python, after build_component.py (ci.sh)

Steps: build the wheel from the already-built ``src/oma_component/oma_portable.wasm`` (nothing
is compiled: the wheel is ``py3-none-any``), make a venv, install the wheel and the test tools
from PyPI, then with cargo and rustc off PATH: run a script twice against a loopback provider
(the first use says on standard error that it compiles the component and where it caches it,
the second loads it from the cache and says nothing), run pytest on tests/ against the
installed package, and run the typing check (typecheck/check.sh) against it. Prints a closing
'wheel: N passed, N failed' line.
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
import asyncio, json, shutil, sys, time, oma_component as oma
base = sys.argv[1]
assert oma.__file__.startswith(sys.prefix), oma.__file__
assert shutil.which("cargo") is None and shutil.which("rustc") is None
started = time.perf_counter()
oma.default_runtime()  # the first use: compiles the component, or loads it from the cache
ready_ms = round((time.perf_counter() - started) * 1000)
agent = oma.Agent(name="wheel", model="claude-test", provider="anthropic", base_url=base, api_key="sk-wheel-secret",
                  call={"egress": "offline", "timeout_ms": 5000})
result = agent.run([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
assert result["success"], result
events = list(agent.stream("hi"))
assert events[-1]["type"] == "done"
async def main():
    a = oma.AsyncAgent(name="wheel", model="claude-test", provider="anthropic", base_url=base,
                       api_key="sk-wheel-secret", call={"egress": "offline", "timeout_ms": 5000})
    return await a.run("hi")
assert asyncio.run(main())["success"]
try:
    oma.validate("null")
except oma.InvalidMessageError as e:
    assert e.message == "messages must be an array, got null"
assert "sk-wheel-secret" not in json.dumps([result, events])
print(json.dumps({"output": result["output"], "cache": oma.default_runtime().cache_status, "ready_ms": ready_ms}))
'''

TOOLS = ["pytest>=7", "mypy==2.4.1", "pyright==1.1.414", "mcp==2.3.0"]


def without_rust(path: str) -> str:
    """PATH without the directories that hold cargo or rustc."""
    keep = [d for d in path.split(os.pathsep)
            if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc"))]
    return os.pathsep.join(keep)


def main() -> int:
    work = tempfile.mkdtemp(prefix="oma-wheel-")
    server = Loopback()
    passed = failed = 0
    try:
        if not os.path.exists(os.path.join(HERE, "src", "oma_component", "oma_portable.wasm")):
            raise SystemExit("src/oma_component/oma_portable.wasm is missing: run build_component.py first")
        dist = os.path.join(work, "dist")
        env = dict(os.environ, PATH=without_rust(os.environ.get("PATH", "")))
        env.pop("PYTHONPATH", None)
        # Built with no Rust on PATH: the wheel only packs what is there.
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, HERE], check=True,
                       env=env)
        (wheel,) = glob.glob(os.path.join(dist, "oma_component-*.whl"))
        assert wheel.endswith("-py3-none-any.whl"), wheel
        names = zipfile.ZipFile(wheel).namelist()
        assert "oma_component/oma_portable.wasm" in names, names
        assert "oma_component/py.typed" in names, names
        venv = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        py = os.path.join(venv, "bin", "python")
        subprocess.run([py, "-m", "pip", "install", "-q", wheel, *TOOLS], check=True, env=env)
        env["OMA_COMPONENT_CACHE_DIR"] = os.path.join(work, "cache")
        env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env["PATH"]
        outs, errs = [], []
        for _ in range(2):  # the second run loads the compiled component from the cache
            done = subprocess.run([py, "-c", SCRIPT, server.base], env=env, cwd=work, check=True,
                                  capture_output=True, text=True, timeout=120)
            outs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            errs.append(done.stderr)
        assert outs[0]["output"] == "Hello from the loopback.", outs
        assert [o["cache"] for o in outs] == ["miss", "hit"], outs
        said = [line for line in errs[0].splitlines() if line.startswith("oma_component: compiling")]
        assert len(said) == 1 and env["OMA_COMPONENT_CACHE_DIR"] in said[0], errs[0]
        assert "compiling" not in errs[1], errs[1]
        print(f"wheel {os.path.basename(wheel)} installed without Rust and ran: {outs}; first use said: {said[0]}")
        # What a user downloads and waits for, recorded in every CI run (docs/performance.md).
        print(f"wheel: {os.path.getsize(wheel)} bytes; first use {outs[0]['ready_ms']} ms (compiling), "
              f"then {outs[1]['ready_ms']} ms (from the cache)")
        passed += 1
        tests = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(HERE, "tests")],
                               env=env, cwd=work, timeout=900)
        print(f"wheel: pytest against the installed wheel exited {tests.returncode}")
        passed, failed = (passed + 1, failed) if tests.returncode == 0 else (passed, failed + 1)
        typing = subprocess.run(["bash", os.path.join(HERE, "typecheck", "check.sh"), py], env=env, timeout=600)
        print(f"wheel: the typing check against the installed wheel exited {typing.returncode}")
        passed, failed = (passed + 1, failed) if typing.returncode == 0 else (passed, failed + 1)
    except Exception as e:  # noqa: BLE001
        print(f"wheel test failed: {e!r}", file=sys.stderr)
        failed += 1
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"wheel: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
