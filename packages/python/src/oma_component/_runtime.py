"""The wasmtime embedding: one engine, one compiled component, one store and instance.

Every call into the component goes through :meth:`Runtime.call`, which holds the runtime's
lock, and which turns a trap into :class:`ComponentTrapError` after replacing the dead
instance with a fresh one (``generation`` counts instances, so handles made by an older
instance are recognised and re-created by their owners).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from importlib import metadata, resources
from typing import Any, Dict, List, Optional, Tuple

import wasmtime
from wasmtime import Engine, Store, WasmtimeError
from wasmtime import _ffi as ffi
from wasmtime.component import Linker, Record, ResultType, Variant
from wasmtime.component._enter import enter_wasm

from . import _cache
from ._errors import ComponentTrapError, error_from_wit

DRIVER = "oma:agent/driver@0.1.0"
CODEC = "oma:agent/codec@0.1.0"

_FUNCS: List[Tuple[str, str]] = [
    (DRIVER, "[static]agent.create-json"),
    (DRIVER, "[method]agent.run-json"),
    (DRIVER, "[method]agent.stream-json"),
    (DRIVER, "[method]agent.prompt-json"),
    (DRIVER, "[method]agent.run-json-parts"),
    (DRIVER, "[method]agent.stream-json-parts"),
    (DRIVER, "[method]agent.prompt-json-parts"),
    (DRIVER, "[method]agent.get-history-json"),
    (DRIVER, "[method]agent.reset"),
    (DRIVER, "[method]session.next"),
    (DRIVER, "[method]session.answer"),
    (DRIVER, "[method]session.cancel"),
    (DRIVER, "run-agent-json"),
    (CODEC, "messages-from-json"),
    (CODEC, "messages-to-json"),
    (CODEC, "validate-messages"),
    (CODEC, "format-request"),
    (CODEC, "parse-response"),
    (CODEC, "environment-names"),
    (CODEC, "redact-sensitive-text"),
    (CODEC, "is-sensitive-name"),
    (CODEC, "classify-bash-command"),
    (CODEC, "materialize-run"),
    (CODEC, "build-execution-receipt"),
    (CODEC, "process-trace-record"),
    (CODEC, "score-builtin"),
    (CODEC, "judge"),
    (CODEC, "online-evaluation"),
]


#: The properties of wasmtime-py's component types that describe the type itself: fixed for the
#: life of a type object.
_TYPE_PROPERTIES = ("cases", "element", "elements", "err", "fields", "names", "ok", "payload")


def _read_types_once() -> None:
    """Makes wasmtime-py read each component type's structure once instead of on every value.

    wasmtime-py (48.0.0, the version this package pins) reads a type's structure through its C
    API (a variant's cases, a record's fields, a list's element, a result's `ok` and `err`...),
    building fresh type objects each time, whenever it lowers or lifts a value of that type,
    and a variant's cases twice per value: about 54 walks of variant cases alone per run of a
    short prompt, a quarter of the run's time in Python. The package keeps its functions' types
    for the life of the runtime and a type never changes, so each of these properties is read
    once per type object and kept on it (with the answer to "is this variant tagged", which is
    computed from them). Applied only to the properties this is written for; anything else in
    a newer wasmtime-py is left as it is.
    """
    from wasmtime.component import _types

    def kept(name: str, read: Any) -> property:
        slot = "_oma_" + name

        def get(self: Any) -> Any:
            known = self.__dict__.get(slot, _MISSING)
            if known is _MISSING:
                known = read(self)
                self.__dict__[slot] = known
            return known

        return property(get, doc=getattr(read, "__doc__", None))

    for cls in vars(_types).values():
        if not (isinstance(cls, type) and issubclass(cls, _types.ValType)):
            continue
        for name in _TYPE_PROPERTIES:
            prop = cls.__dict__.get(name)
            if isinstance(prop, property) and prop.fget is not None and prop.fset is None:
                setattr(cls, name, kept(name, prop.fget))
    tagged = getattr(_types, "VariantLikeType", None)
    method = getattr(tagged, "_tagged", None) if tagged is not None else None
    if callable(method):

        def _tagged(self: Any) -> bool:
            known = self.__dict__.get("_oma_tagged")
            if known is None:
                known = method(self)
                self.__dict__["_oma_tagged"] = known
            return bool(known)

        setattr(tagged, "_tagged", _tagged)


_MISSING = object()
_read_types_once()


def wasmtime_version() -> str:
    try:
        return metadata.version("wasmtime")
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def bundled_wasm_path() -> str:
    """The path of the ``oma_portable.wasm`` shipped inside this package."""
    override = os.environ.get("OMA_COMPONENT_WASM")
    if override:
        return override
    return str(resources.files(__package__).joinpath("oma_portable.wasm"))


class _Fn:
    """A component function with its types looked up once."""

    __slots__ = ("func", "params", "result", "tagged")

    def __init__(self, func: Any, store: Store) -> None:
        fty = func.type(store)
        self.func = func
        self.params = [ty for _name, ty in fty.params]
        self.result = fty.result
        self.tagged = isinstance(self.result, ResultType) and self.result._tagged()


class Runtime:
    """The component loaded into wasmtime.

    ``memory_limit`` caps the instance's linear memory in bytes (a run that needs more traps,
    and the instance is replaced). ``cache_dir=None`` uses the default per-user cache;
    ``cache=False`` turns the compiled-code cache off.
    """

    def __init__(
        self,
        wasm_path: Optional[str] = None,
        *,
        cache: bool = True,
        cache_dir: Optional[str] = None,
        memory_limit: Optional[int] = None,
    ) -> None:
        self.wasm_path = wasm_path or bundled_wasm_path()
        with open(self.wasm_path, "rb") as f:
            wasm = f.read()
        self.engine = Engine()
        directory = (cache_dir or _cache.default_cache_dir()) if cache and os.environ.get("OMA_COMPONENT_CACHE", "1") != "0" else None
        self.component, self.cache_status = _cache.load_or_compile(self.engine, wasm, wasmtime_version(), directory)
        self.memory_limit = memory_limit
        self._lock = threading.RLock()
        self._pending_drops: List[Tuple[int, Any]] = []
        self.generation = 0
        self.traps = 0
        self._instantiate()

    # -- instances -------------------------------------------------------------------------

    def _instantiate(self) -> None:
        store = Store(self.engine)
        if self.memory_limit is not None:
            store.set_limits(memory_size=self.memory_limit)
        instance = Linker(self.engine).instantiate(store, self.component)
        fns: Dict[str, _Fn] = {}
        for iface, name in _FUNCS:
            parent = instance.get_export_index(store, iface)
            index = instance.get_export_index(store, name, parent)
            func = instance.get_func(store, index) if index is not None else None
            if func is None:
                raise RuntimeError(f"the component does not export {iface}#{name}")
            fns[name] = _Fn(func, store)
        self.store = store
        self.instance = instance
        self._fns = fns
        self.generation += 1
        self._pending_drops.clear()

    def replace_instance(self) -> None:
        """Throws the current instance away and builds a fresh one (every handle is lost)."""
        with self._lock:
            self._instantiate()

    # -- calls -----------------------------------------------------------------------------

    def drop_later(self, generation: int, handle: Any) -> None:
        """Queues a resource handle to be dropped before the next call (safe from finalizers)."""
        self._pending_drops.append((generation, handle))

    def drop(self, generation: int, handle: Any) -> None:
        """Drops a resource handle now, if its instance is still the current one."""
        with self._lock:
            if generation == self.generation:
                try:
                    handle.drop(self.store)
                except WasmtimeError:
                    pass

    def _drain_drops(self) -> None:
        while self._pending_drops:
            generation, handle = self._pending_drops.pop()
            if generation == self.generation:
                try:
                    handle.drop(self.store)
                except WasmtimeError:
                    pass

    def call(self, name: str, *args: Any, generation: Optional[int] = None) -> Any:
        """Calls an export; returns the ok value, raises the ``error`` as an OmaError.

        ``generation`` is the instance that made the resource handles among ``args``; a handle of
        a replaced instance is never passed to the new one (wasmtime aborts the process on a
        handle from another store), the call fails with ComponentTrapError instead."""
        with self._lock:
            if generation is not None and generation != self.generation:
                raise ComponentTrapError(f"the instance of this session was replaced after a trap ({name})")
            if self._pending_drops:
                self._drain_drops()
            fn = self._fns[name]
            try:
                value = _invoke(fn, self.store, args)
            except WasmtimeError as e:
                self.traps += 1
                message = str(e)
                try:
                    self._instantiate()
                except Exception:  # pragma: no cover - the compiled component is fine
                    pass
                raise ComponentTrapError(f"the component trapped in {name}: {message}") from None
        return _unwrap(fn, value)

    def lock(self) -> threading.RLock:
        return self._lock


def _invoke(fn: _Fn, store: Store, params: Tuple[Any, ...]) -> Any:
    """``Func.__call__`` of wasmtime-py with the function's types looked up once."""
    n_params = len(fn.params)
    param_capi = (ffi.wasmtime_component_val_t * max(n_params, 1))()
    n = 0
    try:
        for ty, val in zip(fn.params, params):
            if isinstance(val, _Lowered):
                val.write(ctypes.pointer(param_capi[n]))
            else:
                ty.convert_to_c(store, val, ctypes.pointer(param_capi[n]))
            n += 1
        result_space = None
        result_capi = None
        result_len = 0
        if fn.result is not None:
            result_space = ffi.wasmtime_component_val_t()
            result_capi = ctypes.byref(result_space)
            result_len = 1

        def run() -> Any:
            return ffi.wasmtime_component_func_call(
                ctypes.byref(fn.func._func), store._context(), param_capi, n, result_capi, result_len
            )

        enter_wasm(run)
        if result_space is None:
            return None
        return fn.result.convert_from_c(result_space)
    finally:
        for i in range(n):
            ffi.wasmtime_component_val_delete(ctypes.byref(param_capi[i]))


class _Lowered:
    """A parameter that lowers itself (the fast path for ``answer.chunk(list<u8>)``)."""

    def write(self, ptr: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError


_U8_TEMPLATES: Optional[List[bytes]] = None


def _u8_templates() -> List[bytes]:
    """The memory image of a ``wasmtime_component_val_t`` holding each u8 value."""
    global _U8_TEMPLATES
    if _U8_TEMPLATES is None:
        out = []
        for b in range(256):
            val = ffi.wasmtime_component_val_t()
            val.kind = ffi.WASMTIME_COMPONENT_U8
            val.of.u8 = b
            out.append(ctypes.string_at(ctypes.addressof(val), ctypes.sizeof(val)))
        _U8_TEMPLATES = out
    return _U8_TEMPLATES


class ChunkAnswer(_Lowered):
    """``answer::chunk(bytes)`` lowered with one memmove instead of one FFI call per byte."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def write(self, ptr: Any) -> None:
        templates = _u8_templates()
        raw_list = ffi.wasmtime_component_vallist_t()
        ffi.wasmtime_component_vallist_new_uninit(raw_list, len(self.data))
        if self.data:
            image = b"".join([templates[b] for b in self.data])
            ctypes.memmove(raw_list.data, image, len(image))
        payload = ffi.wasmtime_component_val_t()
        payload.kind = ffi.WASMTIME_COMPONENT_LIST
        payload.of.list = raw_list
        ptr.contents.kind = ffi.WASMTIME_COMPONENT_VARIANT
        ptr.contents.of.variant.discriminant = ffi.str_to_capi("chunk")
        ptr.contents.of.variant.val = ffi.wasmtime_component_val_new(ctypes.byref(payload))


def _unwrap(fn: _Fn, value: Any) -> Any:
    if not isinstance(fn.result, ResultType):
        return value
    if fn.tagged:
        assert isinstance(value, Variant)
        if value.tag == "err":
            raise error_from_wit(value.payload)
        return value.payload
    if isinstance(value, Record) and hasattr(value, "retryable") and hasattr(value, "kind"):
        raise error_from_wit(value)
    return value


def dumps(value: Any) -> str:
    """JSON text for the component: compact, UTF-8 kept as is (half the time of ASCII escaping)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def record(**fields: Any) -> Record:
    """A WIT record value; ``snake_case`` keyword names become ``kebab-case`` field names."""
    r = Record()
    for key, value in fields.items():
        setattr(r, key.replace("_", "-"), value)
    return r


_default: Optional[Runtime] = None
_default_lock = threading.Lock()


def default_runtime() -> Runtime:
    """The process-wide runtime, loaded on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Runtime()
        return _default


def set_default_runtime(runtime: Optional[Runtime]) -> None:
    global _default
    with _default_lock:
        _default = runtime
