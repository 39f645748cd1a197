"""Each task's own workspace: a fresh copy of its folder, or a clone of its repository at
`base_commit` — never the original — with its `setup` command run once."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from journeyman.batch.task_file import BatchTask, is_git_url
from journeyman.core.errors import AgentError
from journeyman.core.safe_git import safe_git_command, safe_git_env

SETUP_TIMEOUT_S = 1800.0
"""Longest a task's setup command may run."""
SETUP_DONE = ".setup-done"
"""Marker (beside the workspaces, not in them) that a workspace's setup already ran."""


class WorkspaceError(AgentError):
    """A task's workspace could not be prepared; the task fails without running."""


def workspace_path(task: BatchTask, under: Path, attempt: int = 1) -> Path:
    """Where `task`'s workspace for `attempt` lives (attempts after the first start afresh)."""
    return under / (task.id if attempt == 1 else f"{task.id}.attempt{attempt}")


def prepare_workspace(task: BatchTask, under: Path, attempt: int = 1) -> Path:
    """The task's workspace for `attempt`: made on first use, reused as it is afterwards (a
    resumed task continues on the files its session left)."""
    target = workspace_path(task, under, attempt)
    marker = under / ".state" / f"{target.name}{SETUP_DONE}"
    if target.is_dir() and (task.setup is None or marker.exists()):
        return target
    url = is_git_url(task.workspace)
    source = Path(task.workspace).expanduser()
    if not url and not source.is_dir():
        raise WorkspaceError(f"task {task.id}: its workspace {source} is not a folder")
    if target.exists():  # an earlier preparation was cut off: start it again
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    if url and task.base_commit:
        _clone_url(task.workspace, partial, task.base_commit, task.id)
    elif task.base_commit:
        _clone_at(source, partial, task.base_commit, task.id)
    else:
        try:
            shutil.copytree(source, partial, symlinks=True)
        except (OSError, shutil.Error) as error:
            raise WorkspaceError(f"task {task.id}: cannot copy {source}: {error}") from None
    partial.rename(target)  # whole or absent: a kill mid-copy never leaves half a workspace
    if task.setup:
        _setup(task, target)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    return target


def _clone_url(url: str, target: Path, commit: str, task_id: str) -> None:
    """A clone of the repository at `url`, checked out at `commit`."""
    steps = [
        safe_git_command("clone", "--quiet", "--no-checkout", "--", url, str(target)),
        safe_git_command("-C", str(target), "checkout", "--quiet", "--detach", commit),
    ]
    _run_steps(steps, task_id, f"{commit} of {url}")


def _clone_at(source: Path, target: Path, commit: str, task_id: str) -> None:
    """A clone sharing the repository's objects (the original is never written to)."""
    if not (source / ".git").exists() and not (source / "HEAD").is_file():
        raise WorkspaceError(
            f"task {task_id}: it has a base_commit, but its workspace {source} is not a git "
            "repository; give the repository's top folder, or drop base_commit"
        )
    steps = [
        safe_git_command("clone", "--quiet", "--shared", "--no-checkout", str(source), str(target)),
        safe_git_command("-C", str(target), "checkout", "--quiet", "--detach", commit),
    ]
    _run_steps(steps, task_id, f"{commit} of {source}")


def _run_steps(steps: list[list[str]], task_id: str, what: str) -> None:
    env = safe_git_env(os.environ)
    for name, step in zip(("git clone", "git checkout"), steps, strict=True):
        try:
            done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise WorkspaceError(f"task {task_id}: {name} failed: {error}") from None
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise WorkspaceError(f"task {task_id}: cannot check out {what}: {detail[0]}")


def _setup(task: BatchTask, workspace: Path) -> None:
    assert task.setup is not None
    try:
        done = subprocess.run(
            task.setup,
            shell=True,
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=SETUP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise WorkspaceError(
            f"task {task.id}: setup {task.setup!r} ran past {SETUP_TIMEOUT_S:g} s"
        ) from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise WorkspaceError(
            f"task {task.id}: setup {task.setup!r} exited {done.returncode}: "
            + (" | ".join(tail) or "no output")
        )


__all__ = ["WorkspaceError", "prepare_workspace", "workspace_path"]
