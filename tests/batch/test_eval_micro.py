"""The bundled micro-suite: every task's hidden tests fail on its stub and pass on a known fix."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from journeyman.batch.grading import grade
from journeyman.batch.pristine import grade_pristine
from journeyman.batch.suites.micro import micro_task_dirs, read_micro_task
from journeyman.batch.task_file import BatchTask
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.sandbox.bubblewrap import BubblewrapSandbox
from journeyman.tools.shell import RunCommandTool

FIXES = Path(__file__).parent / "micro_fixes"
TASK_DIRS = micro_task_dirs()


def test_the_suite_has_at_least_twelve_tasks_each_with_a_fix() -> None:
    names = [folder.name for folder in TASK_DIRS]
    assert len(names) >= 12
    assert sorted(path.name for path in FIXES.iterdir()) == names


@pytest.mark.parametrize("folder", TASK_DIRS, ids=[folder.name for folder in TASK_DIRS])
def test_hidden_tests_fail_on_the_stub_and_pass_on_the_fix(folder: Path, tmp_path: Path) -> None:
    task = read_micro_task(folder)
    assert task.grading.fail_to_pass and task.grading.pass_to_pass

    stub = tmp_path / "stub"
    shutil.copytree(task.repo, stub)
    before = grade(task.grading, stub)
    assert not before.resolved
    assert not any(before.fail_to_pass.values()), before.output_tail
    assert all(before.pass_to_pass.values()), before.output_tail

    fixed = tmp_path / "fixed"
    shutil.copytree(task.repo, fixed)
    shutil.copytree(FIXES / folder.name, fixed, dirs_exist_ok=True)
    after = grade(task.grading, fixed)
    assert after.resolved, after.output_tail


@pytest.mark.parametrize("folder", TASK_DIRS, ids=[folder.name for folder in TASK_DIRS])
def test_hidden_tests_guard_the_visible_ones(folder: Path) -> None:
    task = read_micro_task(folder)
    hidden = Path(task.grading.hidden_tests_dir or "")
    visible_tests = {p.relative_to(task.repo) for p in (task.repo / "tests").rglob("*.py")}
    hidden_files = {p.relative_to(hidden) for p in hidden.rglob("*.py")}
    assert visible_tests <= hidden_files
    assert Path("conftest.py") in hidden_files and Path("tests/conftest.py") in hidden_files


@pytest.mark.slow
@pytest.mark.parametrize("folder", TASK_DIRS, ids=[folder.name for folder in TASK_DIRS])
def test_the_fix_resolves_in_a_fresh_copy_unflagged(folder: Path, tmp_path: Path) -> None:
    task = read_micro_task(folder)
    batch_task = BatchTask(
        id=task.name, task=task.problem, workspace=str(task.repo), grading=task.grading
    )
    workspace = tmp_path / "workspaces" / task.name
    shutil.copytree(task.repo, workspace)
    shutil.copytree(FIXES / folder.name, workspace, dirs_exist_ok=True)
    registry = ToolRegistry([RunCommandTool(sandbox=BubblewrapSandbox(workspace))])
    result = asyncio.run(grade_pristine(batch_task, workspace, registry))
    assert result.resolved and result.tampering == [], (result.error, result.output_tail)
