"""How `journeyman batch` shows its progress: JSON lines, plain lines, or a live bar; and the
JSON line of each event, which readers of the stream rely on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from journeyman.batch.events import (
    BatchFinished,
    BatchStarted,
    BudgetExhausted,
    Pace,
    Spend,
    SpendMismatch,
    SpendUpdated,
    TaskCounts,
    TaskFinished,
    TaskRequeued,
    TaskSkipped,
    TaskStarted,
    batch_event_from_dict,
    batch_event_to_dict,
)
from journeyman.cli.batch_cmd import Progress
from journeyman.cli.options import OutputFormat
from journeyman.core.stored import StoredFormatError

COUNTS = TaskCounts(total=3, succeeded=1, failed=1, running=1)
SPEND = Spend(spent_usd=0.5, spent_tokens=900, cap_usd=2.0)
EVENTS = [
    BatchStarted("b1", 3, 3, 0, 0, 0.0, 0, COUNTS),
    TaskStarted("b1", "a\x1b[31m", "b1-a-1", 1, True, 0.6, None, COUNTS),
    TaskFinished("b1", "a", "failed", "max_budget_usd", 0.5, 900, "b1-a-1", SPEND, COUNTS),
    TaskRequeued("b1", "b", "rate_limited", COUNTS, concurrency=2, pause_s=1.5),
    BudgetExhausted("b1", "c", 1, SPEND, COUNTS),
]

COUNTS_WIRE = {"total": 3, "succeeded": 1, "failed": 1, "infra_error": 0, "not_run": 0,
               "running": 1, "queued": 0}  # fmt: skip
PACE_WIRE = {"elapsed_s": None, "eta_s": None, "tasks_per_min": None}
SPEND_WIRE = {"spent_usd": 0.5, "spent_tokens": 900, "reserved_usd": None, "cap_usd": 2.0,
              "cap_tokens": None, "in_flight_usd": None, "in_flight_tokens": None}  # fmt: skip
WIRE: list[dict[str, Any]] = [
    {"type": "batch_started", "batch_id": "b1", "tasks": 3, "to_run": 3, "finished_before": 0,
     "resumed": 0, "spent_before_usd": 0.0, "spent_before_tokens": 0, **PACE_WIRE, **COUNTS_WIRE},
    {"type": "task_skipped", "batch_id": "b1", "task_id": "a", "status": "succeeded",
     **PACE_WIRE, **COUNTS_WIRE},
    {"type": "task_started", "batch_id": "b1", "task_id": "a", "session_id": "b1-a-1",
     "attempt": 1, "resumed": False, "granted_usd": 0.6, "granted_tokens": None,
     **PACE_WIRE, **COUNTS_WIRE},
    {"type": "task_requeued", "batch_id": "b1", "task_id": "a", "reason": "rate_limited",
     "concurrency": 2, "pause_s": 1.5, **PACE_WIRE, **COUNTS_WIRE},
    {"type": "task_requeued", "batch_id": "b1", "task_id": "a", "reason": "infra_error",
     "error": None, "retry": 1, **PACE_WIRE, **COUNTS_WIRE},
    {"type": "budget_exhausted", "batch_id": "b1", "task_id": "c", "not_started": 2,
     **SPEND_WIRE, **PACE_WIRE, **COUNTS_WIRE},
    {"type": "task_finished", "batch_id": "b1", "task_id": "a", "status": "failed",
     "finish_reason": "max_budget_usd", "cost_usd": 0.5, "tokens": 900,
     "session_id": "b1-a-1", **SPEND_WIRE, **PACE_WIRE, **COUNTS_WIRE},
    {"type": "batch_finished", "batch_id": "b1", "summary": "1 of 3 succeeded", **SPEND_WIRE,
     **PACE_WIRE, **COUNTS_WIRE},
]  # fmt: skip
"""Each event's line, keys in order (as before its events were typed, with the pace and the
queued count added)."""


@pytest.mark.parametrize("line", WIRE, ids=[f"{w['type']}-{i}" for i, w in enumerate(WIRE)])
def test_each_event_keeps_its_json_line(line: dict[str, Any]) -> None:
    event = batch_event_from_dict(line)
    assert list(batch_event_to_dict(event).items()) == list(line.items())


def test_a_line_written_before_the_pace_was_added_still_reads() -> None:
    older = {k: v for k, v in WIRE[6].items() if k not in PACE_WIRE and k != "queued"}
    event = batch_event_from_dict(older)
    assert isinstance(event, TaskFinished) and event.pace == Pace() and event.counts.queued == 0


def test_typed_events_make_the_lines_of_before() -> None:
    made = [
        TaskSkipped("b1", "a", "succeeded", COUNTS),
        TaskRequeued("b1", "a", "infra_error", COUNTS, error=None, retry=1),
        BatchFinished("b1", "1 of 3 succeeded", SPEND, COUNTS),
    ]
    expected = [WIRE[1], WIRE[4], WIRE[7]]
    assert [json.dumps(batch_event_to_dict(e)) for e in made] == [json.dumps(w) for w in expected]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ({"type": "task_exploded", "batch_id": "b1"}, "unknown type 'task_exploded'"),
        ({"type": "task_skipped", "batch_id": "b1", "task_id": "a", "status": "x"},
         "'counts.total' is missing"),
        ({**WIRE[0], "to_run": "3"}, "'to_run' is text, not a whole number"),
        (["task_started"], "not an object"),
    ],
)  # fmt: skip
def test_a_line_that_is_no_batch_event_is_refused_saying_why(line: Any, why: str) -> None:
    with pytest.raises(StoredFormatError, match=why):
        batch_event_from_dict(line)


def test_stream_json_writes_one_event_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(OutputFormat.STREAM_JSON, live=False)
    for event in EVENTS:
        progress(event)
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["type"] for line in lines] == [e.type for e in EVENTS]
    assert "\x1b" not in lines[1] and json.loads(lines[1])["task_id"] == "a\x1b[31m"


def test_plain_lines_say_what_changed_with_control_characters_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    progress = Progress(OutputFormat.TEXT, live=False)
    for event in EVENTS:
        progress(event)
    err = capsys.readouterr().err
    assert "\x1b" not in err and "started (resumed)" in err
    assert "[2/3 done, 1 running, 1 failed, $0.5000 of $2.00] a failed (max_budget_usd)" in err
    assert "rate-limited: requeued, concurrency now 2, pause 1.5 s" in err
    assert "budget exhausted: 1 task will not start" in err


def test_plain_lines_show_the_pace_and_the_queued_attempts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    progress = Progress(OutputFormat.TEXT, live=False)
    counts = TaskCounts(total=10, succeeded=4, running=2, queued=3)
    pace = Pace(elapsed_s=65.2, eta_s=130.0, tasks_per_min=3.68)
    progress(TaskFinished("b1", "a", "succeeded", "completed", 0.1, 9, "s", SPEND, counts, pace))
    err = capsys.readouterr().err
    assert "[4/10 done, 2 running, 3 queued, 0 failed, $0.5000 of $2.00, 1m05s elapsed, " in err
    assert "ETA 2m10s, 3.7 tasks/min] a succeeded" in err
    progress(TaskStarted("b1", "b", "s", 1, False, None, None, TaskCounts(total=1)))
    assert "[0/1 done, 0 running, 0 failed] b started" in capsys.readouterr().err


def test_the_live_bar_runs_without_a_terminal_too(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(OutputFormat.TEXT, live=True)
    for event in EVENTS:
        progress(event)
    progress.close()
    captured = capsys.readouterr()
    assert captured.out == "" and "a failed (max_budget_usd)" in captured.err


def test_spend_in_flight_moves_the_bar_and_a_mismatch_is_an_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    moving = Spend(spent_usd=0.5, cap_usd=2.0, in_flight_usd=0.25)
    quiet = Progress(OutputFormat.TEXT, live=False)
    quiet(SpendUpdated("b1", moving, COUNTS))  # no line a second in a log
    quiet(TaskFinished("b1", "a", "succeeded", "completed", 0.5, 9, "s", moving, COUNTS))
    quiet(SpendMismatch("b1", "a", "s", "task a: the worker reported $1 \x1b[2J"))
    err = capsys.readouterr().err
    assert err.count("\n") == 2
    assert "$0.7500 of $2.00 ($0.2500 in flight)] a succeeded" in err
    assert "journeyman: error: task a: the worker reported $1" in err and "\x1b" not in err
    streamed = Progress(OutputFormat.STREAM_JSON, live=False)
    streamed(SpendUpdated("b1", moving, COUNTS))
    line = json.loads(capsys.readouterr().out)
    assert (line["type"], line["in_flight_usd"], line["spent_usd"]) == ("spend_updated", 0.25, 0.5)
