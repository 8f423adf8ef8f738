"""The agent's own LLM adapter (OMA's ``AgentConfig.adapter``), for both APIs: the object stays
on this side and the component's configuration names it. Each model call comes as a
``call-model`` step; the adapter's ``chat`` (or, for a stream with ``text_deltas=True``, its
``stream``) answers it, and what it returns goes back as OMA JSON for the component to check
(``docs/agent.md``, "Your own LLM adapter"). Nothing here judges an answer: a malformed one is
the component's to refuse, with a message naming the field."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, Dict, Iterator, Mapping, Optional

from wasmtime.component import Variant

from .._runtime import dumps as _dumps
from .._runtime import record

#: OMA's ``LLMAdapter.capabilities.echoesReasoning`` words.
_ECHOES_REASONING = ("never", "own-issued", "tool-use-only")


def adapter_declaration(adapter: Any) -> Dict[str, Any]:
    """Checks an adapter and returns the component's declaration of it (``{name,
    capabilities?}``): a string ``name``, a callable ``chat``, ``stream`` callable when given,
    and ``capabilities`` (``{"echoes_reasoning"}`` or OMA's ``{"echoesReasoning"}``, as a
    mapping or an attribute) one of OMA's words."""
    name = getattr(adapter, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError("adapter.name must be a non-empty string")
    if not callable(getattr(adapter, "chat", None)):
        raise TypeError("adapter.chat must be callable")
    stream = getattr(adapter, "stream", None)
    if stream is not None and not callable(stream):
        raise TypeError("adapter.stream must be callable")
    declaration: Dict[str, Any] = {"name": name}
    capabilities = getattr(adapter, "capabilities", None)
    if capabilities is not None:
        if not isinstance(capabilities, Mapping):
            raise TypeError("adapter.capabilities must be a mapping")
        echoes = capabilities.get("echoes_reasoning", capabilities.get("echoesReasoning"))
        if echoes is not None:
            if echoes not in _ECHOES_REASONING:
                words = ", ".join(repr(w) for w in _ECHOES_REASONING)
                raise TypeError(f"adapter.capabilities echoes_reasoning must be one of {words}")
            declaration["capabilities"] = {"echoesReasoning": echoes}
    return declaration


def _status(error: Any) -> Optional[int]:
    for key in ("status", "status_code", "statusCode"):
        status = getattr(error, key, None)
        if isinstance(status, int) and not isinstance(status, bool) and 0 <= status <= 65535:
            return status
    return None


def thrown_fields(error: Any) -> Dict[str, Any]:
    """What an adapter raised (or its stream yielded as an ``error`` event) as OMA's fields:
    its class name (or a ``name`` attribute), message, ``code`` and HTTP ``status`` (or
    ``status_code``), by which the component classifies the run's failure as OMA does."""
    if isinstance(error, Mapping):
        name, message = error.get("name"), error.get("message")
        code, status = error.get("code"), error.get("status")
    elif isinstance(error, BaseException):
        attr = getattr(error, "name", None)
        name = attr if isinstance(attr, str) and attr else type(error).__name__
        message = getattr(error, "message", None)
        if not isinstance(message, str):
            message = str(error)
        code, status = getattr(error, "code", None), _status(error)
    else:
        name, message, code, status = "Error", str(error), None, None
    fields: Dict[str, Any] = {"name": name if isinstance(name, str) and name else "Error",
                              "message": message if isinstance(message, str) else str(message)}
    if isinstance(code, (str, int)) and not isinstance(code, bool):
        fields["code"] = str(code)
    if isinstance(status, int) and not isinstance(status, bool) and 0 <= status <= 65535:
        fields["status"] = status
    return fields


def failed(error: Any) -> Variant:
    """The ``model-failed`` answer for what the adapter raised."""
    f = thrown_fields(error)
    return Variant("model-failed", record(name=f["name"], message=f["message"], code=f.get("code"),
                                          status=f.get("status")))


def _json(value: Any, what: str) -> Any:
    """``value`` as JSON text, or the failure saying why it has none."""
    try:
        return _dumps(value)
    except (TypeError, ValueError) as e:
        return failed(TypeError(f"the adapter's {what} is not JSON: {e}"))


def response_answer(response: Any) -> Variant:
    """``chat``'s return value as the ``model-response`` answer."""
    text = _json(response, "LLMResponse")
    return text if isinstance(text, Variant) else Variant("model-response", text)


def event_answer(event: Any) -> Variant:
    """One event of the adapter's stream as the ``model-event`` answer (OMA's ``{type, data}``;
    an ``error`` event's data as OMA's error fields)."""
    if isinstance(event, Mapping) and event.get("type") == "error":
        return Variant("model-event", _dumps({"type": "error", "data": thrown_fields(event.get("data"))}))
    text = _json(event, "stream event")
    return text if isinstance(text, Variant) else Variant("model-event", text)


def _last(event: Any) -> bool:
    return isinstance(event, Mapping) and event.get("type") in ("done", "error")


_NOT_ITERABLE = TypeError("adapter.stream must return an iterable or an async iterable of stream events")


def streams(adapter: Any, call: Mapping[str, Any], text_deltas: bool) -> bool:
    """Whether this call goes to the adapter's ``stream``: a streamed run that asked for its
    text pieces (``text_deltas=True``), with an adapter that has one; otherwise ``chat``, as
    OMA's runner calls it for every model call."""
    return bool(call.get("stream")) and text_deltas and callable(getattr(adapter, "stream", None))


class ModelCall:
    """One model call in the sync API: :meth:`first` starts it and gives the first answer; for
    a stream, :meth:`next` gives each further one as the session asks. Both run on the host
    loop's worker threads, one at a time; an ``async def`` adapter runs on an event loop of the
    call's own. :meth:`close` (from the loop's thread) lets go of the stream."""

    def __init__(self, adapter: Any, call: Mapping[str, Any], text_deltas: bool) -> None:
        self._adapter = adapter
        self._call = call
        self._stream = streams(adapter, call, text_deltas)
        self._iterator: Any = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._lock = threading.Lock()
        self._busy = False
        self._over = False

    def streaming(self) -> bool:
        """Whether the stream has more to give when asked."""
        return not self._over and self._iterator is not None

    def first(self) -> Variant:
        messages, options = self._call["messages"], self._call["options"]
        try:
            if not self._stream:
                try:
                    value = self._adapter.chat(messages, options)
                    if inspect.isawaitable(value):
                        value = self._run(value)
                finally:
                    self._over = True
                    self._release()
                return response_answer(value)
            stream = self._adapter.stream(messages, options)
            if inspect.isawaitable(stream):
                stream = self._run(stream)
            if hasattr(stream, "__anext__"):
                self._iterator = stream
            elif hasattr(stream, "__iter__") and not isinstance(stream, (str, bytes, Mapping)):
                self._iterator = iter(stream)
            else:
                self._over = True
                return failed(_NOT_ITERABLE)
        except Exception as e:  # noqa: BLE001 - what the adapter raised fails the call
            self._over = True
            self._release()
            return failed(e)
        return self.next()

    def next(self) -> Variant:
        with self._lock:
            if self._over:
                return Variant("model-end")
            self._busy = True
        answer: Variant
        try:
            it = self._iterator
            event = self._run(it.__anext__()) if hasattr(it, "__anext__") else next(it)
        except (StopIteration, StopAsyncIteration):
            answer = Variant("model-end")
            self._over = True
        except Exception as e:  # noqa: BLE001 - what the stream raised fails the call
            answer = failed(e)
            self._over = True
        else:
            answer = event_answer(event)
            if answer.tag != "model-event" or _last(event):
                self._over = True
        with self._lock:
            self._busy = False
            if self._over:
                self._release()
        return answer

    def close(self) -> None:
        with self._lock:
            self._over = True
            if not self._busy:
                self._release()

    def _run(self, awaitable: Any) -> Any:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(awaitable)

    def _release(self) -> None:
        """Closes the stream and the call's event loop (never while a pull is under way)."""
        it, self._iterator = self._iterator, None
        try:
            if it is not None and hasattr(it, "aclose"):
                self._run(it.aclose())
            elif it is not None and hasattr(it, "close"):
                it.close()
        except Exception:  # noqa: BLE001 - a stream's cleanup changes nothing
            pass
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.close()


class AsyncModelCall:
    """One model call in the asyncio API: ``chat`` and ``stream`` awaited on the loop when they
    are ``async``; a plain ``chat`` runs on a thread of its own (``call_plain``), a plain
    iterable is read inline, one event at a time."""

    def __init__(self, adapter: Any, call: Mapping[str, Any], text_deltas: bool) -> None:
        self._adapter = adapter
        self._call = call
        self._stream = streams(adapter, call, text_deltas)
        self._iterator: Any = None
        self._over = False

    def streaming(self) -> bool:
        return not self._over and self._iterator is not None

    async def first(self, call_plain: Any) -> Variant:
        messages, options = self._call["messages"], self._call["options"]
        try:
            if not self._stream:
                return response_answer(await call_plain(self._adapter.chat, messages, options))
            stream = self._adapter.stream(messages, options)
            if inspect.isawaitable(stream):
                stream = await stream
            if hasattr(stream, "__anext__"):
                self._iterator = stream
            elif hasattr(stream, "__iter__") and not isinstance(stream, (str, bytes, Mapping)):
                self._iterator = _Plain(iter(stream))
            else:
                self._over = True
                return failed(_NOT_ITERABLE)
        except Exception as e:  # noqa: BLE001 - what the adapter raised fails the call
            self._over = True
            return failed(e)
        return await self.next()

    async def next(self) -> Variant:
        if self._over:
            return Variant("model-end")
        try:
            event = await self._iterator.__anext__()
        except StopAsyncIteration:
            await self.aclose()
            return Variant("model-end")
        except Exception as e:  # noqa: BLE001 - what the stream raised fails the call
            await self.aclose()
            return failed(e)
        answer = event_answer(event)
        if answer.tag != "model-event" or _last(event):
            await self.aclose()
        return answer

    async def aclose(self) -> None:
        self._over = True
        it, self._iterator = self._iterator, None
        close = getattr(it, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception:  # noqa: BLE001 - a stream's cleanup changes nothing
                pass


class _Plain:
    """A plain iterator read as an async one."""

    def __init__(self, it: Iterator[Any]) -> None:
        self._it = it

    async def __anext__(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        close = getattr(self._it, "close", None)
        if close is not None:
            close()
