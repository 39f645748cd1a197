"""How a run ends: the termination value gates return, the hook halt, and the one mapping
from an error of the hierarchy to a finish reason and to how the loop may answer it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from journeyman.core import events as ev
from journeyman.core.errors import AgentError, ErrorCategory
from journeyman.core.result import FinishReason


@dataclass(frozen=True)
class Termination:
    """Why the run stops here: the finish reason and the message for the user."""

    reason: FinishReason
    message: str | None = None


class HookHalt(Exception):
    """A hook stopped the run; raised where the hook ran and caught once, by the kernel."""

    def __init__(self, event: str, reason: str) -> None:
        self.message = f"stopped by a {event} hook: {reason}"
        super().__init__(self.message)


class Severity(StrEnum):
    """How the loop may answer an error (see `modes.phased.recovery`)."""

    RECOVERABLE = "recoverable"
    """The model can do something about it: show it the error and go on."""
    FATAL = "fatal"
    """No further turn can fix it: the run fails."""
    TRANSIENT = "transient"
    """The service or the budget ran out: the run stops and may be resumed later."""


_BY_CATEGORY: dict[ErrorCategory, tuple[Severity, FinishReason]] = {
    ErrorCategory.TOOL: (Severity.RECOVERABLE, FinishReason.INTERNAL_ERROR),
    ErrorCategory.BUDGET: (Severity.TRANSIENT, FinishReason.MAX_BUDGET_USD),
    ErrorCategory.CANCELLATION: (Severity.FATAL, FinishReason.CANCELLED),
    ErrorCategory.PERMISSION: (Severity.FATAL, FinishReason.INTERNAL_ERROR),
    ErrorCategory.CONFIGURATION: (Severity.FATAL, FinishReason.CONFIGURATION_ERROR),
    ErrorCategory.INTERNAL: (Severity.FATAL, FinishReason.INTERNAL_ERROR),
}


def classify(error: AgentError) -> tuple[Severity, FinishReason]:
    """The severity of `error` and the finish reason of a run it ends, from its category and
    its retryable flag.

    A model error that may go away on another try (empty, truncated, malformed output) is
    recoverable; one that will not is fatal. A provider fault that is retryable, or that
    outlasted the resilient provider's retries (`details["exhausted"]`), is transient and
    ends as `provider_unavailable`; one the service refuses for good is fatal. A budget error
    ends with the finish reason of the limit it names (`details["finish_reason"]`).
    """
    if error.details.get("deadline") == "run":  # the call ran into --max-duration
        return Severity.FATAL, FinishReason.MAX_DURATION
    if error.category in (ErrorCategory.LLM, ErrorCategory.PROVIDER):
        gave_up = bool(error.details.get("exhausted"))
        if error.category is ErrorCategory.LLM:
            severity = Severity.RECOVERABLE if error.retryable else Severity.FATAL
        else:
            severity = Severity.TRANSIENT if error.retryable or gave_up else Severity.FATAL
        unavailable = error.retryable or gave_up
        return severity, (
            FinishReason.PROVIDER_UNAVAILABLE if unavailable else FinishReason.PROVIDER_ERROR
        )
    severity, reason = _BY_CATEGORY[error.category]
    named = error.details.get("finish_reason")
    if error.category is ErrorCategory.BUDGET and isinstance(named, str):
        reason = FinishReason(named)
    return severity, reason


def finish_reason_for(error: AgentError) -> FinishReason:
    """The finish reason of a run that `error` ends."""
    return classify(error)[1]


def termination_for(error: AgentError) -> Termination:
    return Termination(finish_reason_for(error), error.message)


def error_ending(emit: Callable[[ev.Event], None], error: AgentError) -> Termination:
    """The ending `error` gives a run; a stop at a limit or by the user is an ending, not a
    fault, so only the others are reported as an error event."""
    if error.category not in (ErrorCategory.BUDGET, ErrorCategory.CANCELLATION):
        details = {k: v for k, v in error.details.items() if isinstance(v, str | int | float)}
        emit(ev.ErrorOccurred(error.category.value, error.message, error.retryable, details))
    return termination_for(error)
