"""How the phased mode answers an error: by its type in the error hierarchy, never by its text.

- recoverable: the model can do something about it (a malformed reply, a failed or timed-out
  tool, a failing verification); the mode goes back to PLAN and shows the model the error;
- fatal: no further turn can fix it (bad configuration, a refused permission the model cannot
  lift, a provider that refuses the request for good, an internal fault); the run FAILs;
- transient: the service or the budget ran out; the kernel records the usual finish reason
  (provider unavailable, a capacity limit) and the run may be resumed later.
"""

from __future__ import annotations

from journeyman.core.errors import AgentError
from journeyman.loop import endings
from journeyman.loop.endings import Severity

__all__ = ["Severity", "classify", "format_for_model"]


def classify(error: AgentError) -> Severity:
    """The severity of `error` (one mapping for severity and finish reason: `loop.endings`)."""
    return endings.classify(error)[0]


def format_for_model(error: AgentError, *, during: str) -> str:
    """The message that tells the model what went wrong and what to do about it."""
    kind = type(error).__name__
    return (
        f"While {during}, this went wrong ({kind}, {error.category.value} error): "
        f"{error.message}\nNothing else was changed by it. Adjust your plan and continue."
    )
