"""The record threaded through every turn of a run, and what one turn reports back."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.core.result import FinishReason
from journeyman.economics.budget import BudgetStatus


@dataclass
class LoopState:
    task: str
    session_id: str
    parent_session_id: str | None = None
    messages: list[Message] = field(default_factory=list)
    """The conversation as the model sees it (the system prompt is kept apart)."""
    iterations: int = 0
    tool_calls_made: int = 0
    consecutive_mistakes: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    """Tokens of this run (the session's cumulative figures live in the economics)."""
    cost_usd: float | None = 0.0
    """Running cost of this run; None once any call could not be priced."""
    started_at: float = field(default_factory=time.monotonic)
    finish_reason: FinishReason | None = None
    final_text: str = ""
    error: str | None = None
    no_progress_snapshot: list[Message] | None = None
    budget: BudgetStatus | None = None
    """The enforcement verdict for the current turn."""
    pending_nudges: list[tuple[str, str]] = field(default_factory=list)
    """(kind, message) pairs to tell the model before its next turn."""

    @property
    def halted(self) -> bool:
        """A hook stopped the run (checked after every await that may run hooks)."""
        return self.finish_reason is FinishReason.HALTED


@dataclass(frozen=True)
class TurnOutcome:
    """What a mode did in one turn, for the kernel's accounting."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    results: tuple[ToolResult, ...] = ()
    mistake: bool = False
    """The turn's output was unusable: malformed, empty, or every tool call failed."""
    finish_reason: FinishReason | None = None
    final_text: str = ""
