"""`bubblewrap` (Linux, `bwrap` on PATH): the workspace writable, the rest read-only.

/tmp and /run are private and empty, the command sees only its own processes
(`--unshare-pid`), has no network unless allowed (`--unshare-net`), holds no capabilities, and
dies with the agent (`--die-with-parent`). Every process a command starts ends with it: the pid
namespace is torn down when the command exits.

The workspace's git metadata (`.git`, and the git directory a worktree's `.git` file names when
it lies in the workspace) is mounted read-only over the writable workspace: git runs programs
named in `.git/config` and `.git/hooks/` on the user's machine, outside the sandbox. Commands
can read the repository (`git status`, `git diff`, `git log`) but not commit, stage or stash.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from journeyman.core.errors import ConfigurationError
from journeyman.tools.sandbox.base import (
    SandboxBase,
    SandboxedProcess,
    SandboxKind,
    probe,
    shell,
)
from journeyman.tools.sandbox.git_guard import git_dirs


@dataclass
class BubblewrapSandbox(SandboxBase):
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
        for path in read_only_git_paths(self.workspace):
            args += ["--ro-bind", path, path]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.network:
            args.append("--unshare-net")
        args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session"]
        args += ["--chdir", str(cwd), "--", shell(), "-c", command]
        return args

    def check(self) -> None:
        """Run a trivial command in the sandbox; ConfigurationError saying why if it fails."""
        if shutil.which(self.bwrap) is None:
            raise ConfigurationError(
                f"bubblewrap sandbox: {self.bwrap!r} is not installed (Debian/Ubuntu: "
                "apt-get install bubblewrap); choose --sandbox local to run without isolation"
            )
        problem = probe(tuple(self.argv("exit 0", self.workspace)))
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


def read_only_git_paths(workspace: Path) -> list[str]:
    """The workspace's git metadata to mount read-only over the writable workspace.

    `.git` itself (a folder, or a worktree's file naming its git directory, which a command
    could otherwise point at a folder of its own), and the git directories it leads to when
    they lie inside the workspace (outside it they are read-only already).
    """
    root = Path(os.path.realpath(workspace))
    found: list[str] = []
    dot_git = root / ".git"
    candidates = [Path(os.path.realpath(dot_git))] if os.path.lexists(dot_git) else []
    for path in candidates + git_dirs(root):
        if path.exists() and path.is_relative_to(root) and str(path) not in found:
            found.append(str(path))
    return found
