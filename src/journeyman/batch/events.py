"""The typed events a batch emits while it runs (`Scheduler(on_event=...)`), and their JSON
form: the line `journeyman batch --output-format stream-json` prints for each.

Each line is flat: `type`, `batch_id`, the event's own fields, the spend where the event
carries it (`spent_usd`, `spent_tokens`, `reserved_usd`, `cap_usd`, `cap_tokens`,
`in_flight_usd`, `in_flight_tokens`), the pace of the run (`elapsed_s`, `eta_s`,
`tasks_per_min`), then the counts of the tasks so far (`total`, `succeeded`, `failed`,
`infra_error`, `not_run`, `running`, `queued`). `batch_event_from_dict` reads such a line back.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from journeyman.core.stored import StoredFormatError, decode_tagged, tag_of


@dataclass(frozen=True)
class TaskCounts:
    """Finished tasks by status (`failed` is the agent's failures only: a task being retried
    after an infrastructure error is in none of them until it ends)."""

    total: int
    succeeded: int = 0
    failed: int = 0
    infra_error: int = 0
    not_run: int = 0
    running: int = 0
    """Attempts running on a worker."""
    queued: int = 0
    """Attempts given their allocation but not running yet: their workspace being prepared,
    or waiting for a worker (a Ray task waiting for a CPU)."""

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.infra_error + self.not_run


@dataclass(frozen=True)
class Spend:
    """Where the batch stands against its global budget (None: not limited, or nothing yet)."""

    spent_usd: float | None = None
    spent_tokens: int | None = None
    reserved_usd: float | None = None
    """Granted to attempts in flight, not yet spent."""
    cap_usd: float | None = None
    cap_tokens: int | None = None
    in_flight_usd: float | None = None
    """Spent by attempts still running, as their model calls reported it (not yet in
    `spent_usd`)."""
    in_flight_tokens: int | None = None


@dataclass(frozen=True)
class Pace:
    """How fast this run of the batch goes (None: not known yet)."""

    elapsed_s: float | None = None
    """Seconds since this run of the batch started."""
    eta_s: float | None = None
    """Seconds until the tasks left are done, estimated from the mean time the tasks this run
    finished took, the time the running ones have had, and the concurrency; None until a task
    has finished."""
    tasks_per_min: float | None = None
    """Tasks this run finished (skipped ones not counted) per minute since it started."""


@dataclass(frozen=True)
class BatchStarted:
    batch_id: str
    tasks: int
    to_run: int
    finished_before: int
    """Tasks an earlier run of the batch finished (not run again)."""
    resumed: int
    """Tasks an earlier run started and this run continues from their last step."""
    spent_before_usd: float | None
    spent_before_tokens: int | None
    counts: TaskCounts
    pace: Pace = Pace()
    type: Literal["batch_started"] = "batch_started"


@dataclass(frozen=True)
class TaskSkipped:
    """A task an earlier run of the batch finished."""

    batch_id: str
    task_id: str
    status: str
    counts: TaskCounts
    pace: Pace = Pace()
    type: Literal["task_skipped"] = "task_skipped"


@dataclass(frozen=True)
class TaskStarted:
    batch_id: str
    task_id: str
    session_id: str
    attempt: int
    resumed: bool
    """The attempt continues a stored session (a resumed batch, or a retry after a 429 or an
    infrastructure error)."""
    granted_usd: float | None
    granted_tokens: int | None
    counts: TaskCounts
    pace: Pace = Pace()
    type: Literal["task_started"] = "task_started"


@dataclass(frozen=True)
class TaskRequeued:
    """An attempt ended in a 429 (`reason` rate_limited: `concurrency`, `pause_s`) or an
    infrastructure error (`reason` infra_error: `error`, `retry`); the task goes back first in
    the queue."""

    batch_id: str
    task_id: str
    reason: str
    counts: TaskCounts
    pace: Pace = Pace()
    concurrency: int | None = None
    """The provider's concurrency after the 429."""
    pause_s: float | None = None
    error: str | None = None
    retry: int | None = None
    """Which retry after an infrastructure error this is (1 for the first)."""
    type: Literal["task_requeued"] = "task_requeued"

    @property
    def rate_limited(self) -> bool:
        return self.reason == RATE_LIMITED


@dataclass(frozen=True)
class BudgetExhausted:
    """The global budget cannot fund the next task: nothing new starts."""

    batch_id: str
    task_id: str
    not_started: int
    """Tasks that will not start (this one included)."""
    spend: Spend
    counts: TaskCounts
    pace: Pace = Pace()
    type: Literal["budget_exhausted"] = "budget_exhausted"


@dataclass(frozen=True)
class TaskFinished:
    batch_id: str
    task_id: str
    status: str
    finish_reason: str | None
    cost_usd: float
    """All attempts of the task together."""
    tokens: int
    session_id: str | None
    spend: Spend
    counts: TaskCounts
    pace: Pace = Pace()
    type: Literal["task_finished"] = "task_finished"


@dataclass(frozen=True)
class BatchFinished:
    batch_id: str
    summary: str
    spend: Spend
    counts: TaskCounts
    pace: Pace = Pace()
    type: Literal["batch_finished"] = "batch_finished"


@dataclass(frozen=True)
class SpendUpdated:
    """The spend moved while tasks run (their model calls' usage, reported as it happens);
    at most about once a second."""

    batch_id: str
    spend: Spend
    counts: TaskCounts
    pace: Pace = Pace()
    type: Literal["spend_updated"] = "spend_updated"


@dataclass(frozen=True)
class SpendMismatch:
    """What a worker reported an attempt spent differs from what the session store holds for
    it: the ledger was settled at the larger, and the task's result says so."""

    batch_id: str
    task_id: str
    session_id: str
    message: str
    type: Literal["spend_mismatch"] = "spend_mismatch"


@dataclass(frozen=True)
class SettingIgnored:
    """A setting of a task's workspace config that the trust rules left out (it would have
    loosened what the user chose): said once per task attempt that met it."""

    batch_id: str
    task_id: str
    message: str
    """The warning, naming the key, its value, the file and why."""
    type: Literal["setting_ignored"] = "setting_ignored"


ProgressEvent = (
    BatchStarted
    | TaskSkipped
    | TaskStarted
    | TaskRequeued
    | BudgetExhausted
    | TaskFinished
    | BatchFinished
    | SpendUpdated
)
"""The events that say where the batch stands (each carries its `TaskCounts`)."""
BatchEvent = ProgressEvent | SettingIgnored | SpendMismatch
BatchEventHandler = Callable[[BatchEvent], None]

RATE_LIMITED = "rate_limited"
"""`TaskRequeued.reason` after a 429 (else "infra_error")."""

BATCH_EVENT_TYPES: dict[str, type[BatchEvent]] = {
    tag_of(cls): cls for cls in typing.get_args(BatchEvent)
}
_NESTED = {"spend": Spend, "pace": Pace, "counts": TaskCounts}
"""Records each line carries flat, after the event's own fields."""


def batch_event_to_dict(event: BatchEvent) -> dict[str, Any]:
    """The event as one flat JSON object (the stream-json line)."""
    data: dict[str, Any] = {"type": event.type, "batch_id": event.batch_id}
    nested: list[Any] = []
    for f in dataclasses.fields(event):
        if f.name in ("type", "batch_id") or f.name in _omitted(event):
            continue
        value = getattr(event, f.name)
        if f.name in _NESTED:
            nested.append(value)
        else:
            data[f.name] = value
    nested.sort(key=lambda record: isinstance(record, TaskCounts))  # the counts come last
    for record in nested:
        data.update(dataclasses.asdict(record))
    return data


def batch_event_from_dict(data: Any) -> BatchEvent:
    """A line of a batch's stream-json read back; `StoredFormatError` when it is not one."""
    if not isinstance(data, dict):
        raise StoredFormatError("batch event is not an object")
    shaped = dict(data)
    for name, record in _NESTED.items():
        shaped[name] = {f.name: data[f.name] for f in dataclasses.fields(record) if f.name in data}
    return decode_tagged(BATCH_EVENT_TYPES, shaped, "batch event")


def _omitted(event: BatchEvent) -> frozenset[str]:
    """Fields a line leaves out: a requeue carries the fields of its reason only."""
    if not isinstance(event, TaskRequeued):
        return frozenset()
    if event.rate_limited:
        return frozenset({"error", "retry"})
    return frozenset({"concurrency", "pause_s"})


__all__ = [
    "BATCH_EVENT_TYPES",
    "RATE_LIMITED",
    "BatchEvent",
    "BatchEventHandler",
    "BatchFinished",
    "BatchStarted",
    "BudgetExhausted",
    "Pace",
    "ProgressEvent",
    "SettingIgnored",
    "Spend",
    "SpendMismatch",
    "SpendUpdated",
    "TaskCounts",
    "TaskFinished",
    "TaskRequeued",
    "TaskSkipped",
    "TaskStarted",
    "batch_event_from_dict",
    "batch_event_to_dict",
]
