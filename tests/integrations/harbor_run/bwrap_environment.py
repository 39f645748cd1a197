"""A Harbor environment without a container engine, for the installed-agent test: Harbor's
`BaseEnvironment` implemented with subprocesses under bubblewrap.

Harbor ships no local environment, and no container engine runs here. This one gives each trial
a folder on the host standing for the container's own top-level folders (`/app`, `/logs`,
`/tests`, `/installed-agent`, and any other new name an upload names), bound over a read-only
view of the host's `/` (its `/tmp` writable, where the test keeps the `journeyman` command);
commands run with `bash -c` under bwrap, sharing the host's network (the fake model server
listens on 127.0.0.1). The task's environment files are copied
into its working folder (`[environment] workdir`, else `/app`); the Dockerfile is not built.
Users are not switched: everything runs as the invoking user.

Loaded by Harbor itself (`harbor run -e tests.integrations.harbor_run.bwrap_environment:...`),
under Python 3.12 with `harbor` installed; the project's 3.11 tests never import it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path, PurePosixPath

from harbor.environments.base import BaseEnvironment, ExecResult

OWN_FOLDERS = ("app", "logs", "tests", "installed-agent", "solution")
HIDDEN_FROM_HOST = frozenset({"proc", "dev", "sys", "tmp"})
KILL_AFTER_S = 3


class BubblewrapEnvironment(BaseEnvironment):
    """A trial's environment as a folder on the host, its commands under bubblewrap."""

    @staticmethod
    def type() -> str:
        return "journeyman-bubblewrap"

    def _validate_definition(self) -> None:
        if shutil.which("bwrap") is None:
            raise FileNotFoundError("bubblewrap (bwrap) is not installed")

    @property
    def _root(self) -> Path:
        return Path(self.trial_paths.trial_dir) / "environment-root"

    @property
    def _workdir(self) -> PurePosixPath:
        return PurePosixPath(self.task_env_config.workdir or "/app")

    async def start(self, force_build: bool) -> None:
        for name in OWN_FOLDERS:
            (self._root / name).mkdir(parents=True, exist_ok=True)
        for name in ("agent", "verifier", "artifacts"):  # what a container has mounted
            (self._root / "logs" / name).mkdir(parents=True, exist_ok=True)
        workdir = self.host_path(str(self._workdir))
        workdir.mkdir(parents=True, exist_ok=True)
        if self.environment_dir.is_dir():
            shutil.copytree(
                self.environment_dir,
                workdir,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("Dockerfile"),
            )

    async def stop(self, delete: bool) -> None:
        if delete:
            shutil.rmtree(self._root, ignore_errors=True)

    def host_path(self, path: str) -> Path:
        """Where the environment's absolute `path` lives on the host (a new top-level name is
        made one of the environment's own folders; the host's own are refused)."""
        pure = PurePosixPath(path)
        if not pure.is_absolute() or ".." in pure.parts or len(pure.parts) < 2:
            raise ValueError(f"not an absolute path inside the environment: {path}")
        top = pure.parts[1]
        if top not in OWN_FOLDERS and not (self._root / top).is_dir():
            if os.path.lexists(f"/{top}"):
                raise ValueError(f"{path} is on the host's own /{top}, which is read-only here")
            (self._root / top).mkdir(parents=True)
        return self._root.joinpath(*pure.parts[1:])

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self.host_path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self.host_path(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.host_path(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        source = self.host_path(source_dir)
        if source.is_dir():
            shutil.copytree(source, target_dir, dirs_exist_ok=True, symlinks=True)

    def bwrap_command(self, command: str, cwd: str | None) -> list[str]:
        """bwrap over a read-only host `/`, the environment's own folders bound on top."""
        args = ["bwrap", "--die-with-parent", "--proc", "/proc", "--dev", "/dev"]
        args += ["--bind", "/tmp", "/tmp"]
        own = {child.name for child in self._root.iterdir() if child.is_dir()}
        for entry in sorted(os.listdir("/")):
            if entry in own or entry in HIDDEN_FROM_HOST:
                continue
            host = f"/{entry}"
            if os.path.islink(host):
                args += ["--symlink", os.readlink(host), host]
            elif os.path.isdir(host):
                args += ["--ro-bind", host, host]
        for name in sorted(own):
            args += ["--bind", str(self._root / name), f"/{name}"]
        args += ["--chdir", cwd or str(self._workdir), "bash", "-c", command]
        return args

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        merged = {**os.environ, **(self._merge_env(env) or {})}
        process = await asyncio.create_subprocess_exec(
            *self.bwrap_command(command, cwd),
            env=merged,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout=timeout_sec)
        except TimeoutError:
            process.kill()
            out, err = await process.communicate()
            return ExecResult(
                stdout=out.decode(errors="replace"), stderr="timed out", return_code=124
            )
        return ExecResult(
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            return_code=process.returncode if process.returncode is not None else 1,
        )
