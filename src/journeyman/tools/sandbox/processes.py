"""Finding and stopping every process a command started, wherever it went.

Every process started for a command carries an environment variable naming the sandbox and
the command (`MARKER_VAR`), so that processes which left the command's process group
(`setsid`, double-forking daemons) are still found and stopped. A program that also wipes its
own environment would escape that net under `local`, so the agent makes itself the "child
subreaper" of its commands (Linux `prctl`): an orphan of a command is handed to the agent
instead of to init, and `children` lists it; under bubblewrap the pid namespace catches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

MARKER_VAR = "JOURNEYMAN_SANDBOX_RUN"
"""Environment variable set for every command: `<sandbox id>:<command id>`."""


def marked_pids(marker: str, *, prefix: bool = False) -> list[int]:
    """Running processes whose environment holds `MARKER_VAR=<marker>` (or starts with it).

    Reads /proc/<pid>/environ (the environment the process was started with); processes of
    other users, and zombies, are skipped. Empty where /proc does not exist.
    """
    needle = f"\0{MARKER_VAR}={marker}".encode()
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    found = []
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = b"\0" + (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        at = environ.find(needle)
        if at < 0:
            continue
        end = at + len(needle)
        if not prefix and end < len(environ) and environ[end] != 0:
            continue  # a longer marker that merely starts with this one
        if _state(stat) not in ("Z", "X"):
            found.append(int(entry.name))
    return found


PR_SET_CHILD_SUBREAPER = 36


@functools.cache
def become_subreaper() -> bool:
    """Make this process the parent of every orphan of its descendants (once per process);
    False where the kernel or the platform does not offer it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children() -> set[int]:
    """The processes whose parent is this one (`/proc/self/task/*/children`); empty where the
    kernel does not list them."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in Path("/proc/self/task").iterdir():
            with contextlib.suppress(OSError):
                found.update(int(pid) for pid in (task / "children").read_text().split())
    return found


def orphans_of(ident: str, pids: Iterable[int]) -> set[int]:
    """Those of `pids` (children of this process that appeared while one of sandbox `ident`'s
    commands ran) that can be orphans of its commands, not processes this program started
    itself at the same time: a child still in this process's own session (git, run by the
    host, never leaves it) or carrying another sandbox's marker (a concurrent command of
    another agent in this process) is not one."""
    own_session = os.getsid(0)
    found = set()
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            environ = b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue  # gone already
        session = int(stat[stat.rindex(")") + 2 :].split()[3])
        marker = environ.find(f"\0{MARKER_VAR}=".encode())
        if session == own_session:
            continue
        if marker >= 0 and not environ.startswith(
            f"{ident}:".encode(), marker + len(MARKER_VAR) + 2
        ):
            continue
        found.add(pid)
    return found


def stop_children(pids: Iterable[int]) -> None:
    """SIGKILL each of `pids` that is still a child of this process (a pid the system gave to
    another process since is left alone), and reap it."""
    for pid in set(pids) & children():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def group_alive(group: int) -> bool:
    """Whether any process of the group is still running (zombies awaiting a reaper are not)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command name: state, ppid, pgrp, ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(group) and fields[0] not in ("Z", "X"):
            return True
    return False


def _state(stat: str) -> str:
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3]


def _signal_all(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _signal_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


async def stop_processes(
    group: int | None, marker: str, grace: float, *, prefix: bool = False
) -> None:
    """SIGTERM a process group and every process carrying `marker`; SIGKILL them after `grace`.

    With `prefix`, every process whose marker starts with `marker` counts.

    Returns once none is left running (or, should the kernel be slow to reap, after a few
    more seconds of trying).
    """

    def alive() -> list[int]:
        return marked_pids(marker, prefix=prefix)

    def group_up() -> bool:
        return group is not None and group_alive(group)

    if group is not None:
        _signal_group(group, signal.SIGTERM)
    _signal_all(alive(), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not group_up() and not alive():
            return
        await asyncio.sleep(0.02)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if group is not None:
            _signal_group(group, signal.SIGKILL)
        left = alive()
        if not left and not group_up():
            return
        _signal_all(left, signal.SIGKILL)  # again each round: a fork storm keeps making more
        await asyncio.sleep(0.02)
