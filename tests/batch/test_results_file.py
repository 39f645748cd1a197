"""results.jsonl read back on resume: a row cut by a kill is skipped, damage is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from journeyman.batch.results import RESULTS_FILE, TaskResult, append_result, read_results
from journeyman.core.errors import ConfigurationError


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
    "junk", [b"\x00\x17 junk }\n", b"[1, 2]\n", b'{"id": "x"}\n', b'{"status": "failed"}\n']
)
def test_a_damaged_line_is_refused_with_its_number(tmp_path: Path, junk: bytes) -> None:
    append_result(tmp_path, row("a"))
    path = tmp_path / RESULTS_FILE
    path.write_bytes(path.read_bytes() + junk)
    append_result(tmp_path, row("b"))
    with pytest.raises(ConfigurationError, match=f"{RESULTS_FILE}:2 is not a result row"):
        read_results(tmp_path)
