"""A swarm's stream-json lines: the same line for each event as before its lines could be read
back, read back to the same typed event, and a line that is none refused saying why."""

from __future__ import annotations

import json
from typing import Any

import pytest

from journeyman.core import events as ev
from journeyman.core.messages import ToolCall
from journeyman.core.stored import StoredFormatError
from journeyman.swarm.progress import (
    SwarmStage,
    SwarmUpdate,
    WorkerEvent,
    WorkerState,
    WorkerUpdate,
    swarm_event_from_dict,
    swarm_event_to_dict,
)

WIRE: list[dict[str, Any]] = [
    {"type": "swarm", "worker_id": None, "stage": "planning", "detail": "add a flag",
     "timestamp": 5.0},
    {"type": "swarm", "worker_id": None, "stage": "final_verify", "detail": "1 passed",
     "passed": True, "timestamp": 6.0},
    {"type": "swarm_worker", "worker_id": "w1", "state": "planned", "title": "add the flag",
     "attempt": 1, "files": ["cli.py"], "timestamp": 7.0},
    {"type": "swarm_worker", "worker_id": "w1-2", "state": "conflict", "title": "add the flag",
     "attempt": 2, "detail": "merge failed", "files": ["cli.py", "x.py"], "branch": "jm/w1-2",
     "session_id": "s-w1", "timestamp": 8.0},
    {"worker_id": "w1", "attempt": 1, "type": "tool_call", "iteration": 2,
     "call": {"id": "c1", "name": "read_file", "arguments": {"path": "cli.py"}},
     "timestamp": 9.0},
]  # fmt: skip
"""Lines as `journeyman swarm --output-format stream-json` wrote them, keys in order."""


@pytest.mark.parametrize("line", WIRE, ids=[f"{w['type']}-{i}" for i, w in enumerate(WIRE)])
def test_each_line_reads_back_and_is_written_the_same(line: dict[str, Any]) -> None:
    event = swarm_event_from_dict(json.loads(json.dumps(line)))
    assert list(swarm_event_to_dict(event).items()) == list(line.items())


def test_lines_read_back_as_their_typed_events() -> None:
    planning, _, planned, conflict, worker = (swarm_event_from_dict(w) for w in WIRE)
    assert planning == SwarmUpdate(SwarmStage.PLANNING, "add a flag", timestamp=5.0)
    assert planned == WorkerUpdate("w1", WorkerState.PLANNED, "add the flag", 1,
                                   files=("cli.py",), timestamp=7.0)  # fmt: skip
    assert isinstance(conflict, WorkerUpdate) and conflict.state is WorkerState.CONFLICT
    call = ToolCall("c1", "read_file", {"path": "cli.py"})
    assert worker == WorkerEvent("w1", 1, ev.ToolCallStarted(2, call, timestamp=9.0))


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ({"type": "swarm", "worker_id": None, "stage": "exploded"}, "'stage': 'exploded'"),
        ({"type": "swarm_worker", "worker_id": "w1", "state": "planned"}, "'title' is missing"),
        ({"type": "tool_call", "iteration": 1, "call": {"id": "c", "name": "x"}},
         "no worker_id and attempt"),
        ({"worker_id": "w1", "attempt": 1, "type": "nope"}, "unknown type 'nope'"),
        ({"worker_id": "w1", "attempt": 1, "type": "follow_up", "text": "x"}, "follow_up"),
        ("swarm", "not an object"),
    ],
)  # fmt: skip
def test_a_line_that_is_no_swarm_event_is_refused(line: Any, why: str) -> None:
    with pytest.raises(StoredFormatError, match=why):
        swarm_event_from_dict(line)
