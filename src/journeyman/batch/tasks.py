"""Where a batch's tasks come from: a JSONL tasks file (`task_file`), or a folder that an eval
suite loader understands (`suites.load_suite`: a folder of micro-format tasks, exercises or
Harbor tasks)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from journeyman.batch.suites import load_suite
from journeyman.batch.task_file import BatchTask, TaskFileError, read_tasks_file
from journeyman.core.errors import ConfigurationError


def load_tasks(path: Path, note: Callable[[str], None] | None = None) -> list[BatchTask]:
    """The tasks of `path`: a JSONL file, or a folder an eval suite loader understands (`note`
    is told of each task of the folder that cannot run here).

    Raises `TaskFileError` naming the file (and the line) and the problem."""
    if not path.is_dir():
        return read_tasks_file(path)
    try:
        return load_suite(path, note=note)
    except ConfigurationError as error:
        raise TaskFileError(error.message) from None


__all__ = ["BatchTask", "TaskFileError", "load_tasks"]  # what load_tasks returns and raises
