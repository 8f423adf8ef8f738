"""open-multi-agent's structured-input agent layer, from one WebAssembly component.

Runs ``oma_portable.wasm`` (shipped in this package) on wasmtime; every step of a run that
touches the outside world (HTTP, waits, tools, the beforeRun hook, process backends) is done
here in Python. See README.md for the API.
"""

from ._agent import Agent, Backend, CallableBackend, ProcessBackend, Tool, ToolResult, run_agent, tool
from ._codec import format_request, parse_response, validate
from ._errors import (
    ComponentTrapError,
    EgressPolicyError,
    InvalidMessageError,
    LLMCallTimeoutError,
    OmaError,
    ProviderError,
    SessionStateError,
    TokenBudgetExceededError,
    UnsupportedContentBlockError,
    UnsupportedToolCallError,
    UnsupportedToolResultContentError,
)
from ._http import HttpClient
from ._runtime import Runtime, default_runtime, set_default_runtime

__version__ = "0.1.0"

__all__ = [
    "Agent", "Backend", "CallableBackend", "ProcessBackend", "Tool", "ToolResult", "run_agent", "tool",
    "format_request", "parse_response", "validate",
    "OmaError", "InvalidMessageError", "UnsupportedContentBlockError", "UnsupportedToolResultContentError",
    "UnsupportedToolCallError", "TokenBudgetExceededError", "LLMCallTimeoutError", "EgressPolicyError",
    "ProviderError", "SessionStateError", "ComponentTrapError",
    "HttpClient", "Runtime", "default_runtime", "set_default_runtime",
]
