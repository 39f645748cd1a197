"""What every sandbox shares: the `Sandbox` protocol, the started process, resource limits.

A sandbox starts a shell command and returns a `SandboxedProcess`, which knows how to wait for
it and how to stop it together with every process it started (see `processes`).

Starting a command costs about what a bare `subprocess.run` does: the limits are set by the
shell itself (`ulimit`, prefixed to the command line) rather than by a Python function run in
the child between fork and exec, which would force CPython's slow fork path (copying the page
tables of the whole agent); and the exit is awaited on a pidfd, without a watcher thread.
"""

from __future__ import annotations

import asyncio
import functools
import os
import resource
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from journeyman.tools.choices import SandboxKind as SandboxKind
from journeyman.tools.sandbox.processes import (
    MARKER_VAR,
    group_alive,
    marked_pids,
    stop_processes,
)

PROBE_TIMEOUT = 10.0
"""Seconds a sandbox's trial command (or `docker version`) may take at startup."""
GiB = 1024**3


@dataclass(frozen=True)
class ResourceLimits:
    """Per-process limits set with `setrlimit` before the command starts; None means unlimited.

    They are inherited by everything the command starts. `processes` counts all processes of
    the user, and the kernel does not apply it to root (uid 0) at all.
    """

    cpu_seconds: int | None = 3600
    """CPU time one process may use, in seconds (SIGXCPU, then SIGKILL, when exceeded)."""
    address_space_bytes: int | None = 32 * GiB
    """Virtual memory one process may map, in bytes (allocations fail beyond it)."""
    processes: int | None = 4096
    """Processes (and threads) the user may have in all; fork fails beyond it."""
    file_size_bytes: int | None = 8 * GiB
    """Largest file a process may write, in bytes (SIGXFSZ / EFBIG beyond it)."""

    def pairs(self) -> list[tuple[int, int]]:
        """(resource, limit) for each limit that is set."""
        wanted = [
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_AS, self.address_space_bytes),
            (resource.RLIMIT_NPROC, self.processes),
            (resource.RLIMIT_FSIZE, self.file_size_bytes),
        ]
        return [(which, value) for which, value in wanted if value is not None]

    def ulimit_prefix(self) -> str:
        """bash `ulimit` commands setting the limits, ending with `; ` ("" when none are set).

        Each limit is capped at the agent's own hard limit (which the command inherits and may
        not raise), so the `ulimit` never fails. Kept on the command's first line, so that bash
        numbers the command's lines as before.
        """
        flags = {
            resource.RLIMIT_CPU: ("-t", 1),
            resource.RLIMIT_AS: ("-v", 1024),
            resource.RLIMIT_NPROC: ("-u", 1),
            resource.RLIMIT_FSIZE: ("-f", 1024),  # bash counts -v and -f in KiB
        }
        parts = []
        for which, value in self.pairs():
            _soft, hard = resource.getrlimit(which)
            limit = value if hard == resource.RLIM_INFINITY else min(value, hard)
            flag, unit = flags[which]
            parts.append(f"{flag} {limit // unit}")
        return f"ulimit {' '.join(parts)}; " if parts else ""

    def preexec(self) -> Callable[[], None] | None:
        """A function for `preexec_fn` that sets the limits in the child, or None if none."""
        pairs = self.pairs()
        if not pairs:
            return None

        def apply() -> None:
            for which, value in pairs:
                _soft, hard = resource.getrlimit(which)
                limit = value if hard == resource.RLIM_INFINITY else min(value, hard)
                resource.setrlimit(which, (limit, limit))

        return apply


class StartedProcess:
    """A child started with `subprocess.Popen`, awaited from the event loop.

    The exit is awaited on a pidfd (Linux 5.3+): no thread, no SIGCHLD handler. Elsewhere the
    child is polled every few milliseconds.
    """

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    async def wait(self) -> int:
        """The exit code (negative: killed by that signal), once the child has exited."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        try:
            pidfd = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):  # no pidfd here, or the child is already reaped
            while (code := self.popen.poll()) is None:
                await asyncio.sleep(0.005)
            return code
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not exited.done():
                exited.set_result(None)

        try:
            loop.add_reader(pidfd, readable)
            try:
                await exited
            finally:
                loop.remove_reader(pidfd)
        finally:
            os.close(pidfd)
        return self.popen.wait()


@dataclass
class SandboxedProcess:
    """A command started by a sandbox."""

    process: StartedProcess
    marker: str
    """Value of MARKER_VAR in the environment of every process the command starts."""
    group: int
    """Process group of the process started on the host (the command's shell, or bwrap)."""
    on_stop: Callable[[], None] | None = None
    """Extra clean-up run after the processes are stopped (e.g. removing a container)."""
    on_exit: Callable[[], None] | None = None
    """Called once when the started process has exited (e.g. to note the orphans it left)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    async def wait(self) -> int:
        code = await self.process.wait()
        if self.on_exit is not None:
            on_exit, self.on_exit = self.on_exit, None
            on_exit()
        return code

    def running(self) -> bool:
        """Whether any process of the command is still running."""
        return group_alive(self.group) or bool(marked_pids(self.marker))

    async def stop(self, grace: float) -> None:
        """SIGTERM everything the command started, SIGKILL what is left after `grace` seconds."""
        await stop_processes(self.group, self.marker, grace)
        if self.on_stop is not None:
            self.on_stop()


@runtime_checkable
class Sandbox(Protocol):
    """Starts shell commands in some kind of isolation."""

    kind: SandboxKind
    """Which implementation this is (never AUTO)."""
    network: bool
    """Whether commands can reach the network."""
    ident: str
    """Prefix of the marker (`MARKER_VAR`) of every command this sandbox starts."""
    pass_env: tuple[str, ...]
    """Variables commands get besides the allow-list (`environment.command_env`): names, or
    prefixes ending in `*`; the user's choice."""

    @property
    def description(self) -> str:
        """One line for the run header: the sandbox and what it restricts."""
        ...

    async def start(
        self, command: str, *, cwd: Path, env: dict[str, str], stdout: int
    ) -> SandboxedProcess:
        """Start `command` with bash in `cwd`; its stdout and stderr go to the fd `stdout`."""
        ...

    async def close(self, grace: float = 1.0) -> None:
        """Stop every process any command of this sandbox left running."""
        ...


def shell() -> str:
    """bash when available (models write bash), else the platform's /bin/sh."""
    return _find_bash(os.environ.get("PATH", os.defpath)) or "/bin/sh"


@functools.lru_cache(maxsize=16)
def _find_bash(search_path: str) -> str | None:
    """`which bash` for one PATH (looked up once per PATH: it is asked before every command)."""
    return shutil.which("bash", path=search_path)


def _is_bash(program: str) -> bool:
    return os.path.basename(program) == "bash"


@dataclass
class SandboxBase:
    """The fields and process plumbing the concrete sandboxes share."""

    workspace: Path
    """Root of the workspace; the only place a confining sandbox lets commands write."""
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    """Resource limits of every command."""
    network: bool = True
    ident: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    """Part of the marker of every command this sandbox starts."""
    pass_env: tuple[str, ...] = ()
    """Variables commands get besides the allow-list: names, or prefixes ending in `*`."""

    def __post_init__(self) -> None:
        self.workspace = Path(os.path.realpath(self.workspace))

    def _marked_env(self, env: dict[str, str]) -> tuple[str, dict[str, str]]:
        marker = f"{self.ident}:{uuid.uuid4().hex[:12]}"
        return marker, {**env, MARKER_VAR: marker}

    def _shell_argv(self, command: str) -> list[str]:
        """The shell running `command`, with the limits set by bash itself when it is bash."""
        program = shell()
        if _is_bash(program):
            command = self.limits.ulimit_prefix() + command
        return [program, "-c", command]

    async def _spawn(
        self,
        argv: list[str],
        marker: str,
        *,
        cwd: Path,
        env: dict[str, str],
        stdout: int,
        limits_in_command: bool = True,
    ) -> SandboxedProcess:
        """Start `argv` in a new session; `limits_in_command` says that `argv` sets the limits
        itself (see `_shell_argv`), else they are set in the child before it runs `argv`."""
        preexec = None
        if not (limits_in_command and _is_bash(shell())):
            preexec = self.limits.preexec()
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=preexec,
        )
        # start_new_session makes the started process the leader of a new group
        return SandboxedProcess(StartedProcess(popen), marker, popen.pid)

    async def close(self, grace: float = 1.0) -> None:
        await stop_processes(None, f"{self.ident}:", grace, prefix=True)


@functools.lru_cache(maxsize=32)
def probe(argv: tuple[str, ...]) -> str | None:
    """Run `argv`; None if it exits 0, else a one-line reason. Cached per command line."""
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"no answer within {PROBE_TIMEOUT:g} s"
    except OSError as error:
        return str(error)
    if done.returncode == 0:
        return None
    said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
    return f"exit code {done.returncode}: {said[-1] if said else 'no message'}"
