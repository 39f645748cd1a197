"""Where commands run: the `Sandbox` protocol and its three implementations.

`run_command` (and anything else that starts processes on the model's behalf) asks a sandbox to
start a shell command and gets back a `SandboxedProcess`, which knows how to wait for it and
how to stop it together with every process it started.

- `local`: the command runs on the host in its own process group, with resource limits
  (`ResourceLimits`: CPU seconds, address space, processes, file size) set by `setrlimit` in
  the child. Nothing stops it from writing outside the workspace or using the network.
- `bubblewrap` (Linux, `bwrap` on PATH): the workspace is mounted read-write, the rest of the
  filesystem read-only, /tmp and /run are private and empty, the command sees only its own
  processes (`--unshare-pid`), has no network unless allowed (`--unshare-net`), holds no
  capabilities, and dies with the agent (`--die-with-parent`). Every process a command starts
  ends with it: the pid namespace is torn down when the command exits.
- `docker`: a throwaway container per command, only when a Docker engine answers.

`open_sandbox` picks one: `auto` takes bubblewrap when it is installed and a trial command
succeeds, else local, and says which in `description`. A sandbox asked for by name that cannot
start raises ConfigurationError; there is no silent fallback.

Every process started for a command carries an environment variable naming the sandbox and
the command (`MARKER_VAR`), so that processes which left the command's process group
(`setsid`, double-forking daemons) are still found and stopped. A program that wipes its own
environment escapes that net under `local`; under bubblewrap the pid namespace catches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import resource
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

from journeyman.core.errors import ConfigurationError

MARKER_VAR = "JOURNEYMAN_SANDBOX_RUN"
"""Environment variable set for every command: `<sandbox id>:<command id>`."""
PROBE_TIMEOUT = 10.0
"""Seconds a sandbox's trial command (or `docker version`) may take at startup."""
GiB = 1024**3


class SandboxKind(StrEnum):
    AUTO = "auto"
    LOCAL = "local"
    BUBBLEWRAP = "bubblewrap"
    DOCKER = "docker"


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


NO_LIMITS = ResourceLimits(None, None, None, None)


# --- finding and stopping processes ---------------------------------------------------------


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


# --- the protocol ---------------------------------------------------------------------------


@dataclass
class SandboxedProcess:
    """A command started by a sandbox."""

    process: asyncio.subprocess.Process
    marker: str
    """Value of MARKER_VAR in the environment of every process the command starts."""
    group: int
    """Process group of the process started on the host (the command's shell, or bwrap)."""
    on_stop: Callable[[], None] | None = None
    """Extra clean-up run after the processes are stopped (e.g. removing a container)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    async def wait(self) -> int:
        return await self.process.wait()

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


def _shell() -> str:
    """bash when available (models write bash), else the platform's /bin/sh."""
    return shutil.which("bash") or "/bin/sh"


@dataclass
class _Base:
    workspace: Path
    """Root of the workspace; the only place a confining sandbox lets commands write."""
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    """Resource limits of every command."""
    network: bool = True
    ident: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    """Part of the marker of every command this sandbox starts."""

    def __post_init__(self) -> None:
        self.workspace = Path(os.path.realpath(self.workspace))

    def _marked_env(self, env: dict[str, str]) -> tuple[str, dict[str, str]]:
        marker = f"{self.ident}:{uuid.uuid4().hex[:12]}"
        return marker, {**env, MARKER_VAR: marker}

    async def _spawn(
        self, argv: list[str], marker: str, *, cwd: Path, env: dict[str, str], stdout: int
    ) -> SandboxedProcess:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=self.limits.preexec(),
        )
        # start_new_session makes the started process the leader of a new group
        return SandboxedProcess(process, marker, process.pid)

    async def close(self, grace: float = 1.0) -> None:
        await stop_processes(None, f"{self.ident}:", grace, prefix=True)


@dataclass
class LocalSandbox(_Base):
    """Commands run on the host, in their own process group, under resource limits."""

    kind: SandboxKind = SandboxKind.LOCAL
    note: str = ""
    """Why this sandbox was chosen, when `auto` could not use bubblewrap."""

    @property
    def description(self) -> str:
        text = "local (no isolation: commands can reach the whole filesystem and the network)"
        return f"{text}; {self.note}" if self.note else text

    async def start(
        self, command: str, *, cwd: Path, env: dict[str, str], stdout: int
    ) -> SandboxedProcess:
        marker, env = self._marked_env(env)
        return await self._spawn([_shell(), "-c", command], marker, cwd=cwd, env=env, stdout=stdout)


@dataclass
class BubblewrapSandbox(_Base):
    """Commands run under bubblewrap: workspace writable, everything else read-only."""

    network: bool = False
    bwrap: str = "bwrap"
    """The bwrap executable (a name looked up on PATH, or a path)."""
    kind: SandboxKind = SandboxKind.BUBBLEWRAP

    @property
    def description(self) -> str:
        net = "network allowed" if self.network else "network off"
        return f"bubblewrap (workspace read-write, rest read-only, private /tmp, {net})"

    def argv(self, command: str, cwd: Path) -> list[str]:
        """The bwrap command line running `command` with bash in `cwd`."""
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # Root-owned files under /proc that a uid-0 process could write without capabilities.
        for path in ("/proc/sys", "/proc/sysrq-trigger"):
            if os.path.exists(path):
                args += ["--ro-bind", path, path]
        args += ["--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
        if os.path.isdir("/run") and not os.path.islink("/run"):
            # Hides daemon sockets (Docker, D-Bus...), which a read-only mount would not.
            args += ["--tmpfs", "/run"]
            resolv = os.path.realpath("/etc/resolv.conf")
            if self.network and resolv.startswith("/run/") and os.path.exists(resolv):
                args += ["--ro-bind", resolv, resolv]
        args += ["--bind", str(self.workspace), str(self.workspace)]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.network:
            args.append("--unshare-net")
        args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session"]
        args += ["--chdir", str(cwd), "--", _shell(), "-c", command]
        return args

    def check(self) -> None:
        """Run a trivial command in the sandbox; ConfigurationError saying why if it fails."""
        if shutil.which(self.bwrap) is None:
            raise ConfigurationError(
                f"bubblewrap sandbox: {self.bwrap!r} is not installed (Debian/Ubuntu: "
                "apt-get install bubblewrap); choose --sandbox local to run without isolation"
            )
        problem = _probe(tuple(self.argv("exit 0", self.workspace)))
        if problem is not None:
            raise ConfigurationError(
                f"bubblewrap sandbox: a trial command failed: {problem}. Unprivileged user "
                "namespaces may be disabled (sysctl kernel.unprivileged_userns_clone, or an "
                "AppArmor restriction); choose --sandbox local to run without isolation"
            )

    async def start(
        self, command: str, *, cwd: Path, env: dict[str, str], stdout: int
    ) -> SandboxedProcess:
        marker, env = self._marked_env(env)
        return await self._spawn(self.argv(command, cwd), marker, cwd=cwd, env=env, stdout=stdout)


@dataclass
class DockerSandbox(_Base):
    """Each command runs in a throwaway container with the workspace mounted at the same path."""

    network: bool = False
    image: str = "python:3.12-slim"
    """Image the containers are made from."""
    docker: str = "docker"
    """The docker executable."""
    kind: SandboxKind = SandboxKind.DOCKER

    @property
    def description(self) -> str:
        net = "network allowed" if self.network else "network off"
        return f"docker ({self.image}, workspace mounted read-write, {net})"

    def check(self) -> None:
        """Ask the engine for its version; ConfigurationError naming the reason if it fails."""
        if shutil.which(self.docker) is None:
            raise ConfigurationError(
                f"docker sandbox: the {self.docker!r} command is not installed; install Docker "
                "or choose --sandbox bubblewrap or local"
            )
        problem = _probe((self.docker, "version", "--format", "{{.Server.Version}}"))
        if problem is not None:
            raise ConfigurationError(
                f"docker sandbox: the Docker engine does not answer ({problem}); start the "
                "Docker daemon (or set DOCKER_HOST), or choose --sandbox bubblewrap or local"
            )

    async def start(
        self, command: str, *, cwd: Path, env: dict[str, str], stdout: int
    ) -> SandboxedProcess:
        marker, env = self._marked_env(env)
        name = "journeyman-" + marker.replace(":", "-")
        ws = str(self.workspace)
        argv = [self.docker, "run", "--rm", "--init", "--name", name, "--workdir", str(cwd)]
        argv += ["--volume", f"{ws}:{ws}", "--user", f"{os.getuid()}:{os.getgid()}"]
        argv += ["--network", "bridge" if self.network else "none", "--cap-drop", "ALL"]
        if self.limits.processes is not None:
            argv += ["--pids-limit", str(self.limits.processes)]
        if self.limits.address_space_bytes is not None:
            argv += ["--memory", str(self.limits.address_space_bytes)]
        for key in env:
            argv += ["--env", key]  # values come from the docker client's own environment
        argv += [self.image, "bash", "-c", command]
        started = await self._spawn(argv, marker, cwd=cwd, env=env, stdout=stdout)
        started.on_stop = functools.partial(_remove_container, self.docker, name)
        return started


def _remove_container(docker: str, name: str) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [docker, "rm", "--force", name],
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )


@functools.lru_cache(maxsize=32)
def _probe(argv: tuple[str, ...]) -> str | None:
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


def open_sandbox(
    kind: SandboxKind | str,
    workspace: Path,
    *,
    allow_network: bool = False,
    limits: ResourceLimits | None = None,
) -> Sandbox:
    """The sandbox of that kind for `workspace`, checked to work.

    `auto` is bubblewrap when it is installed and works, else local. A kind asked for by name
    that cannot start raises ConfigurationError.
    """
    kind = SandboxKind(kind)
    limits = limits or ResourceLimits()
    if kind is SandboxKind.LOCAL:
        return LocalSandbox(workspace, limits, network=True)
    if kind is SandboxKind.DOCKER:
        docker = DockerSandbox(workspace, limits, network=allow_network)
        docker.check()
        return docker
    bwrap = BubblewrapSandbox(workspace, limits, network=allow_network)
    try:
        bwrap.check()
    except ConfigurationError as error:
        if kind is SandboxKind.BUBBLEWRAP:
            raise
        reason = error.message.split(";")[0].removeprefix("bubblewrap sandbox: ")
        return LocalSandbox(workspace, limits, network=True, note=f"bubblewrap unusable: {reason}")
    return bwrap
