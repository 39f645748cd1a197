"""What a swarm reports while it runs: one `WorkerUpdate` per worker state change (and a few
for the swarm as a whole), and each worker's own agent events tagged with its id; their JSON
lines (`swarm_event_to_dict`, the stream-json output) and those lines read back
(`swarm_event_from_dict`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from journeyman.core import events as ev
from journeyman.core.events import event_from_dict, event_to_dict
from journeyman.core.stored import StoredFormatError, decode_tagged, tag_of


class WorkerState(StrEnum):
    PLANNED = "planned"
    STARTED = "started"
    GATE_PASSED = "gate_passed"
    GATE_FAILED = "gate_failed"
    MERGED = "merged"
    CONFLICT = "conflict"
    FAILED = "failed"
    SKIPPED = "skipped"
    """Not started: a global doom loop stopped the scheduling of work that repeats it."""


class SwarmStage(StrEnum):
    PLANNING = "planning"
    PLAN_RETRY = "plan_retry"
    FINAL_VERIFY = "final_verify"
    GLOBAL_DOOM_LOOP = "global_doom_loop"
    SHARED_STATE = "shared_state"
    """The shared state was loaded from its store, or the store failed (the swarm goes on)."""
    LEFTOVERS = "leftovers"
    """What a swarm that did not finish left in the repository was removed (or kept)."""
    FINISHED = "finished"


@dataclass(frozen=True)
class WorkerUpdate:
    """A worker changed state."""

    worker_id: str
    state: WorkerState
    title: str
    attempt: int = 1
    detail: str = ""
    files: tuple[str, ...] = ()
    """The subtask's expected files (planned), or the conflicting files (conflict)."""
    branch: str | None = None
    session_id: str | None = None
    timestamp: float = field(default_factory=time.time)
    type: Literal["swarm_worker"] = "swarm_worker"


@dataclass(frozen=True)
class SwarmUpdate:
    """Something about the swarm as a whole (planning, a global doom loop, the final check)."""

    stage: SwarmStage
    detail: str = ""
    passed: bool | None = None
    timestamp: float = field(default_factory=time.time)
    type: Literal["swarm"] = "swarm"
    worker_id: None = None


@dataclass(frozen=True)
class WorkerEvent:
    """An event of one worker's agent run."""

    worker_id: str
    attempt: int
    event: ev.Event


SwarmEvent = WorkerUpdate | SwarmUpdate | WorkerEvent
SwarmEventHandler = Callable[[SwarmEvent], None]

SWARM_EVENT_TYPES: dict[str, type[WorkerUpdate | SwarmUpdate]] = {
    tag_of(cls): cls for cls in (WorkerUpdate, SwarmUpdate)
}
"""The swarm's own events by their `type` (every other line is a worker's agent event)."""


def swarm_event_to_dict(event: SwarmEvent) -> dict[str, Any]:
    """A JSON-ready dict; every one has a `worker_id` (None for the swarm's own)."""
    if isinstance(event, WorkerEvent):
        return {
            "worker_id": event.worker_id,
            "attempt": event.attempt,
            **event_to_dict(event.event),
        }
    if isinstance(event, WorkerUpdate):
        data: dict[str, Any] = {
            "type": event.type,
            "worker_id": event.worker_id,
            "state": event.state.value,
            "title": event.title,
            "attempt": event.attempt,
        }
        optional = {
            "detail": event.detail,
            "files": list(event.files),
            "branch": event.branch,
            "session_id": event.session_id,
        }
        data.update({k: v for k, v in optional.items() if v})
        data["timestamp"] = event.timestamp
        return data
    data = {"type": event.type, "worker_id": None, "stage": event.stage.value}
    if event.detail:
        data["detail"] = event.detail
    if event.passed is not None:
        data["passed"] = event.passed
    data["timestamp"] = event.timestamp
    return data


def swarm_event_from_dict(data: Any) -> SwarmEvent:
    """A stream-json line of a swarm read back; `StoredFormatError` when it is not one."""
    if not isinstance(data, dict):
        raise StoredFormatError("swarm event is not an object")
    if data.get("type") in SWARM_EVENT_TYPES:
        return decode_tagged(SWARM_EVENT_TYPES, data, "swarm event")
    worker_id, attempt = data.get("worker_id"), data.get("attempt")
    if not isinstance(worker_id, str) or not isinstance(attempt, int):
        raise StoredFormatError("a worker's event has no worker_id and attempt")
    event = event_from_dict({k: v for k, v in data.items() if k not in ("worker_id", "attempt")})
    if isinstance(event, ev.FollowUpSent):  # stored by sessions, never emitted by a run
        raise StoredFormatError("a worker's event of type 'follow_up'")
    return WorkerEvent(worker_id, attempt, event)


def describe(event: WorkerUpdate | SwarmUpdate) -> str:
    """One line for the text progress."""
    if isinstance(event, SwarmUpdate):
        text = {
            SwarmStage.PLANNING: "swarm: planning",
            SwarmStage.PLAN_RETRY: "swarm: plan could not be read, asking once more",
            SwarmStage.FINAL_VERIFY: "swarm: final check "
            + ("passed" if event.passed else "failed"),
            SwarmStage.GLOBAL_DOOM_LOOP: "swarm: global doom loop",
            SwarmStage.SHARED_STATE: "swarm: shared state",
            SwarmStage.LEFTOVERS: "swarm: cleaned up",
            SwarmStage.FINISHED: "swarm: finished",
        }[event.stage]
        return f"{text}: {event.detail}" if event.detail else text
    head = f"[{event.worker_id}] {event.state.value.replace('_', ' ')}"
    if event.attempt > 1:
        head += f" (attempt {event.attempt})"
    parts = [head]
    if event.state is WorkerState.PLANNED:
        parts.append(event.title)
        if event.files:
            parts.append(f"files: {', '.join(event.files)}")
    elif event.state is WorkerState.STARTED and event.branch:
        parts.append(f"branch {event.branch}")
    elif event.state is WorkerState.CONFLICT:
        parts.append(f"files: {', '.join(event.files)}")
    if event.detail:
        parts.append(event.detail)
    return " — ".join(parts)
