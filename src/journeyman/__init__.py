"""journeyman: an autonomous coding agent with budgets, persisted steps and resumable runs."""

from importlib import metadata as _metadata

from journeyman.core.errors import (
    AgentError,
    BudgetExhaustedError,
    CancellationError,
    ConfigurationError,
    ErrorCategory,
    LLMError,
    PermissionDeniedError,
    ProviderError,
    ToolError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from journeyman.core.events import (
    BudgetUpdated,
    ContextCompacted,
    ErrorOccurred,
    Event,
    ExtensionDecided,
    ExtensionRequested,
    ModelRequestSent,
    ModelResponseReceived,
    NudgeInjected,
    RunFinished,
    RunStarted,
    StateChanged,
    TextDelta,
    ToolCallStarted,
    ToolResultReceived,
)
from journeyman.core.messages import ToolResult
from journeyman.core.result import FinishCategory, FinishReason, RunResult
from journeyman.loop.agent import Agent, run
from journeyman.loop.config import AgentConfig
from journeyman.providers.factory import create_provider
from journeyman.tools.base import Tool, ToolArgs, ToolKind, tool
from journeyman.tools.context import ToolContext

try:
    __version__ = _metadata.version("journeyman")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentError",
    "BudgetExhaustedError",
    "BudgetUpdated",
    "CancellationError",
    "ConfigurationError",
    "ContextCompacted",
    "ErrorCategory",
    "ErrorOccurred",
    "Event",
    "ExtensionDecided",
    "ExtensionRequested",
    "FinishCategory",
    "FinishReason",
    "LLMError",
    "ModelRequestSent",
    "ModelResponseReceived",
    "NudgeInjected",
    "PermissionDeniedError",
    "ProviderError",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "StateChanged",
    "TextDelta",
    "Tool",
    "ToolArgs",
    "ToolCallStarted",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolNotFoundError",
    "ToolResult",
    "ToolResultReceived",
    "ToolTimeoutError",
    "__version__",
    "create_provider",
    "run",
    "tool",
]
