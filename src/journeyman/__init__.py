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
from journeyman.core.events import Event
from journeyman.core.result import FinishCategory, FinishReason, RunResult
from journeyman.loop.agent import Agent, run
from journeyman.loop.config import AgentConfig
from journeyman.providers.factory import create_provider
from journeyman.tools.base import Tool, ToolArgs, tool

try:
    __version__ = _metadata.version("journeyman")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentError",
    "BudgetExhaustedError",
    "CancellationError",
    "ConfigurationError",
    "ErrorCategory",
    "Event",
    "FinishCategory",
    "FinishReason",
    "LLMError",
    "PermissionDeniedError",
    "ProviderError",
    "RunResult",
    "Tool",
    "ToolArgs",
    "ToolError",
    "ToolNotFoundError",
    "ToolTimeoutError",
    "__version__",
    "create_provider",
    "run",
    "tool",
]
