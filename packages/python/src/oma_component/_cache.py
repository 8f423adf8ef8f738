"""A per-user cache of the compiled component.

Compiling ``oma_portable.wasm`` takes about half a second; loading the compiled form takes a few
milliseconds. Loading compiled code means running native code that wasmtime produced, so a cache
file is used only when it is as trustworthy as the user's own files:

* the directory is ``$OMA_COMPONENT_CACHE_DIR``, else ``$XDG_CACHE_HOME/oma_component``, else
  ``~/.cache/oma_component``; it is created with mode 0700 and refused (no cache at all) unless
  it is a real directory (not a symlink) owned by the current user and not writable by group or
  others;
* a file is opened without following symlinks and refused unless it is a regular file owned by
  the user and not writable by group or others;
* its name is keyed by the sha256 of the component, the wasmtime version and the machine, and
  its header repeats that key and holds the sha256 of the compiled bytes, which must match
  before wasmtime sees a byte (a truncated, corrupted or foreign file is never deserialized:
  the component is compiled again and the file replaced);
* files are written to a temporary file in the same directory (mode 0600), flushed, and renamed
  into place, so a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import os
import platform
import stat
import sys
import tempfile
import warnings
from typing import Any, Optional, Tuple

MAGIC = b"OMA-CWASM\x01"


class CacheRefused(Exception):
    """The cache directory or file is not safe to use."""


def default_cache_dir() -> str:
    explicit = os.environ.get("OMA_COMPONENT_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "oma_component")


def _check_owned_private(st: os.stat_result, what: str) -> None:
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CacheRefused(f"{what} is not owned by the current user")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheRefused(f"{what} is writable by group or others")


def ensure_dir(path: str) -> str:
    """Creates the cache directory (0700) if needed and checks it is safe; returns it."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise CacheRefused(f"cache path {path} is not a directory (or is a symlink)")
    _check_owned_private(st, f"cache directory {path}")
    return path


def cache_key(wasm: bytes, wasmtime_version: str) -> str:
    digest = hashlib.sha256(wasm).hexdigest()
    machine = f"{platform.system()}-{platform.machine()}".lower()
    return f"{digest}-wasmtime{wasmtime_version}-{machine}"


def _read_private_file(path: str) -> Optional[bytes]:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as e:  # ELOOP for a symlink, EACCES, ...
        raise CacheRefused(f"cannot open cache file {path}: {e}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheRefused(f"cache file {path} is not a regular file")
        _check_owned_private(st, f"cache file {path}")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read(directory: str, key: str) -> Optional[bytes]:
    """The compiled bytes stored under ``key``, or None when absent, foreign or damaged."""
    path = os.path.join(directory, key + ".cwasm")
    data = _read_private_file(path)
    if data is None:
        return None
    header_key = key.encode()
    head_len = len(MAGIC) + 2 + len(header_key) + 32
    if len(data) < head_len or not data.startswith(MAGIC):
        return None
    klen = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 2], "big")
    if klen != len(header_key) or data[len(MAGIC) + 2 : len(MAGIC) + 2 + klen] != header_key:
        return None
    digest = data[len(MAGIC) + 2 + klen : head_len]
    payload = data[head_len:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def write(directory: str, key: str, compiled: bytes) -> str:
    """Stores ``compiled`` under ``key`` atomically; returns the path."""
    header_key = key.encode()
    blob = b"".join(
        [MAGIC, len(header_key).to_bytes(2, "big"), header_key, hashlib.sha256(compiled).digest(), compiled]
    )
    path = os.path.join(directory, key + ".cwasm")
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".cwasm", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _say_compiling(where: str) -> None:
    """One line on standard error before the compile that a first use costs (about a second):
    what is happening and where the result goes. ``OMA_COMPONENT_QUIET=1`` leaves it out."""
    if os.environ.get("OMA_COMPONENT_QUIET", "") not in ("", "0"):
        return
    print(f"oma_component: compiling the WebAssembly component for wasmtime (once; {where})",
          file=sys.stderr, flush=True)


def load_or_compile(engine: Any, wasm: bytes, wasmtime_version: str, directory: Optional[str]) -> Tuple[Any, str]:
    """Returns ``(component, how)`` with ``how`` one of ``hit``, ``miss``, ``off``, ``refused``."""
    from wasmtime.component import Component

    if directory is None:
        _say_compiling("the compiled-code cache is off, so this happens in every process")
        return Component(engine, wasm), "off"
    try:
        directory = ensure_dir(directory)
        key = cache_key(wasm, wasmtime_version)
        compiled = read(directory, key)
    except (CacheRefused, OSError) as e:
        warnings.warn(f"oma_component: not using the compiled-code cache: {e}", RuntimeWarning, stacklevel=3)
        _say_compiling("not cached")
        return Component(engine, wasm), "refused"
    if compiled is not None:
        try:
            return Component.deserialize(engine, compiled), "hit"
        except Exception:
            pass  # incompatible engine settings: compile and replace below
    _say_compiling(f"caching it in {directory}")
    component = Component(engine, wasm)
    try:
        write(directory, key, bytes(component.serialize()))
    except OSError as e:
        warnings.warn(f"oma_component: could not write the compiled-code cache: {e}", RuntimeWarning, stacklevel=3)
    return component, "miss"
