"""Merging a worker's branch into the workspace's branch, and the verify command (the quality
gate in a worktree, the final check on the merged result).

A merge that conflicts is aborted at once, so the workspace is back where it was before it,
and reported with the conflicting files: nothing is ever overwritten silently.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.swarm.worktrees import Repo

OUTPUT_TAIL_CHARS = 4_000
"""How much of a failing check's output is kept (its end, where test runners summarise)."""


@dataclass(frozen=True)
class MergeOutcome:
    merged: bool
    conflicts: list[str] = field(default_factory=list)
    """Files both sides changed in ways git could not combine (empty when merged)."""
    detail: str = ""
    """git's own words when the merge failed for another reason."""


async def merge_branch(repo: Repo, branch: str, message: str) -> MergeOutcome:
    """Merge `branch` into the checked-out branch of `repo` (a merge commit, even when a fast
    forward would do, so each worker's work stays one unit in the history)."""
    done = await repo.arun("merge", "--no-ff", "--no-edit", "-m", message, branch, check=False)
    if done.code == 0:
        return MergeOutcome(True)
    unmerged = await repo.arun("diff", "--name-only", "--diff-filter=U", check=False)
    conflicts = [line for line in unmerged.output.splitlines() if line.strip()]
    await repo.arun("merge", "--abort", check=False)
    return MergeOutcome(False, conflicts, done.output.strip())


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    exit_code: int | None
    """None when the command was stopped at its time limit."""
    output: str
    """The end of what it printed (stdout and stderr)."""

    def summary(self) -> str:
        """One line: how it ended and its last line of output."""
        if self.exit_code is None:
            how = "timed out"
        else:
            how = "passed" if self.passed else f"exited with status {self.exit_code}"
        lines = [line for line in self.output.splitlines() if line.strip()]
        return f"{how}: {lines[-1].strip()}" if lines else how


def _run_check(command: str, cwd: Path, timeout_s: float) -> CheckOutcome:
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return CheckOutcome(False, None, output[-OUTPUT_TAIL_CHARS:])
    return CheckOutcome(process.returncode == 0, process.returncode, output[-OUTPUT_TAIL_CHARS:])


async def run_check(command: str, cwd: Path, timeout_s: float) -> CheckOutcome:
    """Run `command` with bash in `cwd`; exit status 0 passes."""
    return await asyncio.to_thread(_run_check, command, cwd, timeout_s)
