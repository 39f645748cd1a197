"""`results.jsonl`: one row per task, appended (and synced) the moment a task ends, so a batch
killed at any point keeps every finished task; rewritten whole, in task order, at the end.

Also the hook for `preds.json`: an eval registers a writer (`journeyman.batch.suites.preds`
when it exists) that turns the rows into the file its harness reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from journeyman.core.errors import ConfigurationError
from journeyman.core.stored import decode

RESULTS_FILE = "results.jsonl"
ResultStatus = Literal["succeeded", "failed", "infra_error", "not_run"]


@dataclass
class TaskResult:
    """The final state of one task of a batch."""

    id: str
    status: ResultStatus
    finish_reason: str | None
    """The run's finish reason; `budget_exhausted` for a task never started for lack of budget."""
    cost_usd: float
    """All attempts together."""
    tokens: int
    duration_s: float
    iterations: int
    verify_passed: bool | None
    session_id: str | None
    attempts: int = 0
    """Times the task was started (a resume after an infrastructure error or a 429 counts);
    0 for a task never started."""
    error: str | None = None
    workspace: str | None = None
    task: str = ""
    """The task's text (shortened), for the reports."""
    grade: dict[str, Any] | None = None
    files_changed: list[str] = field(default_factory=list)
    receipt: dict[str, Any] | None = None
    """The check's evidence: command, sandbox, exit code, tests before and after, test
    changes, fingerprints (None when no check ran)."""
    spend_mismatch: str | None = None
    """Set when what the worker reported this task spent differs from what the session store
    holds for it (the ledger counted the larger)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, default=str)


def append_result(out: Path, result: TaskResult) -> None:
    """Append one row and sync it to disk (on a line of its own after a row cut by a kill)."""
    path = out / RESULTS_FILE
    with path.open("a", encoding="utf-8") as handle:
        handle.write(("\n" if _ends_mid_line(path) else "") + result.to_json() + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _ends_mid_line(path: Path) -> bool:
    """Whether the file's last row was cut before its newline (a kill while appending)."""
    try:
        with path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"
    except OSError:  # missing or empty
        return False


def read_results(out: Path) -> dict[str, TaskResult]:
    """The last row of each task in `out`'s results, typed. A row cut by a kill while it was
    appended (an unreadable line the file ends with, or one a later row was appended after) is
    skipped; any other unreadable line is damage, refused with its line number."""
    path = out / RESULTS_FILE
    rows: dict[str, TaskResult] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return rows
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        row = _row(line)
        if row is not None:
            rows[row.id] = row
        elif number < len(lines) and not _cut_row(line):
            raise ConfigurationError(
                f"{path}:{number} is not a result row; the file is damaged. Repair or remove "
                "that line, or run the batch again with a new --out folder"
            )
    return rows


def _row(line: str) -> TaskResult | None:
    """The row `line` holds, or None: not JSON, or a field missing or of the wrong kind."""
    try:
        return decode(TaskResult, json.loads(line))
    except (ValueError, TypeError):
        return None


def _cut_row(line: str) -> bool:
    """A row a kill cut short: the start of a JSON object that never closes."""
    return line.startswith("{") and not line.rstrip().endswith("}")


def write_results(out: Path, results: Sequence[TaskResult]) -> Path:
    """Replace the results file with exactly these rows (atomically)."""
    path = out / RESULTS_FILE
    partial = path.with_suffix(".jsonl.partial")
    with partial.open("w", encoding="utf-8") as handle:
        for result in results:
            handle.write(result.to_json() + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    partial.replace(path)
    return path


def write_preds(out: Path, results: Iterable[TaskResult], model: str | None) -> Path | None:
    """`preds.json` through the eval's writer (None when no task produced a prediction)."""
    from journeyman.batch.suites import preds

    return preds.write_preds(out, list(results), model)


__all__ = [
    "RESULTS_FILE",
    "ResultStatus",
    "TaskResult",
    "append_result",
    "read_results",
    "write_preds",
    "write_results",
]
