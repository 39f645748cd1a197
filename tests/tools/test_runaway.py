"""Reliability scenario 5: commands that never stop on their own, under each sandbox.

Each must be stopped within its timeout + 5 s with no process left behind. The fork bomb runs
under a process limit of 64 as uid 65534 (the kernel does not hold root to RLIMIT_NPROC), so it
cannot hurt the machine; where that is impossible only the bounded fork storm runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.tools.context import ToolContext
from journeyman.tools.sandbox import (
    BubblewrapSandbox,
    LocalSandbox,
    ResourceLimits,
    Sandbox,
    bubblewrap,
)
from journeyman.tools.shell import RunCommandTool
from tests.support.sandbox_trials import Runaway, fork_bomb_command, run_runaway, runaway_cases

from .sandboxes import BWRAP_PROBLEM, CAN_SETPRIV, IS_ROOT

pytestmark = pytest.mark.slow

KINDS = [
    "local",
    pytest.param(
        "bubblewrap", marks=pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=str(BWRAP_PROBLEM))
    ),
]
CASES = {case.name: case for case in runaway_cases()}


@pytest.fixture
def open_workspace() -> Iterator[Path]:
    """A workspace any user may enter (the fork bomb runs as uid 65534)."""
    root = Path(tempfile.mkdtemp(prefix="jm-runaway-"))
    root.chmod(0o777)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
    return found


def make_sandbox(kind: str, workspace: Path, limits: ResourceLimits | None = None) -> Sandbox:
    limits = limits or ResourceLimits()
    if kind == "local":
        return LocalSandbox(workspace, limits)
    sandbox = BubblewrapSandbox(workspace, limits)
    sandbox.check()
    return sandbox


async def check(sandbox: Sandbox, workspace: Path, case: Runaway) -> None:
    tool = RunCommandTool(sandbox=sandbox, kill_grace=1.0)
    outcome = await run_runaway(tool, ToolContext(workspace=workspace), case)
    await sandbox.close()
    assert outcome.timed_out
    assert outcome.leftovers == []
    assert outcome.seconds <= case.timeout + 5, outcome
    if case.name == "200 MB of output":
        assert outcome.output_bytes == 200_000_000  # counted, while only head and tail are kept
        assert outcome.kept_chars < 25_000


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(CASES))
async def test_runaway_is_stopped(kind: str, name: str, open_workspace: Path) -> None:
    case = CASES[name]
    await check(make_sandbox(kind, open_workspace), open_workspace, case)


@pytest.mark.skipif(IS_ROOT and not CAN_SETPRIV, reason="root without setpriv: no uid to limit")
@pytest.mark.parametrize("kind", KINDS)
async def test_fork_bomb_under_a_process_limit(
    kind: str, open_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bwrap runs as nobody below, which cannot reach root's home folder to mount its toolchains
    # or the Python installed there
    monkeypatch.setattr(bubblewrap, "HOME_TOOLCHAINS", ())
    monkeypatch.setattr(bubblewrap, "own_python", list)
    monkeypatch.setattr(bubblewrap, "python_path", list)
    # The limit counts every process of uid 65534, zombies of an earlier bomb included.
    for _ in range(250):
        if not processes_of(65534):
            break
        await asyncio.sleep(0.02)
    limits = ResourceLimits(processes=64)
    if kind == "bubblewrap" and IS_ROOT:
        # bwrap itself must run as the limited user, so that the limit applies inside.
        wrapper = open_workspace / ".bwrap-as-nobody"
        wrapper.write_text(
            '#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups bwrap "$@"\n'
        )
        wrapper.chmod(0o755)
        sandbox: Sandbox = BubblewrapSandbox(open_workspace, limits, bwrap=str(wrapper))
        sandbox.check()  # type: ignore[attr-defined]
        command = fork_bomb_command(64, as_nobody=False)
    else:
        sandbox = make_sandbox(kind, open_workspace, limits)
        command = fork_bomb_command(64, as_nobody=IS_ROOT)
    if not IS_ROOT:
        pytest.skip("as a normal user the limit counts all the user's processes; see bench")
    await check(sandbox, open_workspace, Runaway("fork bomb", command, 2.0))
    assert os.geteuid() == 0
