"""The checkpoint stored with every step: everything a resume needs, as one versioned model.

Version 1 keeps the layout of the unversioned checkpoints written before it (version 0), so
those still resume; a checkpoint from a newer journeyman is refused with a clear message.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from journeyman.core.errors import ConfigurationError
from journeyman.core.lifecycle import AgentState
from journeyman.economics.budget import ExecutionEconomics
from journeyman.loop.budget_gate import BudgetGate
from journeyman.loop.modes import Mode, StatefulMode
from journeyman.loop.state import LoopState
from journeyman.session.store import HISTORY_START

CHECKPOINT_VERSION = 1


class Counters(BaseModel):
    """The session's counters after the step."""

    model_config = ConfigDict(extra="forbid")

    iterations: int = Field(ge=0)
    """Turns taken in the session."""
    tool_calls_made: int = Field(ge=0)
    """Tool calls run in the session."""
    consecutive_mistakes: int = Field(ge=0)
    """Turns in a row whose output was unusable."""


class RunCheckpoint(BaseModel):
    """One step's resumable state."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    version: int = CHECKPOINT_VERSION
    """Layout version; absent (0) in checkpoints written before versioning."""
    counters: Counters
    """Turn, call and mistake counters."""
    pending_nudges: list[tuple[str, str]] = Field(default_factory=list)
    """(kind, message) pairs still to tell the model."""
    token_ratio: float = 1.0
    """Calibration of the token estimate against the provider's reports."""
    economics: dict[str, Any]
    """`ExecutionEconomics.snapshot()`."""
    budget_gate: dict[str, Any]
    """`BudgetGate.snapshot()`."""
    mode: dict[str, Any] | None = None
    """A stateful mode's own state (`StatefulMode.snapshot()`)."""
    lifecycle: str = "running"
    """The lifecycle state when the step was stored."""
    history_start: int = Field(default=0, alias=HISTORY_START)
    """Seq of the first stored message of the current history (moved by compaction)."""

    def to_json(self) -> dict[str, Any]:
        """The dict stored in the steps table (the history start is the store's to add)."""
        return self.model_dump(mode="json", by_alias=True, exclude={"history_start"})


def load_checkpoint(data: dict[str, Any], *, session_id: str) -> RunCheckpoint:
    """Parse a stored checkpoint of any known version; ConfigurationError otherwise."""
    version = data.get("version", 0)
    if not isinstance(version, int) or version > CHECKPOINT_VERSION:
        raise ConfigurationError(
            f"session {session_id} was saved by a newer journeyman (checkpoint version "
            f"{version}; this one reads up to {CHECKPOINT_VERSION}); upgrade journeyman to "
            "resume it"
        )
    try:
        return RunCheckpoint.model_validate({**data, "version": CHECKPOINT_VERSION})
    except ValidationError as error:
        raise ConfigurationError(
            f"the last checkpoint of session {session_id} cannot be read ({error.error_count()} "
            f"problem(s), first: {error.errors()[0]['msg']} at "
            f"{'.'.join(str(p) for p in error.errors()[0]['loc'])}); the session cannot be "
            "resumed, but `journeyman fork` can start a new one from an earlier step"
        ) from error


def checkpoint_of(
    state: LoopState,
    economics: ExecutionEconomics,
    budget: BudgetGate,
    mode_state: dict[str, Any] | None,
    lifecycle: AgentState,
) -> RunCheckpoint:
    """The checkpoint after the step just taken."""
    return RunCheckpoint(
        counters=Counters(
            iterations=state.iterations,
            tool_calls_made=state.tool_calls_made,
            consecutive_mistakes=state.consecutive_mistakes,
        ),
        pending_nudges=list(state.pending_nudges),
        token_ratio=state.token_ratio,
        economics=economics.snapshot(),
        budget_gate=budget.snapshot(),
        mode=mode_state,
        lifecycle=lifecycle.value,
    )


def restore_run(
    state: LoopState,
    checkpoint: RunCheckpoint,
    economics: ExecutionEconomics,
    budget: BudgetGate,
    mode: Mode,
) -> None:
    """Load `checkpoint` into a resumed run's record, economics, budget gate and mode."""
    state.iterations = checkpoint.counters.iterations
    state.tool_calls_made = checkpoint.counters.tool_calls_made
    state.consecutive_mistakes = checkpoint.counters.consecutive_mistakes
    state.pending_nudges = list(checkpoint.pending_nudges)
    state.token_ratio = checkpoint.token_ratio
    economics.restore(checkpoint.economics)
    budget.restore(checkpoint.budget_gate)
    if isinstance(mode, StatefulMode) and checkpoint.mode is not None:
        mode.restore(checkpoint.mode)
