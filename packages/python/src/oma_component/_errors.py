"""OMA's error classes as Python exceptions.

Every failure the component reports carries OMA's class name (``.name``), OMA's code where OMA
has one (``.code``), the message (byte-identical to OMA's where OMA defines it), whether trying
again could help (``.retryable``) and, for provider failures, the HTTP status and provider. A
provider failure's ``.code`` is the provider's own code when it sent one, and ``.error_type``
the provider's error type when its body has one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Type

if TYPE_CHECKING:  # pragma: no cover
    from ._types import AgentRunResult, ErrorDict

_UNSET: Any = object()


class OmaError(Exception):
    """Base class of every error this package raises for the component.

    An error delivered by a stream's ``error`` event carries the run's result as ``.result``
    (``None`` on an error that was raised)."""

    #: The OMA class name a subclass stands for (instances may carry another ``name``).
    oma_name = "Error"
    #: OMA's code for the class, where OMA has one.
    oma_code: Optional[str] = None
    #: The failed run's result, on an error delivered by a stream's ``error`` event.
    result: "Optional[AgentRunResult]" = None

    def __init__(
        self,
        message: str,
        *,
        name: Optional[str] = None,
        code: Optional[str] = _UNSET,
        retryable: bool = False,
        http_status: Optional[int] = None,
        provider: Optional[str] = None,
        kind: Optional[str] = None,
        error_type: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.name = name or type(self).oma_name
        self.code: Optional[str] = type(self).oma_code if code is _UNSET else code
        self.retryable = retryable
        self.http_status = http_status
        self.provider = provider
        self.kind = kind
        self.error_type = error_type

    def to_dict(self) -> "ErrorDict":
        """``{"name", "code", "message", "retryable"}`` as the ``oma-host`` CLI prints it."""
        out: Any = {"name": self.name, "message": self.message, "retryable": self.retryable}
        if self.code is not None:
            out["code"] = self.code
        if self.error_type is not None:
            out["type"] = self.error_type
        if self.http_status is not None:
            out["httpStatus"] = self.http_status
        if self.provider is not None:
            out["provider"] = self.provider
        return out  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, code={self.code!r}, message={self.message!r})"


class InvalidMessageError(OmaError):
    """The input breaks OMA's shape guard or a media rule (``INVALID_MESSAGE``)."""

    oma_name = "InvalidMessageError"
    oma_code = "INVALID_MESSAGE"


class UnsupportedContentBlockError(OmaError):
    """An adapter has no wire mapping for a whole content block, e.g. video on Anthropic; terminal.

    ``.provider`` is the adapter that refused the block (e.g. ``"Anthropic Messages"``) and
    ``.block_type`` the block's type (e.g. ``"video"``), as OMA's class carries them."""

    oma_name = "UnsupportedContentBlockError"
    oma_code = "UNSUPPORTED_CONTENT_BLOCK"
    #: The refused block's type (OMA's ``blockType``).
    block_type: Optional[str] = None

    def __init__(self, message: str, *, block_type: Optional[str] = None, **kw: Any) -> None:
        match = _UNSUPPORTED_BLOCK.match(message)
        if match is not None:
            # The adapter that refused the block, not a run's configured provider.
            kw["provider"] = match.group(1)
            block_type = block_type or match.group(2)
        super().__init__(message, **kw)
        self.block_type = block_type

    def to_dict(self) -> "ErrorDict":
        out: Any = super().to_dict()
        if self.block_type is not None:
            out["blockType"] = self.block_type
        return out  # type: ignore[no-any-return]


_UNSUPPORTED_BLOCK = re.compile(r'^(.*) cannot represent the "([^"]*)" content block', re.S)


class UnsupportedToolResultContentError(OmaError):
    """A wire format cannot carry a tool-result part."""

    oma_name = "UnsupportedToolResultContentError"
    oma_code = "UNSUPPORTED_TOOL_RESULT_CONTENT"


class UnsupportedToolCallError(OmaError):
    """The provider answered with a tool-call type OMA does not know."""

    oma_name = "UnsupportedToolCallError"
    oma_code = "UNSUPPORTED_TOOL_CALL"


class TokenBudgetExceededError(OmaError):
    """The token budget ran out (only ever seen in run results)."""

    oma_name = "TokenBudgetExceededError"
    oma_code = "TOKEN_BUDGET_EXCEEDED"


class StructuredOutputValidationError(OmaError):
    """The final answer did not match ``output_schema`` after OMA's one retry (only ever seen
    in run results: ``success`` is false and ``structured`` is ``None``)."""

    oma_name = "StructuredOutputValidationError"
    oma_code = "STRUCTURED_OUTPUT_VALIDATION_FAILED"


class LLMCallTimeoutError(OmaError):
    """The provider did not answer within the per-call timeout."""

    oma_name = "LLMCallTimeoutError"
    oma_code = "LLM_CALL_TIMEOUT"


class EgressPolicyError(OmaError):
    """The egress policy forbids the destination; nothing was sent."""

    oma_name = "EgressPolicyError"
    oma_code = "EGRESS_POLICY_DENIED"


class ProviderError(OmaError):
    """The provider answered with an error or could not be reached."""

    oma_name = "ProviderError"


class SessionStateError(OmaError):
    """A session was asked for a step or given an answer out of turn (a bug in the host loop)."""

    oma_name = "SessionStateError"
    oma_code = "SESSION_STATE"


class ComponentTrapError(OmaError):
    """The WebAssembly instance trapped.

    The instance was thrown away and a fresh one built before this was raised, so the next call
    works; agents are re-created from their configuration and last committed history. The run
    that trapped is lost.
    """

    oma_name = "ComponentTrapError"
    oma_code = "COMPONENT_TRAP"

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault("retryable", True)
        super().__init__(message, **kw)


_BY_NAME: Dict[str, Type[OmaError]] = {
    cls.oma_name: cls
    for cls in (
        InvalidMessageError,
        UnsupportedContentBlockError,
        UnsupportedToolResultContentError,
        UnsupportedToolCallError,
        TokenBudgetExceededError,
        StructuredOutputValidationError,
        LLMCallTimeoutError,
        EgressPolicyError,
        ProviderError,
        SessionStateError,
    )
}

_BY_KIND: Dict[str, Type[OmaError]] = {
    "invalid-message": InvalidMessageError,
    "unsupported-content-block": UnsupportedContentBlockError,
    "unsupported-tool-result-content": UnsupportedToolResultContentError,
    "unsupported-tool-call": UnsupportedToolCallError,
    "provider": ProviderError,
    "timeout": LLMCallTimeoutError,
    "egress-denied": EgressPolicyError,
    "session-state": SessionStateError,
}


def error_from_wit(record: Any) -> OmaError:
    """Converts the component's ``error`` record into the matching exception."""
    name = getattr(record, "name")
    kind = getattr(record, "kind")
    # OMA's whole-run timeout is a plain error named ``TimeoutError`` (kind ``timeout`` too, but
    # not the per-call ``LLMCallTimeoutError``).
    by_kind = None if name == "TimeoutError" else _BY_KIND.get(kind)
    cls = _BY_NAME.get(name) or by_kind or OmaError
    extra: Dict[str, Any] = {}
    if issubclass(cls, UnsupportedContentBlockError):
        extra["block_type"] = getattr(record, "block-type", None)
    return cls(
        getattr(record, "message"),
        **extra,
        name=name,
        code=getattr(record, "code"),
        retryable=bool(getattr(record, "retryable")),
        http_status=getattr(record, "http-status"),
        provider=getattr(record, "provider"),
        kind=kind,
        error_type=getattr(record, "error-type", None),
    )


def error_from_info(info: Mapping[str, Any]) -> OmaError:
    """An error from OMA's description of one (a result's ``errorInfo``: ``name``, ``code``,
    ``message``, ``retryable``, ``httpStatus``, ``provider``, ``kind``)."""
    name = str(info.get("name") or "Error")
    cls = _BY_NAME.get(name, OmaError)
    status = info.get("httpStatus")
    return cls(
        str(info.get("message", "")),
        name=name,
        code=info.get("code"),
        retryable=bool(info.get("retryable")),
        http_status=int(status) if status is not None else None,
        provider=info.get("provider"),
        kind=info.get("kind"),
    )
