"""results.jsonl read back typed on resume: a row an older version wrote still reads, a row cut
by a kill is skipped, damage (not JSON, a field missing or of the wrong kind) is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journeyman.batch.results import RESULTS_FILE, TaskResult, append_result, read_results
from journeyman.core.errors import ConfigurationError

OLD_ROW = {"id": "t1", "status": "succeeded", "finish_reason": "completed", "cost_usd": 0,
           "tokens": 57, "duration_s": 1.5, "iterations": 3, "verify_passed": True,
           "session_id": "b-t1-1"}  # fmt: skip
"""A row as the first versions wrote it: no attempts, receipt, files, grade or task text."""


def row(task_id: str) -> TaskResult:
    return TaskResult(task_id, "succeeded", "completed", 0.0, 1, 0.1, 1, None, None)


def test_a_row_cut_by_a_kill_is_skipped_and_the_next_row_starts_a_line(tmp_path: Path) -> None:
    append_result(tmp_path, row("a"))
    with (tmp_path / RESULTS_FILE).open("a") as handle:
        handle.write('{"id": "b", "status": "succ')  # killed while appending
    assert list(read_results(tmp_path)) == ["a"]
    append_result(tmp_path, row("c"))
    assert list(read_results(tmp_path)) == ["a", "c"]


@pytest.mark.parametrize(
    "junk",
    [
        b"\x00\x17 junk }\n",
        b"[1, 2]\n",
        b'{"id": "x"}\n',
        b'{"status": "failed"}\n',
        json.dumps({**OLD_ROW, "cost_usd": "a lot"}).encode() + b"\n",
        json.dumps({**OLD_ROW, "status": "exploded"}).encode() + b"\n",
    ],
)
def test_a_damaged_line_is_refused_with_its_number(tmp_path: Path, junk: bytes) -> None:
    append_result(tmp_path, row("a"))
    path = tmp_path / RESULTS_FILE
    path.write_bytes(path.read_bytes() + junk)
    append_result(tmp_path, row("b"))
    with pytest.raises(ConfigurationError, match=f"{RESULTS_FILE}:2 is not a result row"):
        read_results(tmp_path)


def test_old_rows_and_rows_of_a_newer_version_read_back_typed(tmp_path: Path) -> None:
    newer = {**OLD_ROW, "id": "t4", "from_a_newer_version": 1}
    (tmp_path / RESULTS_FILE).write_text(f"{json.dumps(OLD_ROW)}\n{json.dumps(newer)}\n")
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
