"""Waiting on events, not on the clock: a test that needs something to have happened polls for
it until a generous deadline, so a busy machine makes it slower, never red.

`patience(seconds)` is a time budget scaled for the machine: `TESTS_TIME_SCALE` in the
environment multiplies every budget (e.g. 3 on a machine known to be very loaded); the default
budgets are already several times what a quiet machine needs.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# A deadline for things that take well under a second on a quiet machine.
DEFAULT_WAIT_S = 60.0


def patience(seconds: float = DEFAULT_WAIT_S) -> float:
    """`seconds` scaled by TESTS_TIME_SCALE (at least 1)."""
    try:
        scale = float(os.environ.get("TESTS_TIME_SCALE", "1"))
    except ValueError:
        scale = 1.0
    return seconds * max(scale, 1.0)


def wait_until(
    condition: Callable[[], T],
    timeout: float = DEFAULT_WAIT_S,
    interval: float = 0.02,
    what: str = "the condition",
) -> T:
    """Poll `condition` until it returns something truthy and return that; AssertionError,
    naming `what`, once `patience(timeout)` has passed."""
    deadline = time.monotonic() + patience(timeout)
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {patience(timeout):.0f} s")
        time.sleep(interval)


async def wait_until_async(
    condition: Callable[[], T],
    timeout: float = DEFAULT_WAIT_S,
    interval: float = 0.02,
    what: str = "the condition",
) -> T:
    """`wait_until` for a test running on an event loop (the loop goes on meanwhile)."""
    deadline = time.monotonic() + patience(timeout)
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {patience(timeout):.0f} s")
        await asyncio.sleep(interval)


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def children(pid: int, mentioning: str = "") -> list[int]:
    """The running children of `pid` whose command line contains `mentioning`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None or fields[1] != str(pid) or fields[0] in ("Z", "X"):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if mentioning in cmdline:
            found.append(int(entry.name))
    return found
