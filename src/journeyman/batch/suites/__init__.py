"""Eval suites: turn a suite (a name, a file or a folder) into batch tasks with grading specs.

- `micro` — the bundled micro-suite (`micro.py`, tasks under `micro/`);
- a JSONL file whose records have `instance_id` — SWE-bench format (`swebench.py`);
- a JSONL file of plain batch tasks, every one with its `grading` field (used as is);
- a folder of exercise folders, or one exercise folder (`exercises.py`);
- a folder of micro-format task folders (`task.json` + `repo/` + `hidden/`);
- a Harbor task folder, or a folder of them (`harbor.py`: `instruction.md` + `task.toml`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import platformdirs

from journeyman.batch.suites.errors import SuiteError
from journeyman.batch.suites.exercises import load_exercises
from journeyman.batch.suites.harbor import load_harbor, looks_like_harbor
from journeyman.batch.suites.micro import (
    MICRO_NAME,
    micro_root,
    micro_task_dirs,
    read_micro_task,
)
from journeyman.batch.suites.swebench import TestCommands, load_swebench, looks_like_swebench
from journeyman.batch.task_file import BatchTask, TaskFileError, read_tasks_file

__all__ = ["SuiteError", "load_suite", "suite_kind", "suite_source"]


def load_suite(
    path_or_name: str | Path,
    *,
    staging: Path | None = None,
    test_cmds: TestCommands | None = None,
    note: Callable[[str], None] | None = None,
) -> list[BatchTask]:
    """The tasks of a suite, each with its grading spec; `SuiteError` says what is wrong.

    `staging` is where exercise folders are split into the agent's copy and the hidden tests
    (default: a folder in the user's cache named after the suite's path). `test_cmds` is a
    SWE-bench test command map (repo -> command, or repo -> version -> command). `note` is told
    of every task the suite holds that cannot run here (a Harbor task needing a container
    engine), one line each."""
    kind = suite_kind(path_or_name)
    if kind == "micro":
        return micro_tasks(None)
    path = Path(path_or_name).expanduser()
    if kind == "micro-folder":
        return micro_tasks(path)
    if kind == "harbor":
        return load_harbor(path, staging or _default_staging(path, "harbor"), note)
    if kind == "exercises":
        return load_exercises(path, staging or _default_staging(path))
    if kind == "swebench":
        return load_swebench(path, test_cmds)
    try:
        tasks = read_tasks_file(path)
    except TaskFileError as error:
        raise SuiteError(error.message) from None
    ungraded = [task.id for task in tasks if task.grading is None]
    if ungraded:
        shown = ", ".join(ungraded[:5]) + (
            f" and {len(ungraded) - 5} more" if len(ungraded) > 5 else ""
        )
        raise SuiteError(
            f"{path} is a batch tasks file, not an eval suite: {len(ungraded)} of its "
            f"{len(tasks)} tasks ({shown}) say nothing of how to grade them. An eval suite is "
            "`micro`, a SWE-bench JSONL file, a folder of exercise folders, or a tasks file "
            "whose every task has a `grading` object (at least `test_cmd`, the hidden tests' "
            f"command; see docs/eval.md). To run the tasks without grading: journeyman batch "
            f"{path}"
        )
    return tasks


def suite_kind(path_or_name: str | Path) -> str:
    """ "micro", "micro-folder", "harbor", "exercises", "swebench" or "tasks" (a plain batch
    JSONL)."""
    path = Path(path_or_name).expanduser()
    if str(path_or_name) == MICRO_NAME and not path.exists():
        return "micro"
    if not path.exists():
        raise SuiteError(
            f"suite {str(path_or_name)!r} does not exist: give `micro`, a SWE-bench JSONL file, "
            "a folder of exercises or Harbor tasks"
        )
    if path.is_dir():
        if looks_like_harbor(path):
            return "harbor"
        if any((child / "task.json").is_file() for child in path.iterdir() if child.is_dir()):
            return "micro-folder"
        return "exercises"
    first = _first_record(path)
    return "swebench" if looks_like_swebench(first) else "tasks"


def suite_source(path_or_name: str | Path) -> Path:
    """Where the suite's own files lie (the bundled micro-suite's folder for `micro`): its
    tasks' sandboxes hide it, with the hidden tests and test patches it holds."""
    if str(path_or_name) == MICRO_NAME and not Path(path_or_name).exists():
        return micro_root()
    return Path(path_or_name).expanduser().resolve()


def micro_tasks(root: Path | None) -> list[BatchTask]:
    """The micro-suite's tasks (the bundled one, or a folder in the same format)."""
    folders = micro_task_dirs(root)
    if not folders:
        raise SuiteError(f"{root} holds no task folder (task.json, repo/, hidden/)")
    tasks = []
    for folder in folders:
        task = read_micro_task(folder)
        tasks.append(
            BatchTask(
                id=task.name,
                task=task.problem,
                workspace=str(task.repo),
                grading=task.grading,
                image=task.image,
            )
        )
    return tasks


def _first_record(path: Path) -> dict[str, object]:
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip() and not line.lstrip().startswith("#"):
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as error:
                        raise SuiteError(
                            f"{path}:{number}: not valid JSON ({error.msg}, column {error.colno})"
                        ) from None
                    if not isinstance(record, dict):
                        raise SuiteError(f"{path}:{number}: expected a JSON object per line")
                    return record
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"cannot read suite file {path}: {error}") from None
    raise SuiteError(f"suite file {path} is empty")


def _default_staging(path: Path, kind: str = "exercises") -> Path:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    return Path(platformdirs.user_cache_dir("journeyman")) / kind / digest
