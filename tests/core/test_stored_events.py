"""Every event the session store holds reads back as the event that was written; one that
cannot be read says why instead of raising."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

from journeyman.core import events as ev
from journeyman.core.messages import Message, ToolCall, ToolResult, Usage
from journeyman.core.result import CheckEvidence, FinishReason, RefusedCall, RunResult
from journeyman.core.stored import MISSING_TIMESTAMP, StoredFormatError

CALL = ToolCall("c1", "run_command", {"command": "pytest -q"})
RESULT = RunResult(
    "done", FinishReason.COMPLETED, 3, 2, Usage(10, 5, 3, 1), 0.5, 1.25, "s1",
    no_progress_snapshot=[Message.assistant("x", [CALL]), Message.tool(ToolResult("c", "x", "k"))],
    refused_calls=[RefusedCall("write_file", "a.py", "plan mode")], files_changed=["a.py"],
    verification=CheckEvidence("pytest -q", True, 0, True, 1.5, "1 passed",
                               test_changes=({"path": "t.py", "change": "added"},)),
    extra={"note": 1},
)  # fmt: skip
EVERY: list[ev.StoredEvent] = [
    ev.RunStarted("s1", "fix it", "openai", "m", "/ws", tool_mode="native"),
    ev.ModelRequestSent(1, 3, 5, max_output_tokens=512),
    ev.ModelResponseReceived(1, "ok", (CALL,), Usage(1, 2), None, "tool_use", 0.5, "m", "p"),
    ev.TextDelta("o"),
    ev.ToolCallStarted(1, CALL),
    ev.ApprovalDecided(1, "c1", "run_command", True, "yes", "default mode"),
    ev.ToolResultReceived(1, ToolResult("c1", "run_command", "ok", metadata={"exit_code": 0}), 0.1),
    ev.StateChanged("idle", "running"),
    ev.NudgeInjected("budget_warning", "80% spent"),
    ev.BudgetUpdated("warning", "none", 0.8, "usd", 10, 100, 0.8, max_tool_calls=2),
    ev.ExtensionRequested(100, 0.5, "tests fail", 0, 2),
    ev.ExtensionDecided(True, 100, 0.5),
    ev.ErrorOccurred("provider", "429", True, {"status": 429}),
    ev.ContextCompacted("threshold", ("trim", "mask"), 1000, 400),
    ev.SummaryCallMade(2, Usage(5, 1), 0.01, 0.2, 256, "m", "p", "end_turn"),
    ev.PhaseChanged("plan", "act", "next"),
    ev.CheckFixed("pytest -q", "--verify", "pytest", {"files": []}, {"exit_code": 1}),
    ev.RunFinished(RESULT),
    ev.FollowUpSent("and a test"),
]  # fmt: skip


def test_every_kind_of_stored_event_is_covered() -> None:
    assert {type(e) for e in EVERY} == set(typing.get_args(ev.StoredEvent))


@pytest.mark.parametrize("event", EVERY, ids=lambda e: e.type)
def test_an_event_reads_back_as_written(event: ev.StoredEvent) -> None:
    stored = json.loads(json.dumps(ev.event_to_dict(event)))
    back = ev.event_from_dict(stored)
    assert ev.event_to_dict(back) == stored
    assert type(back) is type(event) and back.timestamp == event.timestamp


def test_a_missing_timestamp_reads_as_unknown_not_as_now() -> None:
    data = {"type": "state_change", "from_state": "idle", "to_state": "running"}
    assert ev.event_from_dict(data) == ev.StateChanged("idle", "running", MISSING_TIMESTAMP)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"type": "budget", "level": "x"}, "budget event: 'previous_level' is missing"),
        ({"type": "tool_call", "iteration": 1, "call": {"id": 7, "name": "x"}},
         "tool_call event: 'call.id' is a number, not text"),
        ({"type": "error", "category": "x", "message": "m", "retryable": "yes"},
         "error event: 'retryable' is text, not true or false"),
        ({"type": "compaction", "reason": "r", "stages": "trim", "tokens_before": 1,
          "tokens_after": 1}, "'stages' is text, not a list"),
        ({"type": "run_finished", "result": {**ev.event_to_dict(ev.RunFinished(RESULT))["result"],
                                             "finish_reason": "exploded"}},
         "'result.finish_reason': 'exploded' is not a known value"),
        ({"type": "x" * 500}, "unknown type 'xxxx"),
        ({"kind": "event"}, "event has no type"),
        ([1, 2], "event is a list, not an object"),
    ],
)  # fmt: skip
def test_an_event_that_cannot_be_read_says_why(data: Any, why: str) -> None:
    with pytest.raises(StoredFormatError) as raised:
        ev.event_from_dict(data)
    assert why in str(raised.value) and len(str(raised.value)) < 200
    unreadable = ev.read_event(data)
    assert isinstance(unreadable, ev.UnreadableEvent) and unreadable.reason == str(raised.value)
