"""Wiping secrets from the environment block the kernel shows as `/proc/<pid>/environ`.

`/proc/<pid>/environ` is not `os.environ`: it is the memory the process was started with
(between `env_start` and `env_end` of `/proc/<pid>/stat`), readable by every process of the
same user. Under the `local` sandbox a command is such a process, and `cat /proc/$PPID/environ`
would show it the provider key the agent was started with, whatever `os.environ` holds now.

`wipe_from_environ_block` overwrites the entries of the given variables in that memory (the
name and the value become `_`), so the file no longer shows them. `os.environ` keeps them (the
providers and the programs journeyman starts with an explicit environment still get them), and
the C library's copy is set again with `os.putenv`, in new memory the file does not show, for
the programs started with the inherited environment (batch workers).

What it cannot hide: a program that can read the agent's memory (`/proc/<pid>/mem`, ptrace)
finds the key there. Linux lets a process of the same user do that unless the Yama LSM
(`kernel.yama.ptrace_scope` >= 1) or a hardened kernel forbids it; `ptrace_restricted` says
which holds here.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from pathlib import Path

from journeyman.core.allowed_env import allowed

_ENV_START_FIELD = 50
"""Field numbers in /proc/<pid>/stat (proc(5), counting from 1): env_start, then env_end."""


def environ_span(pid: int | str = "self") -> tuple[int, int] | None:
    """The addresses of a process's environment block, or None where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # from field 3 on; comm may hold spaces
    index = _ENV_START_FIELD - 3
    try:
        start, end = int(fields[index]), int(fields[index + 1])
    except (IndexError, ValueError):
        return None
    return (start, end) if 0 < start < end else None


def wipe_from_environ_block(names: Iterable[str]) -> list[str]:
    """Overwrite the entries of `names` in this process's environment block; the names whose
    entries were wiped (empty where /proc or the block cannot be reached)."""
    wanted = set(names)
    span = environ_span()
    if span is None or not wanted:
        return []
    start, end = span
    try:
        block = ctypes.string_at(start, end - start)
        shown = Path("/proc/self/environ").read_bytes()
    except (OSError, ValueError):
        return []
    if block != shown:  # not the memory the kernel shows: touch nothing
        return []
    wiped: list[str] = []
    offset = 0
    for entry in block.split(b"\0"):
        name, sep, _value = entry.partition(b"=")
        text = name.decode("utf-8", "replace")
        if sep and text in wanted:
            ctypes.memset(start + offset, ord("_"), len(entry))
            ctypes.memset(start + offset + len(name), ord("="), 1)
            value = os.environ.get(text)
            if value is not None:
                os.putenv(text, value)  # the C library's copy, in memory the file does not show
            wiped.append(text)
        offset += len(entry) + 1
    return wiped


def wipe_unlisted() -> list[str]:
    """Wipe every variable a command would not get (`core.allowed_env`: the provider keys and
    every other credential among them); what the command line and batch workers do at start."""
    return wipe_from_environ_block([name for name in os.environ if not allowed(name)])


def environ_shows(values: Iterable[str]) -> bool:
    """Whether /proc/self/environ shows any of `values` (True when it cannot be read)."""
    try:
        shown = Path("/proc/self/environ").read_bytes()
    except OSError:
        return True
    return any(value.encode() in shown for value in values)


def ptrace_restricted() -> bool:
    """Whether processes of the same user cannot read each other's memory (Yama scope >= 1)."""
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()) >= 1
    except (OSError, ValueError):
        return False
