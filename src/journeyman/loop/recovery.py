"""How the phased mode answers an error: by its type in the error hierarchy, never by its text.

- recoverable: the model can do something about it (a malformed reply, a failed or timed-out
  tool, a failing verification); the mode goes back to PLAN and shows the model the error;
- fatal: no further turn can fix it (bad configuration, a refused permission the model cannot
  lift, a provider that refuses the request for good, an internal fault); the run FAILs;
- transient: the service or the budget ran out; the kernel records the usual finish reason
  (provider unavailable, a capacity limit) and the run may be resumed later.
"""

from __future__ import annotations

from enum import StrEnum

from journeyman.core.errors import AgentError, ErrorCategory


class Severity(StrEnum):
    RECOVERABLE = "recoverable"
    FATAL = "fatal"
    TRANSIENT = "transient"


_BY_CATEGORY: dict[ErrorCategory, Severity] = {
    ErrorCategory.TOOL: Severity.RECOVERABLE,
    ErrorCategory.BUDGET: Severity.TRANSIENT,
    ErrorCategory.CANCELLATION: Severity.FATAL,
    ErrorCategory.PERMISSION: Severity.FATAL,
    ErrorCategory.CONFIGURATION: Severity.FATAL,
    ErrorCategory.INTERNAL: Severity.FATAL,
}


def classify(error: AgentError) -> Severity:
    """The severity of `error`, from its category and its retryable flag.

    A model error that may go away on another try (empty, truncated, malformed output) is
    recoverable; one that will not is fatal. A provider fault that is retryable, or that
    outlasted the resilient provider's retries (`details["exhausted"]`), is transient; one the
    service refuses for good (authentication, a bad request) is fatal.
    """
    if error.category is ErrorCategory.LLM:
        return Severity.RECOVERABLE if error.retryable else Severity.FATAL
    if error.category is ErrorCategory.PROVIDER:
        gave_up = bool(error.details.get("exhausted"))
        return Severity.TRANSIENT if error.retryable or gave_up else Severity.FATAL
    return _BY_CATEGORY[error.category]


def format_for_model(error: AgentError, *, during: str) -> str:
    """The message that tells the model what went wrong and what to do about it."""
    kind = type(error).__name__
    return (
        f"While {during}, this went wrong ({kind}, {error.category.value} error): "
        f"{error.message}\nNothing else was changed by it. Adjust your plan and continue."
    )
