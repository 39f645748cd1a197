"""The bundled micro-suite: small Python bug-fix tasks graded by hidden tests.

Each task is a folder under `micro/` (package data) holding:

- `task.json` — `problem` (what the agent is told), `fail_to_pass`, `pass_to_pass` (pytest
  node ids) and `test_cmd`;
- `repo/` — the project the agent works on (copied; never changed in place);
- `hidden/` — test files laid over the workspace after the agent stops, replacing any file of
  the same name (including the visible tests and `conftest.py`, so edits to them do not count).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from journeyman.batch.grading import GradingSpec
from journeyman.batch.suites.errors import SuiteError, suite_image
from journeyman.batch.task_file import TASK_ID

MICRO_NAME = "micro"


@dataclass(frozen=True)
class MicroTask:
    """One task of the micro-suite, read from its folder."""

    name: str
    problem: str
    repo: Path
    grading: GradingSpec
    image: str | None = None
    """Container image its commands and check run in (`image` in task.json)."""


def micro_root() -> Path:
    """The folder holding the bundled micro-suite's tasks."""
    return Path(str(resources.files("journeyman.batch.suites").joinpath(MICRO_NAME)))


def micro_task_dirs(root: Path | None = None) -> list[Path]:
    """Every task folder of the micro-suite, sorted by name."""
    base = root or micro_root()
    return sorted(path for path in base.iterdir() if (path / "task.json").is_file())


def read_micro_task(folder: Path) -> MicroTask:
    """The task in `folder`, or a `SuiteError` saying what is missing."""
    meta_path = folder / "task.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SuiteError(f"{meta_path}: cannot read the task description ({error})") from error
    if not isinstance(meta, dict):
        raise SuiteError(f"{meta_path}: expected a JSON object")
    for key in ("problem", "fail_to_pass", "test_cmd"):
        if key not in meta:
            raise SuiteError(f"{meta_path}: missing field {key!r}")
    if not TASK_ID.match(folder.name):
        raise SuiteError(f"{folder}: the folder name cannot name a task (letters, digits, ._:@+-)")
    for sub in ("repo", "hidden"):
        if not (folder / sub).is_dir() or (folder / sub).is_symlink():
            raise SuiteError(f"{folder}: missing the {sub}/ folder")
        for path in (folder / sub).rglob("*"):
            if path.is_symlink():
                raise SuiteError(
                    f"{folder}: {path.relative_to(folder)} is a symlink; a task holds plain files"
                )
    grading = GradingSpec(
        kind="micro",
        test_cmd=str(meta["test_cmd"]),
        hidden_tests_dir=str((folder / "hidden").resolve()),
        fail_to_pass=[str(test) for test in meta["fail_to_pass"]],
        pass_to_pass=[str(test) for test in meta.get("pass_to_pass", [])],
    )
    return MicroTask(
        name=folder.name,
        problem=str(meta["problem"]),
        repo=(folder / "repo").resolve(),
        grading=grading,
        image=suite_image(meta.get("image"), str(meta_path)),
    )
