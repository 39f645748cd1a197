"""A real Ray cluster on this machine, for the Ray executor's tests and benchmark.

`LocalRayCluster` runs `ray start --head --block` on 127.0.0.1 in its own process group, with
its temporary folder (sessions, sockets, logs) in a short private folder, never /tmp/ray, and
every port chosen free. `LocalRayNode` joins a second node to it (`ray start --address`), with
its own temporary folder and environment (HOME, TMPDIR...), in a process group of its own that
`kill()` ends at once, as a machine that goes away would. Workers inherit the environment
given to their node (that is where a real node's workers find their API keys too). `stop()`
ends the whole process group — the node's services and every worker — and removes the folder.

Ray's token authentication is turned off for these clusters (`RAY_AUTH_MODE=disabled`, in the
cluster's environment and, with `ray_environment()`, in the test process): otherwise a Ray
instance started without a mode writes a token into the user's home (~/.ray/auth_token) and
every later cluster on the machine requires it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
START_TIMEOUT_S = 90.0
READY_MARK = "Ray runtime started"


@contextlib.contextmanager
def ray_environment(**extra: str) -> Iterator[None]:
    """This process's environment with `RAY_ENV` and `extra` set, put back afterwards."""
    changes = {**RAY_ENV, **extra}
    previous = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalRayCluster:
    """A one-node Ray cluster: `start()`, use `address`, `stop()` (or use it as a context)."""

    LOG = "head.log"

    def __init__(
        self, env: dict[str, str], *, num_cpus: int = 2, resources: str | None = None
    ) -> None:
        self.num_cpus = num_cpus
        self.resources = resources
        """Custom resources of the node, as `ray start --resources` takes them (JSON)."""
        self.port = free_port()
        self.temp_dir = Path(tempfile.mkdtemp(prefix="jmray", dir="/tmp"))
        """Short on purpose: Ray's socket paths inside it must stay under 108 characters."""
        self.env = {**env, **RAY_ENV}
        self.killed: list[int] = []
        self.address = f"127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def role(self) -> list[str]:
        """The `ray start` options that make this node the head."""
        return ["--head", "--port", str(self.port), "--include-dashboard", "false"]

    def start(self) -> Self:
        ray = Path(sys.executable).parent / "ray"
        command = [
            str(ray), "start", *self.role(), "--block",
            "--node-ip-address", "127.0.0.1",
            "--num-cpus", str(self.num_cpus),
            "--disable-usage-stats",
            "--temp-dir", str(self.temp_dir),
            "--dashboard-agent-listen-port", str(free_port()),
            "--metrics-export-port", str(free_port()),
            "--min-worker-port", "0", "--max-worker-port", "0",
        ]  # fmt: skip
        if self.resources is not None:
            command += ["--resources", self.resources]
        log = (self.temp_dir / self.LOG).open("wb")
        self._process = subprocess.Popen(
            command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while READY_MARK not in self.log():
            if self._process.poll() is not None or time.monotonic() > deadline:
                output = self.log()
                self.stop()
                raise RuntimeError(f"ray start did not come up:\n{output[-3000:]}")
            time.sleep(0.2)
        return self

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.temp_dir / self.LOG).read_text(errors="replace")
        return ""

    def processes(self) -> list[int]:
        """Pids still in the cluster's process group."""
        if self._process is None:
            return []
        group = self._process.pid
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
                if int(fields[2]) == group and fields[0] != "Z":
                    pids.append(int(entry.name))
        return pids

    def node_processes(self) -> list[int]:
        """Pids of every live process of this node: its process group, and every descendant
        of it (Ray starts some processes in sessions of their own, and its workers rewrite
        their environment's memory for their titles, so neither the group nor a mark in the
        environment finds them all)."""
        parents: dict[int, int] = {}
        groups: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    parents[int(entry.name)] = int(fields[1])
                    groups[int(entry.name)] = int(fields[2])
        if self._process is None:
            return []
        found = {pid for pid, group in groups.items() if group == self._process.pid}
        grew = True
        while grew:
            more = {pid for pid, parent in parents.items() if parent in found} - found
            found |= more
            grew = bool(more)
        return sorted(found)

    def kill(self) -> None:
        """SIGKILL every process of the node at once (the machine is gone); `stop()` still
        removes its folder. The pids killed stay in `killed`."""
        self.killed = self.node_processes()
        for pid in self.killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def alive(self, pids: list[int]) -> list[int]:
        """Those of `pids` still running (not gone, not a zombie)."""
        running = []
        for pid in pids:
            with contextlib.suppress(OSError, IndexError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    running.append(pid)
        return running

    def stop(self) -> None:
        leftovers = self.node_processes()  # before the group's leader goes
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # what SIGTERM left (gcs, raylet)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        for pid in self.alive(leftovers):  # what Ray started outside the group
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class LocalRayNode(LocalRayCluster):
    """A second node of a `LocalRayCluster` on this machine (`ray start --address`), with its
    own temporary folder; its environment is its own (give it its own HOME and TMPDIR)."""

    LOG = "node.log"

    def __init__(
        self, head: LocalRayCluster, env: dict[str, str], *, num_cpus: int = 2, resources: str
    ) -> None:
        super().__init__(env, num_cpus=num_cpus, resources=resources)
        self.address = head.address

    def role(self) -> list[str]:
        return [
            "--address", self.address,
            "--node-manager-port", str(free_port()),
            "--object-manager-port", str(free_port()),
            "--runtime-env-agent-port", str(free_port()),
        ]  # fmt: skip
