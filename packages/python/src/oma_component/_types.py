"""OMA's values as ``TypedDict``s: what the package takes and gives, key for key.

Every value crosses as a plain dict in OMA's JSON shape; these types only tell a type checker
(mypy, pyright) which keys exist, so that ``result["sucess"]`` or an event without ``data`` is
caught before it runs. Keys that OMA leaves out when they do not apply are in a ``total=False``
base class (``NotRequired`` needs Python 3.11).
"""

from __future__ import annotations

from typing import (TYPE_CHECKING, Any, AsyncIterable, Awaitable, Callable, Dict, Iterable, List, Literal, Mapping,
                    Protocol, Sequence, TypedDict, Union)

if TYPE_CHECKING:  # pragma: no cover - the event types name the error classes
    from ._errors import OmaError, TokenBudgetExceededError  # noqa: F401

# -- messages and blocks ------------------------------------------------------------------------


class TextBlock(TypedDict):
    """``{"type": "text", "text"}``."""

    type: Literal["text"]
    text: str


class Base64Source(TypedDict):
    """Inline media: raw canonical base64 text (never ``bytes``: encode them first)."""

    type: Literal["base64"]
    media_type: str
    data: str


class UrlSource(TypedDict):
    """Media by an absolute http/https URL."""

    type: Literal["url"]
    media_type: str
    url: str


MediaSource = Union[Base64Source, UrlSource]


class ImageBlock(TypedDict):
    """An image: inline base64 (OMA's), or by URL (checked like a video URL)."""

    type: Literal["image"]
    source: MediaSource


class VideoBlock(TypedDict):
    """A video, inline or by URL (formats without a mapping refuse it before any request)."""

    type: Literal["video"]
    source: MediaSource


class _ToolUseOptional(TypedDict, total=False):
    signature: str


class ToolUseBlock(_ToolUseOptional):
    """A tool call the model asked for."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: Dict[str, Any]


class ToolResultTextPart(TypedDict):
    type: Literal["text"]
    text: str


class ToolResultImagePart(TypedDict):
    type: Literal["image"]
    source: MediaSource


class ToolResultFilePart(TypedDict):
    type: Literal["file"]
    filename: str
    source: MediaSource


ToolResultPart = Union[ToolResultTextPart, ToolResultImagePart, ToolResultFilePart]
ToolResultContent = Union[str, List[ToolResultPart]]


class _ToolResultOptional(TypedDict, total=False):
    is_error: bool


class ToolResultBlock(_ToolResultOptional):
    """A tool's answer, by the id of its call."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: ToolResultContent


class _ReasoningOptional(TypedDict, total=False):
    signature: str
    redactedData: str
    provenance: str


class ReasoningBlock(_ReasoningOptional):
    """The model's reasoning, with what a provider needs to have it back."""

    type: Literal["reasoning"]
    text: str


ContentBlock = Union[TextBlock, ImageBlock, VideoBlock, ToolUseBlock, ToolResultBlock, ReasoningBlock]


class LLMMessage(TypedDict):
    """One message of a conversation."""

    role: Literal["user", "assistant"]
    content: List[ContentBlock]


#: What ``run`` and ``stream`` take: a prompt, or a message list (typed, or plain mappings,
#: which OMA's guard checks at run time).
RunInput = Union[str, Sequence[LLMMessage], Sequence[Mapping[str, Any]]]
#: What ``prompt`` takes: a prompt, or the content blocks of one user turn.
PromptInput = Union[str, Sequence[ContentBlock], Sequence[Mapping[str, Any]]]
#: What ``validate`` and ``format_request`` take: a message list or its JSON text.
Messages = Union[str, Sequence[LLMMessage], Sequence[Mapping[str, Any]]]

# -- results ------------------------------------------------------------------------------------


class TokenUsage(TypedDict):
    input_tokens: int
    output_tokens: int


class ToolCallRecord(TypedDict):
    """One tool call of a run, as OMA records it (``duration`` in milliseconds)."""

    toolName: str
    input: Dict[str, Any]
    output: ToolResultContent
    duration: int


RunStatusCode = Literal["ok", "error", "cancelled", "timeout", "rejected", "budget_exhausted"]


class _RunStatusOptional(TypedDict, total=False):
    message: str


class RunStatus(_RunStatusOptional):
    code: RunStatusCode


class _TraceErrorOptional(TypedDict, total=False):
    code: str
    httpStatus: int
    provider: str


class StructuredTraceError(_TraceErrorOptional):
    """Why a run failed (OMA's ``errorInfo``)."""

    kind: Literal["validation", "budget", "callback", "provider", "timeout", "cancellation", "tool", "unknown"]
    name: str
    message: str
    retryable: bool


class _RunIdentityOptional(TypedDict, total=False):
    links: List[Dict[str, Any]]


class RunIdentity(_RunIdentityOptional):
    """OMA's ``RunIdentity``: the run's id (a UUID unless ``run_id`` was given), the attempt
    (always 1: the package does not re-run), and W3C trace and root span ids (hex)."""

    runId: str
    attempt: int
    traceId: str
    rootSpanId: str


class _RunResultOptional(TypedDict, total=False):
    budgetExceeded: bool
    loopDetected: bool
    errorInfo: StructuredTraceError
    metadata: Dict[str, Any]
    #: The failure as an exception (absent on success and for a spent budget). It is an
    #: :class:`OmaError`, which ``json.dumps`` cannot write: leave it out to serialize a result.
    error: "OmaError"


class AgentRunResult(_RunResultOptional):
    """OMA's ``AgentRunResult``, key for key: ``status`` is ``{"code": "ok"}`` on success;
    ``errorInfo`` and ``error`` are there after a failure; ``structured`` is the answer's
    value when it matched ``output_schema`` (a pydantic model's instance when the schema is a
    model), else ``None``; ``turns`` is the package's (the number of model calls)."""

    success: bool
    identity: RunIdentity
    status: RunStatus
    output: str
    messages: List[LLMMessage]
    tokenUsage: TokenUsage
    toolCalls: List[ToolCallRecord]
    structured: Any
    turns: int


class _ErrorDictOptional(TypedDict, total=False):
    code: str
    httpStatus: int
    provider: str


class ErrorDict(_ErrorDictOptional):
    """``OmaError.to_dict()``: an error as the ``oma-host`` CLI prints it."""

    name: str
    message: str
    retryable: bool


# -- events -------------------------------------------------------------------------------------


class TextDeltaEvent(TypedDict):
    """A piece of the model's text as the provider sent it."""

    type: Literal["text_delta"]
    data: str


class ReasoningEvent(TypedDict):
    """A piece of the model's reasoning as the provider sent it."""

    type: Literal["reasoning"]
    data: str


class TextEvent(TypedDict):
    """The whole text of a turn, after its deltas."""

    type: Literal["text"]
    data: str


class ToolUseEvent(TypedDict):
    type: Literal["tool_use"]
    data: ToolUseBlock


class ToolResultEvent(TypedDict):
    type: Literal["tool_result"]
    data: ToolResultBlock


class LoopDetectionInfo(TypedDict):
    """What a ``loop_detected`` event carries (OMA's ``LoopDetectionInfo``)."""

    kind: Literal["tool_repetition", "text_repetition"]
    repetitions: int
    detail: str


class LoopDetectedEvent(TypedDict):
    """The run repeats itself; a warning or the end of the run follows."""

    type: Literal["loop_detected"]
    data: LoopDetectionInfo


class BudgetExceededEvent(TypedDict):
    type: Literal["budget_exceeded"]
    data: "TokenBudgetExceededError"


class DoneEvent(TypedDict):
    """The last event of a run that succeeded."""

    type: Literal["done"]
    data: AgentRunResult


class ErrorEvent(TypedDict):
    """The last event of a run that failed: the error, with the result as ``data.result``."""

    type: Literal["error"]
    data: "OmaError"


StreamEvent = Union[TextDeltaEvent, ReasoningEvent, TextEvent, ToolUseEvent, ToolResultEvent,
                    LoopDetectedEvent, BudgetExceededEvent, DoneEvent, ErrorEvent]

# -- hooks, progress, evaluation ----------------------------------------------------------------


class BeforeRunContext(TypedDict):
    """What the ``before_run`` hook gets (OMA's ``{prompt, messages, agent}``)."""

    #: The agent's configuration as given (its keyword arguments by name), without the hooks and
    #: without secrets (``api_key`` and ``aws``), as OMA's hook gets the agent's configuration.
    agent: Dict[str, Any]
    #: The text blocks of the latest user message, joined with no separator.
    prompt: str
    messages: List[LLMMessage]
    #: The agent's configuration without hooks and secrets.
    config: Dict[str, Any]


class _BeforeRunResultOptional(TypedDict, total=False):
    messages: List[LLMMessage]


class BeforeRunResult(_BeforeRunResultOptional):
    """What the hook returns (checked exactly as OMA checks it)."""

    prompt: str


class ProgressEvent(TypedDict):
    """A ``run_agent`` progress event: ``agent_start``, ``budget_exceeded``, ``agent_complete``."""

    type: str
    agent: str
    data: Any


class EvaluationCase(TypedDict):
    """An evaluated case of ``run_agent``."""

    agent: str
    input: Any
    payload: Any
    result: Any
    durationMs: int


# -- options ------------------------------------------------------------------------------------


class CallOptions(TypedDict, total=False):
    """Provider call options (``call=``)."""

    max_retries: int
    retry_delay_ms: int
    retry_backoff: float
    timeout_ms: int
    max_response_bytes: int
    deadline_ms: int
    egress: Union[Literal["open", "offline"], List[str]]


class TraceEvent(TypedDict, total=False):
    """One of OMA's trace events as ``on_trace`` receives it, in OMA's JSON spelling:
    ``type`` (``llm_call``, ``tool_call`` or ``agent``), ``runId``, ``spanId``, ``parentId``,
    ``agent``, ``startMs``, ``endMs``, ``durationMs``; ``model``, ``phase``, ``turn`` and
    ``tokens`` for a model call; ``tool``, ``isError``, ``input`` (redacted) and ``output`` for a
    tool call; ``turns``, ``tokens`` and ``toolCalls`` for the run."""

    type: Literal["llm_call", "tool_call", "agent"]
    runId: str
    spanId: str
    parentId: str
    taskId: str
    agent: str
    model: str
    phase: Literal["turn", "summary"]
    turn: int
    tokens: Dict[str, int]
    tool: str
    isError: bool
    input: Dict[str, Any]
    output: str
    turns: int
    toolCalls: int
    startMs: int
    endMs: int
    durationMs: int


class ThinkingConfig(TypedDict, total=False):
    """OMA's ``ThinkingConfig`` (``thinking=``): extended thinking and reasoning effort, mapped
    per wire format as OMA's adapters map them."""

    enabled: bool
    budget_tokens: int
    effort: Literal["low", "medium", "high", "max"]


class EvaluationOptions(TypedDict, total=False):
    """Online evaluation of ``run_agent`` (``evaluation=``)."""

    store_payloads: Literal["none", "redacted", "full"]
    sample_rate: float


class _OmaToolOptional(TypedDict, total=False):
    description: str
    inputSchema: Dict[str, Any]


class OmaTool(_OmaToolOptional):
    """A tool in OMA's shape, as a dict: ``{"name", "description", "inputSchema", "execute"}``.
    ``execute(input)`` or ``execute(input, context)`` (``context``: ``{"agent": {"name",
    "model"}, "toolCallId", "runId"}``) returns what a :class:`Tool`'s function returns
    (OMA's ``{"data", "modelOutput"?, "isError"}`` too), or awaits it."""

    name: str
    execute: Callable[..., Any]


class ToolDefinition(TypedDict):
    """A tool as the model is told of it."""

    name: str
    description: str
    inputSchema: Dict[str, Any]


# -- the codec ----------------------------------------------------------------------------------


class FormattedRequest(TypedDict):
    """The HTTP request a provider call would send (``headers`` carry the key)."""

    method: str
    url: str
    headers: Dict[str, str]
    body: str


class LLMResponse(TypedDict):
    """OMA's ``LLMResponse``."""

    id: str
    content: List[ContentBlock]
    model: str
    stop_reason: str
    usage: TokenUsage


# -- your own LLM adapter -----------------------------------------------------------------------


class LLMToolDef(TypedDict):
    """A tool as an adapter is shown it (OMA's ``LLMToolDef``)."""

    name: str
    description: str
    inputSchema: Dict[str, Any]


class _LLMChatOptionsOptional(TypedDict, total=False):
    tools: List[LLMToolDef]
    maxTokens: int
    temperature: float
    frequencyPenalty: float
    presencePenalty: float
    topP: float
    topK: int
    minP: float
    parallelToolCalls: bool
    extraBody: Dict[str, Any]
    thinking: Dict[str, Any]
    preserveReasoningAsText: bool
    compressReasoningText: Union[bool, Dict[str, Any]]
    systemPrompt: str


class LLMChatOptions(_LLMChatOptionsOptional):
    """OMA's ``LLMChatOptions``, key for key: the model, then what the agent sets (unset
    options are left out)."""

    model: str


#: OMA's ``LLMStreamOptions``: the same keys as :class:`LLMChatOptions`.
LLMStreamOptions = LLMChatOptions


class AdapterStreamEvent(TypedDict):
    """One event an adapter's ``stream`` yields: ``text`` or ``reasoning`` (a piece, ``data``
    a str), ``tool_use`` (a :class:`ToolUseBlock`), ``done`` (the :class:`LLMResponse`), or
    ``error`` (the exception, or a mapping ``{"name", "message", "code"?, "status"?}``)."""

    type: Literal["text", "reasoning", "tool_use", "done", "error"]
    data: Any


class LLMAdapter(Protocol):
    """OMA's ``LLMAdapter``: the model behind an agent (``Agent(adapter=...)``), written by the
    application. ``chat(messages, options)`` returns an :class:`LLMResponse` (``async def`` or
    plain); ``stream(messages, options)`` yields :class:`AdapterStreamEvent` dicts (an async or
    a plain iterable), ending with ``done`` or ``error``. What either raises keeps its class
    name, message, ``code`` and ``status`` (or ``status_code``), which classify the run's
    failure as OMA classifies it. An optional ``capabilities`` attribute,
    ``{"echoes_reasoning": "never" | "own-issued" | "tool-use-only"}``, declares how the adapter
    echoes reasoning back (left out: ``"never"``)."""

    name: str

    def chat(self, messages: List[LLMMessage],
             options: LLMChatOptions) -> Union[LLMResponse, Awaitable[LLMResponse]]: ...

    def stream(self, messages: List[LLMMessage], options: LLMStreamOptions
               ) -> Union[Iterable[AdapterStreamEvent], AsyncIterable[AdapterStreamEvent]]: ...
