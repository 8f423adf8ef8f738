import os
import stat

import pytest

import oma_component as oma
from oma_component import _cache
from oma_component._runtime import Runtime, bundled_wasm_path

BIG = "x" * (40 << 20)


@pytest.fixture(scope="module")
def small():
    """A runtime whose instance may use at most 32 MiB, so a 40 MiB input traps."""
    return Runtime(memory_limit=32 << 20)


def test_trap_is_an_oma_error_and_the_instance_is_replaced(loop, anthropic, small):
    agent = oma.Agent(runtime=small, history=[{"role": "user", "content": [{"type": "text", "text": "kept"}]}],
                      **anthropic)
    agent.prompt("before the trap")
    history = agent.get_history()
    assert len(history) == 3
    generation = small.generation
    with pytest.raises(oma.ComponentTrapError) as info:
        agent.run(BIG)
    e = info.value
    assert isinstance(e, oma.OmaError)
    assert e.name == "ComponentTrapError" and e.code == "COMPONENT_TRAP" and e.retryable
    assert "trap" in e.message
    assert small.generation == generation + 1 and small.traps >= 1
    # the same agent works again, with its committed history
    assert agent.run("after")["success"]
    assert agent.get_history() == history
    # codec calls work on the fresh instance too
    assert oma.validate([], runtime=small) == []


def test_trap_in_codec_call(small):
    with pytest.raises(oma.ComponentTrapError):
        oma.validate('"' + BIG + '"', runtime=small)
    assert oma.validate([], runtime=small) == []


def test_a_broken_instance_is_replaced(loop, anthropic, small, monkeypatch):
    """Whatever wasmtime reports from inside a call (a trap, a dead instance) replaces the instance."""
    from wasmtime import WasmtimeError
    from oma_component import _runtime

    agent = oma.Agent(runtime=small, **anthropic)
    generation = small.generation
    real = _runtime._invoke

    def broken(fn, store, params):
        raise WasmtimeError("wasm trap: cannot enter component instance")

    monkeypatch.setattr(_runtime, "_invoke", broken)
    with pytest.raises(oma.ComponentTrapError, match="cannot enter component instance"):
        agent.run("x")
    monkeypatch.setattr(_runtime, "_invoke", real)
    assert small.generation == generation + 1
    assert agent.run("x")["success"]


def test_sessions_are_dropped(loop, anthropic):
    rt = oma.default_runtime()
    agent = oma.Agent(**anthropic)
    for _ in range(20):
        agent.run("x")
    # nothing leaks into the step loop: a fresh session still starts at 'send'
    assert agent.run("y")["success"]
    del rt


def test_cache_second_load_hits(tmp_path):
    cache_dir = str(tmp_path / "c")
    first = Runtime(cache_dir=cache_dir)
    assert first.cache_status == "miss"
    st = os.stat(cache_dir)
    assert stat.S_IMODE(st.st_mode) == 0o700
    files = os.listdir(cache_dir)
    assert len(files) == 1 and files[0].endswith(".cwasm")
    assert stat.S_IMODE(os.stat(os.path.join(cache_dir, files[0])).st_mode) == 0o600
    second = Runtime(cache_dir=cache_dir)
    assert second.cache_status == "hit"
    assert oma.validate([], runtime=second) == []


def _cache_file(cache_dir):
    (name,) = [n for n in os.listdir(cache_dir) if n.endswith(".cwasm")]
    return os.path.join(cache_dir, name)


def test_tampered_cache_file_is_not_used(tmp_path):
    cache_dir = str(tmp_path / "c")
    Runtime(cache_dir=cache_dir)
    path = _cache_file(cache_dir)
    data = bytearray(open(path, "rb").read())
    data[-100] ^= 0xFF
    with open(path, "wb") as f:
        f.write(data)
    rt = Runtime(cache_dir=cache_dir)
    assert rt.cache_status == "miss"  # recompiled and replaced
    assert Runtime(cache_dir=cache_dir).cache_status == "hit"


def test_foreign_cache_file_is_not_used(tmp_path):
    cache_dir = str(tmp_path / "c")
    Runtime(cache_dir=cache_dir)
    path = _cache_file(cache_dir)
    # a file for another key (another component or wasmtime) under this name is refused
    data = open(path, "rb").read().replace(b"wasmtime", b"wasmtimX", 1)
    with open(path, "wb") as f:
        f.write(data)
    assert Runtime(cache_dir=cache_dir).cache_status == "miss"
    # raw compiled code without our header is refused
    raw = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(raw[raw.index(b"\x7fELF"):] if b"\x7fELF" in raw else b"junk")
    assert Runtime(cache_dir=cache_dir).cache_status == "miss"


def test_group_writable_cache_file_is_refused(tmp_path):
    cache_dir = str(tmp_path / "c")
    Runtime(cache_dir=cache_dir)
    path = _cache_file(cache_dir)
    os.chmod(path, 0o666)
    with pytest.warns(RuntimeWarning, match="writable by group or others"):
        rt = Runtime(cache_dir=cache_dir)
    assert rt.cache_status == "refused"


def test_symlinked_cache_file_is_refused(tmp_path):
    cache_dir = str(tmp_path / "c")
    Runtime(cache_dir=cache_dir)
    path = _cache_file(cache_dir)
    real = str(tmp_path / "elsewhere.cwasm")
    os.rename(path, real)
    os.symlink(real, path)
    with pytest.warns(RuntimeWarning):
        assert Runtime(cache_dir=cache_dir).cache_status == "refused"


def test_unsafe_cache_directory_is_refused(tmp_path):
    cache_dir = tmp_path / "open"
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o777)
    with pytest.warns(RuntimeWarning, match="writable by group or others"):
        rt = Runtime(cache_dir=str(cache_dir))
    assert rt.cache_status == "refused"
    assert os.listdir(cache_dir) == []
    link = tmp_path / "link"
    safe = tmp_path / "safe"
    safe.mkdir(mode=0o700)
    link.symlink_to(safe)
    with pytest.warns(RuntimeWarning, match="not a directory"):
        assert Runtime(cache_dir=str(link)).cache_status == "refused"


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a file owned by someone else")
def test_cache_directory_of_another_user_is_refused(tmp_path):
    cache_dir = tmp_path / "theirs"
    cache_dir.mkdir(mode=0o700)
    os.chown(cache_dir, 12345, 12345)
    with pytest.warns(RuntimeWarning, match="not owned by the current user"):
        assert Runtime(cache_dir=str(cache_dir)).cache_status == "refused"


def test_cache_key_names_component_and_wasmtime():
    key = _cache.cache_key(b"abc", "50.0.1")
    assert "wasmtime50.0.1" in key and key.startswith("ba7816bf")


def test_bundled_component_exists():
    assert os.path.getsize(bundled_wasm_path()) > 100_000


def test_session_of_a_replaced_instance_fails_cleanly(loop, anthropic, small):
    agent = oma.Agent(runtime=small, **anthropic)
    events = agent.stream("x")  # the session exists; no step taken yet
    with pytest.raises(oma.ComponentTrapError):
        oma.validate('"' + BIG + '"', runtime=small)
    with pytest.raises(oma.ComponentTrapError, match="replaced"):
        next(events)
    assert agent.run("x")["success"]


def test_the_components_types_are_read_once() -> None:
    # wasmtime-py reads a type's structure through its C API on every access; the package keeps
    # the first reading on the type object (the types of its functions never change), so a run
    # does not walk the session's variant types again for every value it lifts.
    from wasmtime.component import ResultType, VariantType

    from oma_component._runtime import default_runtime

    fn = default_runtime()._fns["[method]session.next"]
    assert isinstance(fn.result, ResultType)
    poll = fn.result.ok
    assert poll is fn.result.ok
    assert isinstance(poll, VariantType)
    assert poll.cases is poll.cases
    assert [name for name, _ in poll.cases] == ["step", "waiting", "finished"]
    assert poll._tagged() is poll._tagged()
