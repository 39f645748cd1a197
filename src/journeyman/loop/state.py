"""The record threaded through every turn of a run, and what one turn reports back."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.core.result import FinishReason, RunResult
from journeyman.economics.budget import BudgetStatus
from journeyman.loop.endings import Termination


@dataclass
class LoopState:
    """One run's record. What a resume needs of it is stored in every step's checkpoint
    (`loop.checkpoint`); the rest (usage, cost, start time) belongs to this run only."""

    task: str
    session_id: str
    parent_session_id: str | None = None
    messages: list[Message] = field(default_factory=list)
    """The conversation as the model sees it (the system prompt is kept apart)."""
    iterations: int = 0
    """Turns of the session so far (a resumed session continues its count)."""
    tool_calls_made: int = 0
    consecutive_mistakes: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    """Tokens of this run (the session's cumulative figures live in the economics)."""
    cost_usd: float | None = 0.0
    """Running cost of this run; None once any call could not be priced."""
    token_ratio: float = 1.0
    """Reported prompt tokens / estimated ones at the last call (calibrates the estimate)."""
    started_at: float = field(default_factory=time.monotonic)
    ending: Termination | None = None
    """Why the run stopped; None while it runs."""
    final_text: str = ""
    no_progress_snapshot: list[Message] | None = None
    budget: BudgetStatus | None = None
    """The enforcement verdict for the current turn."""
    pending_nudges: list[tuple[str, str]] = field(default_factory=list)
    """(kind, message) pairs to tell the model before its next turn."""

    def result(self, ending: Termination, store_path: str) -> RunResult:
        """What the caller gets back once the run ended with `ending`."""
        return RunResult(
            final_text=self.final_text,
            finish_reason=ending.reason,
            iterations=self.iterations,
            tool_calls_made=self.tool_calls_made,
            usage=self.usage,
            cost_usd=self.cost_usd if self.model_calls else 0.0,
            duration_s=time.monotonic() - self.started_at,
            session_id=self.session_id,
            parent_session_id=self.parent_session_id,
            error=None if ending.reason.is_success else ending.message,
            no_progress_snapshot=self.no_progress_snapshot,
            store_path=store_path,
        )


@dataclass(frozen=True)
class TurnOutcome:
    """What a mode did in one turn, for the kernel's accounting.

    `calls` and `results` are paired: every reported call comes with its result, in every
    mode, so the observer learns the same from a turn whatever mode produced it.
    """

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    results: tuple[ToolResult, ...] = ()
    mistake: bool = False
    """The turn's output was unusable: malformed, empty, or every tool call failed."""
    finish_reason: FinishReason | None = None
    final_text: str = ""
    error: str | None = None
    """Why the run failed, when `finish_reason` is not a success."""
    calls_pending: bool = False
    """The model asked for tool calls that run in a later turn (the phased mode's PLAN)."""
