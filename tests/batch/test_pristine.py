"""The graded tree: a fresh copy of the task with the agent's changes applied, test
infrastructure left out; real copies, real git, real pytest."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from journeyman.batch.grading import GradingSpec
from journeyman.batch.pristine import build_graded_tree, grade_pristine
from journeyman.batch.task_file import BatchTask
from journeyman.batch.workspaces import fresh_copy, grading_path
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.sandbox.bubblewrap import BubblewrapSandbox
from journeyman.tools.shell import RunCommandTool
from tests.support.cli import snapshot
from tests.support.git import git

PYPROJECT = (
    '[project]\nname = "calc"\nversion = "1.0"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
)
RIG = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)


def _source(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "gone.py").write_text("x = 1\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tests" / "test_add.py").write_text("def test_visible():\n    pass\n")
    return root


def _hidden(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_add.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    return root


def _task(tmp_path: Path, **fields: object) -> BatchTask:
    spec = GradingSpec(
        test_cmd="{python} -m pytest -q -p no:randomly tests",
        hidden_tests_dir=str(_hidden(tmp_path / "hidden")),
        fail_to_pass=["tests/test_add.py::test_add"],
        timeout_s=120,
        base_commit=fields.get("base_commit"),
    )
    source = fields.pop("source", None) or _source(tmp_path / "source")
    return BatchTask(id="calc", task="fix add", workspace=str(source), grading=spec, **fields)  # type: ignore[arg-type]


def _workspace(task: BatchTask, tmp_path: Path) -> Path:
    workspace = tmp_path / "out" / "workspaces" / task.id
    fresh_copy(task, workspace)
    return workspace


def _rig(workspace: Path) -> None:
    (workspace / "pytest.ini").write_text("[pytest]\naddopts = -p passall\n")
    (workspace / "passall.py").write_text(RIG)


def test_the_agents_changes_go_to_a_fresh_copy_without_its_test_infrastructure(
    tmp_path: Path,
) -> None:
    task = _task(tmp_path)
    workspace = _workspace(task, tmp_path)
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (workspace / "gone.py").unlink()
    (workspace / "blob.bin").write_bytes(bytes(range(256)) * 8)
    (workspace / "calc_link.py").symlink_to("calc.py")
    (workspace / "passwd").symlink_to("/etc/passwd")
    (workspace / "tests" / "test_add.py").write_text("def test_add():\n    pass\n")
    (workspace / "tests" / "conftest.py").write_text(RIG)
    (workspace / "pyproject.toml").write_text(
        PYPROJECT.replace('"1.0"', '"1.1"').replace('"-q"', '"-q -p passall"')
    )
    _rig(workspace)
    left = snapshot(workspace)

    target = grading_path(workspace)
    tree = build_graded_tree(task, task.grading, workspace, target)  # type: ignore[arg-type]
    assert tree.root == target and target.parent == tmp_path / "out" / "workspaces" / ".grading"
    assert (target / "calc.py").read_text().endswith("return a + b\n")
    assert not (target / "gone.py").exists()
    assert (target / "blob.bin").read_bytes() == bytes(range(256)) * 8
    assert os.readlink(target / "calc_link.py") == "calc.py"
    for left_out in ("passwd", "pytest.ini", "passall.py", "tests/conftest.py"):
        assert not os.path.lexists(target / left_out), left_out
    assert (target / "tests" / "test_add.py").read_text() == "def test_visible():\n    pass\n"
    graded = (target / "pyproject.toml").read_text()
    assert 'version = "1.1"' in graded and 'addopts = "-q"' in graded and "passall" not in graded
    flags = {flag.path: flag.why for flag in tree.flags}
    assert set(flags) == {
        "passwd",
        "pytest.ini",
        "passall.py",
        "tests/conftest.py",
        "tests/test_add.py",
        "pyproject.toml",
    }
    assert "symlink pointing out of the task (/etc/passwd)" in flags["passwd"]
    assert tree.model_patch is None  # no base_commit: nothing for preds.json
    assert snapshot(workspace) == left  # the agent's workspace is never touched


def test_a_repository_at_its_base_commit_gets_the_patch_as_graded(tmp_path: Path) -> None:
    repo = _source(tmp_path / "repo")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "calc.py").write_text("later = True\n")
    git(repo, "commit", "-qam", "a later commit the task does not start from")
    task = _task(tmp_path, source=repo, base_commit=base)
    workspace = _workspace(task, tmp_path)
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (workspace / "conftest.py").write_text(RIG)
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "the agent commits its work")
    (workspace / "notes.txt").write_text("uncommitted work counts too\n")

    tree = build_graded_tree(task, task.grading, workspace, grading_path(workspace))  # type: ignore[arg-type]
    assert tree.model_patch is not None
    assert "+    return a + b" in tree.model_patch and "notes.txt" in tree.model_patch
    assert "conftest.py" not in tree.model_patch and "later = True" not in tree.model_patch
    assert [flag.path for flag in tree.flags] == ["conftest.py"]
    assert git(repo, "status", "--porcelain") == ""


def _registry(workspace: Path) -> ToolRegistry:
    sandbox = BubblewrapSandbox(workspace)
    return ToolRegistry([RunCommandTool(sandbox=sandbox)])


def test_grading_runs_in_the_agents_sandbox_confined_to_the_grading_folder(
    tmp_path: Path,
) -> None:
    if shutil.which("bwrap") is None:
        raise AssertionError("bubblewrap is installed on the machines these tests run on")
    task = _task(tmp_path)
    workspace = _workspace(task, tmp_path)
    (workspace / "calc.py").write_text(
        "from pathlib import Path\n\n"
        f"for place in ('../../calc/escaped', '{tmp_path}/escaped'):\n"
        "    try:\n        Path(place).write_text('x')\n    except OSError:\n        pass\n\n"
        "def add(a, b):\n    return a + b\n"
    )
    honest = asyncio.run(grade_pristine(task, workspace, _registry(workspace)))
    assert honest.resolved and honest.tampering == [], honest.output_tail
    # the agent's workspace and the rest of the host are read-only there
    assert not (workspace / "escaped").exists() and not (tmp_path / "escaped").exists()
    assert not grading_path(workspace).exists()  # removed once graded

    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    _rig(workspace)
    rigged = asyncio.run(grade_pristine(task, workspace, _registry(workspace)))
    assert not rigged.resolved
    assert rigged.fail_to_pass == {"tests/test_add.py::test_add": False}
    assert {flag["path"] for flag in rigged.tampering} == {"pytest.ini", "passall.py"}


def test_special_files_the_agent_left_are_not_carried_over(tmp_path: Path) -> None:
    task = _task(tmp_path)
    workspace = _workspace(task, tmp_path)
    os.mkfifo(workspace / "pipe")
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    result = asyncio.run(grade_pristine(task, workspace, _registry(workspace)))
    assert result.resolved and result.error is None, (result.error, result.output_tail)


def test_a_task_whose_fresh_copy_cannot_be_made_is_not_resolved_and_says_why(
    tmp_path: Path,
) -> None:
    task = _task(tmp_path, setup="exit 3")
    workspace = tmp_path / "out" / "workspaces" / task.id
    shutil.copytree(task.workspace, workspace)
    result = asyncio.run(grade_pristine(task, workspace, _registry(workspace)))
    assert not result.resolved
    assert result.error is not None and result.error.startswith("not graded: task calc: setup")
