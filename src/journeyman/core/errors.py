"""The agent's error hierarchy: every failure carries a category and whether a retry may help."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCategory(StrEnum):
    LLM = "llm"
    PROVIDER = "provider"
    TOOL = "tool"
    BUDGET = "budget"
    CANCELLATION = "cancellation"
    PERMISSION = "permission"
    CONFIGURATION = "configuration"
    INTERNAL = "internal"


class AgentError(Exception):
    """Base of every error the agent raises on purpose."""

    default_category = ErrorCategory.INTERNAL
    default_retryable = False

    def __init__(
        self,
        message: str,
        *,
        category: ErrorCategory | None = None,
        retryable: bool | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.category = category or self.default_category
        self.retryable = self.default_retryable if retryable is None else retryable
        self.details: dict[str, Any] = dict(details or {})


class LLMError(AgentError):
    """The model answered with something unusable: empty, truncated or malformed output."""

    default_category = ErrorCategory.LLM
    default_retryable = True


class ProviderError(AgentError):
    """The model service failed: rate limit, overload, network fault, authentication (whose
    category is CONFIGURATION: the user's key or endpoint must change, no retry will help)."""

    default_category = ErrorCategory.PROVIDER
    default_retryable = True

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        retryable: bool | None = None,
        details: dict[str, Any] | None = None,
        category: ErrorCategory | None = None,
    ) -> None:
        super().__init__(message, category=category, retryable=retryable, details=details)
        self.provider = provider
        self.status_code = status_code

    @property
    def retry_after(self) -> float | None:
        """Seconds the service asked us to wait before retrying, if it said so."""
        value = self.details.get("retry_after")
        return float(value) if value is not None else None


class ToolError(AgentError):
    """A tool failed; the model is told and may try another approach."""

    default_category = ErrorCategory.TOOL


class ToolNotFoundError(ToolError):
    """The model called a tool that is not registered."""


class ToolTimeoutError(ToolError):
    """A tool ran past its time limit and was stopped."""


class BudgetExhaustedError(AgentError):
    """A token, cost, iteration or time limit was reached."""

    default_category = ErrorCategory.BUDGET


class CancellationError(AgentError):
    """The user or the system aborted the run."""

    default_category = ErrorCategory.CANCELLATION


class PermissionDeniedError(AgentError):
    """A tool call was blocked by the permission policy."""

    default_category = ErrorCategory.PERMISSION

    def __init__(self, message: str, *, tool_name: str, details: dict[str, Any] | None = None):
        super().__init__(message, details=details)
        self.tool_name = tool_name


class ConfigurationError(AgentError):
    """Settings are missing or invalid (no API key, unknown provider, bad config file)."""

    default_category = ErrorCategory.CONFIGURATION


class AgentClosedError(AgentError):
    """A task was given to an `Agent` after `close()`."""

    default_category = ErrorCategory.CONFIGURATION
