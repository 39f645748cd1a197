"""Merging a worker's branch into the workspace's branch, and the check (the quality gate in
a worktree, the final check on the merged result), run by the loop's one check runner inside
the run's sandbox: model-written code never runs on the host.

A merge that conflicts is aborted at once, so the workspace is back where it was before it,
and reported with the conflicting files: nothing is ever overwritten silently.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.context.test_infra import take_manifest
from journeyman.core.errors import ConfigurationError
from journeyman.loop.check_runner import (
    CHECK_CALL_PREFIX,
    CheckRunner,
    assess,
    explain,
    output_tail,
)
from journeyman.loop.fixed_check import FixedCheck
from journeyman.swarm.worktrees import Repo
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.sandbox import SandboxKind, open_sandbox
from journeyman.tools.shell import RunCommandTool


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
    """The end of what it printed (stdout and stderr), the agent's own secrets scrubbed."""
    problem: str | None = None
    """Why a run that exited 0 is still not a pass (no test ran, tests changed, ...)."""

    def summary(self) -> str:
        """One line: how it ended and its last line of output."""
        if self.exit_code is None:
            how = "timed out"
        elif self.problem is not None:
            how = self.problem
        else:
            how = "passed" if self.passed else f"exited with status {self.exit_code}"
        lines = [line for line in self.output.splitlines() if line.strip()]
        return f"{how}: {lines[-1].strip()}" if lines else how


@dataclass(frozen=True)
class SwarmCheck:
    """The swarm's check, fixed once from the repository before any worker ran, and how to
    run it: the same runner, sandbox, environment and judgement as a run's own check."""

    fixed: FixedCheck
    timeout_s: float
    sandbox: SandboxKind = SandboxKind.AUTO
    allow_network: bool = False
    allow_test_edits: bool = False

    @property
    def command(self) -> str:
        return self.fixed.command or ""


async def run_check(check: SwarmCheck, cwd: Path) -> CheckOutcome:
    """Run the swarm's check in `cwd` (a worktree, or the merged repository) inside the
    run's sandbox; it passes as a run's check passes (exit 0, a test ran, tests unchanged)."""
    try:
        box = open_sandbox(check.sandbox, cwd, allow_network=check.allow_network)
    except ConfigurationError as error:
        return CheckOutcome(False, None, error.message, "sandbox unavailable")
    runner = CheckRunner(cwd, ToolRegistry([RunCommandTool(sandbox=box, journal_changes=False)]))
    try:
        run = await runner.check(check.command, check.timeout_s, f"{CHECK_CALL_PREFIX}swarm")
    finally:
        await box.close()
    if not (run.cannot_run or run.timed_out):
        infra = await asyncio.to_thread(take_manifest, cwd)
        run = assess(run, check.fixed, infra, allow_test_edits=check.allow_test_edits)
    problem = None if run.problem in (None, "failed") else explain(run, check.fixed.tests_before)
    return CheckOutcome(run.passed, run.exit_code, output_tail(run.output), problem)
