"""`docker`: a throwaway container per command, only when a Docker engine answers."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from journeyman.core.errors import ConfigurationError
from journeyman.tools.sandbox.base import (
    PROBE_TIMEOUT,
    SandboxBase,
    SandboxedProcess,
    SandboxKind,
    probe,
)
from journeyman.tools.sandbox.bubblewrap import own_python


@dataclass
class DockerSandbox(SandboxBase):
    """Each command runs in a throwaway container with the workspace mounted at the same path."""

    network: bool = False
    image: str = "python:3.12-slim"
    """Image the containers are made from."""
    docker: str = "docker"
    """The docker executable."""
    hidden: tuple[Path, ...] = ()
    """Folders of the host commands must not see (the session store, the user's config); only
    those inside the workspace need covering, nothing else of the host is mounted."""
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
        problem = probe((self.docker, "version", "--format", "{{.Server.Version}}"))
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
        argv += inner_mounts(self.workspace, self.hidden)
        argv += ["--network", "bridge" if self.network else "none", "--cap-drop", "ALL"]
        if self.limits.processes is not None:
            argv += ["--pids-limit", str(self.limits.processes)]
        if self.limits.address_space_bytes is not None:
            argv += ["--memory", str(self.limits.address_space_bytes)]
        for key in env:
            argv += ["--env", key]  # values come from the docker client's own environment
        argv += [self.image, "bash", "-c", command]
        # the container's limits are docker's flags above; the client keeps the old per-process ones
        started = await self._spawn(
            argv, marker, cwd=cwd, env=env, stdout=stdout, limits_in_command=False
        )
        started.on_stop = functools.partial(_remove_container, self.docker, name)
        return started


def inner_mounts(workspace: Path, hidden: tuple[Path, ...]) -> list[str]:
    """docker arguments for what lies inside the mounted workspace but must not be writable
    (journeyman's own Python, see `bubblewrap.own_python`) or visible (`hidden`)."""
    root = Path(os.path.realpath(workspace))
    args: list[str] = []
    for path in own_python():
        if path != root and path.is_relative_to(root):
            args += ["--mount", f"type=bind,source={path},target={path},readonly"]
    for folder in hidden:
        path = Path(os.path.realpath(folder))
        if path != root and path.is_relative_to(root) and path.is_dir():
            args += ["--tmpfs", str(path)]
    return args


def _remove_container(docker: str, name: str) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [docker, "rm", "--force", name],
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
