"""How `journeyman batch` shows its progress: JSON lines, plain lines, or a live bar."""

from __future__ import annotations

import json

import pytest

from journeyman.cli.batch_cmd import Progress
from journeyman.cli.options import OutputFormat

COUNTS = {"total": 3, "succeeded": 1, "failed": 1, "running": 1, "batch_id": "b1"}
EVENTS = [
    {"type": "batch_started", "to_run": 3, "finished_before": 0, **COUNTS},
    {"type": "task_started", "task_id": "a\x1b[31m", "resumed": True, **COUNTS},
    {
        "type": "task_finished",
        "task_id": "a",
        "status": "failed",
        "finish_reason": "max_budget_usd",
        "cost_usd": 0.5,
        "spent_usd": 0.5,
        "cap_usd": 2.0,
        **COUNTS,
    },
    {
        "type": "task_requeued",
        "task_id": "b",
        "reason": "rate_limited",
        "concurrency": 2,
        "pause_s": 1.5,
        **COUNTS,
    },
    {"type": "budget_exhausted", "task_id": "c", "not_started": 1, **COUNTS},
]


def test_stream_json_writes_one_event_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(OutputFormat.STREAM_JSON, live=False)
    for event in EVENTS:
        progress(event)
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["type"] for line in lines] == [e["type"] for e in EVENTS]


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


def test_the_live_bar_runs_without_a_terminal_too(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(OutputFormat.TEXT, live=True)
    for event in EVENTS:
        progress(event)
    progress.close()
    captured = capsys.readouterr()
    assert captured.out == "" and "a failed (max_budget_usd)" in captured.err
