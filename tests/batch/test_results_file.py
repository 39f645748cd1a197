"""`results.jsonl` read back typed: a row an older version wrote still reads, one that is no
row (cut by a kill, a field of the wrong kind, an unknown status) is skipped."""

from __future__ import annotations

import json
from pathlib import Path

from journeyman.batch.results import RESULTS_FILE, TaskResult, append_result, read_results

OLD_ROW = {"id": "t1", "status": "succeeded", "finish_reason": "completed", "cost_usd": 0,
           "tokens": 57, "duration_s": 1.5, "iterations": 3, "verify_passed": True,
           "session_id": "b-t1-1"}  # fmt: skip
"""A row as the first versions wrote it: no attempts, receipt, files, grade or task text."""


def test_rows_read_back_typed_and_bad_ones_are_skipped(tmp_path: Path) -> None:
    lines = [
        json.dumps(OLD_ROW),
        json.dumps({**OLD_ROW, "id": "t2", "cost_usd": "a lot"}),
        json.dumps({**OLD_ROW, "id": "t3", "status": "exploded"}),
        json.dumps({**OLD_ROW, "id": "t4", "from_a_newer_version": 1}),
        json.dumps(["t5"]),
        '{"id": "t6", "status": "succ',  # cut by a kill
    ]
    (tmp_path / RESULTS_FILE).write_text("\n".join(lines) + "\n")
    rows = read_results(tmp_path)
    assert sorted(rows) == ["t1", "t4"]
    old = rows["t1"]
    assert old.cost_usd == 0.0 and isinstance(old.cost_usd, float)
    assert (old.attempts, old.files_changed, old.receipt, old.task) == (0, [], None, "")


def test_a_row_written_reads_back_equal(tmp_path: Path) -> None:
    row = TaskResult(
        "t1", "failed", "verification_failed", 0.25, 900, 12.5, 4, False, "b-t1-2",
        attempts=2, error="the check failed", files_changed=["a.py"],
        grade={"resolved": False}, receipt={"command": "pytest", "passed": False},
    )  # fmt: skip
    append_result(tmp_path, row)
    assert read_results(tmp_path) == {"t1": row}
