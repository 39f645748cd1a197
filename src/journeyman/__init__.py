"""journeyman: an autonomous coding agent with budgets, persisted steps and resumable runs."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
        ApprovalDecided,
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
    from journeyman.core.result import (
        FinishCategory,
        FinishReason,
        RunResult,
    )
    from journeyman.loop.agent import (
        Agent,
        run,
    )
    from journeyman.loop.config import AgentConfig
    from journeyman.loop.run_options import RunOptions
    from journeyman.providers.factory import create_provider
    from journeyman.session.workspace_lock import WorkspaceBusyError
    from journeyman.tools.base import (
        Tool,
        ToolArgs,
        ToolKind,
        tool,
    )
    from journeyman.tools.context import ToolContext

    __version__: str

_HOMES = {
    "journeyman.core.errors": (
        "AgentError",
        "BudgetExhaustedError",
        "CancellationError",
        "ConfigurationError",
        "ErrorCategory",
        "LLMError",
        "PermissionDeniedError",
        "ProviderError",
        "ToolError",
        "ToolNotFoundError",
        "ToolTimeoutError",
    ),
    "journeyman.core.events": (
        "ApprovalDecided",
        "BudgetUpdated",
        "ContextCompacted",
        "ErrorOccurred",
        "Event",
        "ExtensionDecided",
        "ExtensionRequested",
        "ModelRequestSent",
        "ModelResponseReceived",
        "NudgeInjected",
        "RunFinished",
        "RunStarted",
        "StateChanged",
        "TextDelta",
        "ToolCallStarted",
        "ToolResultReceived",
    ),
    "journeyman.core.messages": ("ToolResult",),
    "journeyman.core.result": (
        "FinishCategory",
        "FinishReason",
        "RunResult",
    ),
    "journeyman.loop.agent": (
        "Agent",
        "run",
    ),
    "journeyman.loop.config": ("AgentConfig",),
    "journeyman.loop.run_options": ("RunOptions",),
    "journeyman.providers.factory": ("create_provider",),
    "journeyman.session.workspace_lock": ("WorkspaceBusyError",),
    "journeyman.tools.base": (
        "Tool",
        "ToolArgs",
        "ToolKind",
        "tool",
    ),
    "journeyman.tools.context": ("ToolContext",),
}
"""Where each public name lives: imported on first use, so that `journeyman --version` (and any
part of the package) starts without loading the agent, the providers and pydantic."""
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> object:
    if name == "__version__":
        from journeyman.core.package import package_version

        version = globals()["__version__"] = package_version()
        return version
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'journeyman' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME_OF))


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
    "WorkspaceBusyError",
    "__version__",
    "create_provider",
    "run",
    "tool",
]


__all__ = [
    "Agent",
    "AgentConfig",
    "AgentError",
    "ApprovalDecided",
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
    "RunOptions",
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
    "WorkspaceBusyError",
    "__version__",
    "create_provider",
    "run",
    "tool",
]
