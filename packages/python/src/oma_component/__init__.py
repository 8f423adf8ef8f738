"""open-multi-agent's structured-input agent layer, from one WebAssembly component.

Runs ``oma_portable.wasm`` (shipped in this package) on wasmtime; every step of a run that
touches the outside world (HTTP, waits, tools, the beforeRun hook, process backends) is done
here in Python: by :class:`Agent` and :func:`run_agent` (sync, over urllib3), or by
:class:`AsyncAgent` and :func:`run_agent_async` (asyncio, over httpx). See README.md.
"""

from ._agent.agent import Agent, AsyncAgent
from ._agent.cancel import CancelToken
from ._agent.config import EnvironmentNames, environment_names
from ._agent.orchestrator import run_agent, run_agent_async
from ._agent.process_backend import Backend, CallableBackend, ProcessBackend
from ._agent.tool import Tool, ToolResult, tool
from ._http_async import AsyncHttpClient
from ._builtin_tools import BUILT_IN_TOOL_NAMES, builtin_tools
from ._pool import AgentPool, Semaphore
from ._codec import classify_bash_command, format_request, parse_response, validate
from ._errors import (
    ComponentTrapError,
    EgressPolicyError,
    InvalidMessageError,
    LLMCallTimeoutError,
    OmaError,
    ProviderError,
    SessionStateError,
    TokenBudgetExceededError,
    StructuredOutputValidationError,
    UnsupportedContentBlockError,
    UnsupportedToolCallError,
    UnsupportedToolResultContentError,
)
from ._http import HttpClient
from ._runtime import Runtime, default_runtime, set_default_runtime
from ._types import (
    AgentRunResult,
    Base64Source,
    BeforeRunContext,
    BeforeRunResult,
    BudgetExceededEvent,
    CallOptions,
    LoopDetectedEvent,
    LoopDetectionInfo,
    ThinkingConfig,
    TraceEvent,
    ContentBlock,
    DoneEvent,
    ErrorDict,
    ErrorEvent,
    EvaluationCase,
    EvaluationOptions,
    FormattedRequest,
    ImageBlock,
    AdapterStreamEvent,
    LLMAdapter,
    LLMChatOptions,
    LLMMessage,
    LLMResponse,
    LLMStreamOptions,
    LLMToolDef,
    MediaSource,
    Messages,
    OmaTool,
    ProgressEvent,
    PromptInput,
    ReasoningBlock,
    ReasoningEvent,
    RunIdentity,
    RunInput,
    RunStatus,
    StreamEvent,
    StructuredTraceError,
    TextBlock,
    TextDeltaEvent,
    TextEvent,
    TokenUsage,
    ToolCallRecord,
    ToolDefinition,
    ToolResultBlock,
    ToolResultContent,
    ToolResultEvent,
    ToolResultPart,
    ToolUseBlock,
    ToolUseEvent,
    UrlSource,
    VideoBlock,
)

__version__ = "0.1.0"

__all__ = [
    "Agent", "AsyncAgent", "Backend", "CallableBackend", "ProcessBackend", "Tool", "ToolResult", "run_agent",
    "run_agent_async", "tool", "environment_names", "EnvironmentNames", "CancelToken",
    "format_request", "parse_response", "validate",
    "OmaError", "InvalidMessageError", "UnsupportedContentBlockError", "UnsupportedToolResultContentError",
    "UnsupportedToolCallError", "TokenBudgetExceededError", "StructuredOutputValidationError", "LLMCallTimeoutError", "EgressPolicyError",
    "ProviderError", "SessionStateError", "ComponentTrapError",
    "HttpClient", "AsyncHttpClient", "Runtime", "default_runtime", "set_default_runtime",
    "AgentRunResult", "Base64Source", "BeforeRunContext", "BeforeRunResult", "BudgetExceededEvent", "CallOptions", "ThinkingConfig", "TraceEvent",
    "ContentBlock", "DoneEvent", "ErrorDict", "ErrorEvent", "EvaluationCase", "EvaluationOptions",
    "FormattedRequest", "ImageBlock", "LLMMessage", "LLMResponse", "MediaSource", "Messages", "OmaTool",
    "LLMAdapter", "LLMChatOptions", "LLMStreamOptions", "LLMToolDef", "AdapterStreamEvent",
    "ProgressEvent", "RunIdentity",
    "PromptInput", "ReasoningBlock", "ReasoningEvent", "RunInput", "RunStatus", "StreamEvent",
    "StructuredTraceError", "TextBlock", "TextDeltaEvent", "TextEvent", "TokenUsage", "ToolCallRecord",
    "ToolDefinition", "ToolResultBlock", "ToolResultContent", "ToolResultEvent", "ToolResultPart", "ToolUseBlock",
    "ToolUseEvent", "UrlSource", "VideoBlock", "LoopDetectedEvent", "LoopDetectionInfo",
    "builtin_tools", "BUILT_IN_TOOL_NAMES", "classify_bash_command",
    "AgentPool", "Semaphore",
]
