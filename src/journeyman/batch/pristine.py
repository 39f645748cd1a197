"""Grading in a pristine tree: the agent's changes applied to a fresh copy of the task.

When the agent stops, its workspace is never graded in place. Instead:

1. a fresh copy of the task is made among the workspaces (`workspaces.grading_path`), exactly
   as the workspace was made (`workspaces.fresh_copy`: its folder copied, or its repository
   checked out at `base_commit`, then `setup`);
2. the agent's changes are what its workspace holds that the fresh copy does not (a git tree
   diff in a git folder of ours: new files, deletions, binary files and symlinks included;
   the workspace's own `.git` is never read);
3. `tampering.sort_changes` leaves out the changes to test infrastructure and flags them; the
   rest is applied to the fresh copy with `git apply` (which never writes through a symlink);
4. for a SWE-bench task, that applied change is the `model_patch` of `preds.json`;
5. the hidden tests go in, and the test command runs through the agent's own check runner, in
   a sandbox of the same kind as the agent's commands, confined to the grading folder;
6. the grading folder is removed.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from journeyman.batch import grading
from journeyman.batch.tampering import FILE_MODES, SETTINGS_NAMES, Change, Flag, sort_changes
from journeyman.batch.task_file import BatchTask
from journeyman.batch.workspaces import WorkspaceError, fresh_copy, grading_path
from journeyman.core.safe_git import safe_git_command, safe_git_env
from journeyman.tools.registry import ToolRegistry

GIT_TIMEOUT_S = 600.0
"""Seconds one git step over a task's tree may take."""
GRADING_OUTPUT_BYTES = 8 * 1024 * 1024
"""Bytes of the hidden tests' output kept from its end (pytest's summary line per test)."""
NULL_BLOB = "0" * 40


@dataclass
class GradedTree:
    """A fresh copy of the task with the agent's changes applied, test infrastructure left out."""

    root: Path
    flags: list[Flag] = field(default_factory=list)
    model_patch: str | None = None
    """With a `base_commit`: the change as applied (what `preds.json` carries)."""


async def grade_pristine(task: BatchTask, workspace: Path, registry: ToolRegistry) -> Any:
    """The eval's grade of what the agent changed in `workspace` (see the module docstring):
    a `grading.GradeResult`, with the flagged changes as its `tampering`."""
    from journeyman.loop.check_runner import CHECK_CALL_PREFIX, CheckRunner, failure_output

    spec = grading.GradingSpec.model_validate(task.grading)
    target = grading_path(workspace.resolve())
    try:
        try:
            tree = await asyncio.to_thread(build_graded_tree, task, spec, workspace, target)
        except (grading.GradingError, WorkspaceError, OSError) as error:
            return grading.unresolved(spec, f"not graded: {_message(error)}")
        tampering = [flag.to_dict() for flag in tree.flags]
        problem = await asyncio.to_thread(grading.install_hidden_tests, spec, tree.root)
        if problem is not None:
            return dataclasses.replace(grading.unresolved(spec, problem), tampering=tampering)
        confined = confined_to(tree.root, registry)
        runner = CheckRunner(tree.root, confined, output_bytes=GRADING_OUTPUT_BYTES)
        command = grading.GRADING_ENVIRONMENT + grading.test_command(spec)
        run = await runner.check(command, spec.timeout_s, f"{CHECK_CALL_PREFIX}grade")
        output = failure_output(run.output)
        result = grading.judge(spec, output, run.exit_code, run.timed_out, tree.model_patch)
        return dataclasses.replace(result, tampering=tampering)
    finally:
        await asyncio.to_thread(discard, target)


def confined_to(root: Path, registry: ToolRegistry) -> ToolRegistry:
    """A registry holding a copy of `registry`'s command tool whose sandbox (same kind, limits,
    environment and hidden folders) has `root` as its workspace: the grading folder is the
    only place the tests may write."""
    from journeyman.tools.shell import RunCommandTool

    tools = (registry.get(name) for name in registry.names)
    found = next((tool for tool in tools if isinstance(tool, RunCommandTool)), None)
    command = copy.copy(found) if found is not None else RunCommandTool()
    command.journal_changes = False
    if command.sandbox is not None and dataclasses.is_dataclass(command.sandbox):
        sandbox: Any = command.sandbox
        command.sandbox = dataclasses.replace(sandbox, workspace=root)
    return ToolRegistry([command])


def discard(target: Path) -> None:
    """Remove a grading folder and its git folder (what a kill left too)."""
    for path in (target, _git_dir_beside(target)):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)


def build_graded_tree(
    task: BatchTask, spec: grading.GradingSpec, workspace: Path, target: Path
) -> GradedTree:
    """The fresh copy at `target` with the agent's changes in `workspace` applied, test
    infrastructure left out; `GradingError` when it cannot be made."""
    workspace = workspace.resolve()
    if not workspace.is_dir():
        raise grading.GradingError(f"workspace {workspace} does not exist")
    discard(target)
    fresh_copy(task, target)
    git = _Git(target / ".git" if task.base_commit else _git_dir_beside(target), target)
    if not task.base_commit:
        git.raw("init", "--quiet")
    start = git.tree_of(target, task.base_commit)
    agent = git.tree_of(workspace, start)
    changes = git.changes(start, agent)
    settings = [(path, git.blob(blob)) for path, blob in git.settings_files(start)]
    hidden = grading.hidden_test_paths(spec)
    chosen = sort_changes(changes, git.blob, hidden, settings)
    if chosen.kept:
        patch = git.run("diff", "--binary", "--no-renames", start, agent, *_literal(chosen.kept))
        git.apply(patch)
    for path, content in chosen.rewritten.items():
        _write_inside(target, path, content)
    model_patch = None
    if task.base_commit and spec.base_commit:
        model_patch = git.run("diff", "--binary", "--no-renames", start, git.tree_of(target, start))
    return GradedTree(target, chosen.flags, model_patch)


def _git_dir_beside(target: Path) -> Path:
    return target.with_name(target.name + ".git")


def _literal(paths: list[str]) -> list[str]:
    return ["--", *(f":(literal){path}" for path in paths)]


def _write_inside(root: Path, relative: str, content: bytes) -> None:
    """Write `content` at `relative` under `root`, never through a symlinked folder."""
    path = grading.safe_relative(relative)
    grading.refuse_symlinked_parents(root, path)
    target = root / path
    if target.is_symlink():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)


def _message(error: Exception) -> str:
    message = getattr(error, "message", None)
    return message if isinstance(message, str) else str(error)


class _Git:
    """git in a folder of ours (`git_dir`), pointed at whichever tree is read."""

    def __init__(self, git_dir: Path, home: Path) -> None:
        self.git_dir = git_dir
        self.home = home
        self._blobs: dict[str, bytes] = {}

    def run(self, *args: str) -> str:
        return self.raw(*args).decode("utf-8", errors="surrogateescape")

    def raw(
        self, *args: str, tree: Path | None = None, stdin: bytes | None = None, index: str = ""
    ) -> bytes:
        work_tree = tree or self.home
        env = {
            **safe_git_env(os.environ),
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(work_tree),
            "GIT_CEILING_DIRECTORIES": str(work_tree.parent),
        }
        if index:
            env["GIT_INDEX_FILE"] = index
        try:
            done = subprocess.run(
                safe_git_command(*args),
                cwd=work_tree,
                env=env,
                input=stdin,
                capture_output=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise grading.GradingError(f"git {args[0]} failed: {error}") from None
        if done.returncode != 0:
            detail = done.stderr.decode("utf-8", errors="replace").strip().splitlines()[:2]
            raise grading.GradingError(f"git {args[0]} failed: {' '.join(detail) or 'no output'}")
        return done.stdout

    def tree_of(self, tree: Path, start: str | None) -> str:
        """The id of a git tree of every file under `tree` (ignored files and run caches left
        out), building on `start` (a tree or commit) so that what it tracks is seen changed."""
        with tempfile.TemporaryDirectory() as scratch:
            index = str(Path(scratch) / "index")
            if start:
                self.raw("read-tree", start, tree=tree, index=index)
            self.raw("add", "--all", "--", ".", *grading.NOT_CHANGES, tree=tree, index=index)
            return self.raw("write-tree", tree=tree, index=index).decode().strip()

    def changes(self, start: str, end: str) -> list[Change]:
        """Every path that differs between two trees, renames as a deletion and an addition."""
        out = self.raw("diff-tree", "-r", "-z", "--raw", "--no-renames", start, end)
        fields = out.decode("utf-8", errors="surrogateescape").split("\0")
        changes: list[Change] = []
        for head, path in zip(fields[0::2], fields[1::2], strict=False):
            if not head.startswith(":"):
                continue
            old_mode, new_mode, old_blob, new_blob, status = head[1:].split()
            changes.append(Change(path, status, old_mode, new_mode, old_blob, new_blob))
        return changes

    def settings_files(self, tree: str) -> list[tuple[str, str]]:
        """(path, blob) of each settings file or conftest.py in `tree`."""
        out = self.raw("ls-tree", "-r", "-z", "--full-tree", tree)
        found = []
        for entry in out.decode("utf-8", errors="surrogateescape").split("\0"):
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            if (
                len(parts) == 3
                and parts[0] in FILE_MODES
                and path.rsplit("/", 1)[-1] in (SETTINGS_NAMES)
            ):
                found.append((path, parts[2]))
        return found

    def blob(self, blob_id: str) -> bytes:
        if not blob_id or blob_id == NULL_BLOB:
            return b""
        if blob_id not in self._blobs:
            self._blobs[blob_id] = self.raw("cat-file", "blob", blob_id)
        return self._blobs[blob_id]

    def apply(self, patch: str) -> None:
        """Apply `patch` to the home tree; `GradingError` saying why when it does not apply."""
        try:
            self.raw(
                "apply",
                "--binary",
                "--whitespace=nowarn",
                "-",
                stdin=patch.encode("utf-8", errors="surrogateescape"),
            )
        except grading.GradingError as error:
            raise grading.GradingError(
                f"the agent's changes do not apply to a fresh copy of the task: {error}"
            ) from None


__all__ = ["GradedTree", "build_graded_tree", "confined_to", "discard", "grade_pristine"]
