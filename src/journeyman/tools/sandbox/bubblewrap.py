"""`bubblewrap` (Linux, `bwrap` on PATH): the workspace writable, the rest read-only.

What a command sees:

- the workspace, read-write, except its git metadata (below);
- the rest of the filesystem read-only, except what is hidden:
  - the user's home folder (`$HOME` and the account's home) and `/home`, `/root` are empty
    and writable in memory (changes are lost with the command), except, read-only, the
    toolchain folders `HOME_TOOLCHAINS` (user-installed programs, packages and Pythons:
    `~/.local/bin`, `~/.local/lib`, uv's and pipx's folders, `~/.cargo/bin`, `~/.rustup`,
    `~/.pyenv`, `~/.nvm`). Caches (`~/.cache`) and every credential file (`~/.ssh`, `~/.aws`,
    `~/.netrc`, `~/.npmrc`, `~/.docker`, `~/.kube`, `~/.config`) are not visible. A workspace
    inside the home folder is visible as usual; one that contains it shows it in full.
  - system secrets `HIDDEN_SYSTEM_FILES` (password hashes, sudoers, SSH host keys) cannot be
    read (a device node that refuses reads covers each), and `HIDDEN_SYSTEM_DIRS` (container
    engines' and databases' state, backups, mail, cron spools, private TLS keys) look empty.
- /tmp, /dev/shm and /run private and empty, except, read-only, the Python environment
  journeyman itself runs on when it lies there or in a hidden folder (checks commonly run that
  interpreter: a virtualenv made under /tmp must not turn `python -m pytest` into "command not
  found"); the command sees only its own processes
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
import sys
from dataclasses import dataclass
from pathlib import Path

from journeyman.core.errors import ConfigurationError
from journeyman.tools.sandbox.base import (
    SandboxBase,
    SandboxedProcess,
    SandboxKind,
    probe,
)
from journeyman.tools.sandbox.git_guard import git_dirs

HOME_TOOLCHAINS = (
    ".local/bin",
    ".local/lib",
    ".local/share/uv/python",
    ".local/share/uv/tools",
    ".local/share/pipx",
    ".cargo/bin",
    ".rustup",
    ".pyenv",
    ".nvm",
)
"""Folders of the home folder that stay visible (read-only) inside bubblewrap: programs,
packages and interpreters a workspace's virtualenv or PATH may point into; no credentials."""
PRIVATE_DIRS = ("/tmp", "/dev/shm", "/run")
"""Folders every command gets empty and of its own (in memory)."""
HIDDEN_SYSTEM_FILES = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/security/opasswd",
)
"""Files that cannot be read inside bubblewrap (private SSH host keys are added to these)."""
HIDDEN_SYSTEM_DIRS = (
    "/root",
    "/home",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/letsencrypt",
    "/var/backups",
    "/var/mail",
    "/var/spool/cron",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/kubelet",
    "/var/lib/mysql",
    "/var/lib/postgresql",
    "/var/lib/private",
    "/var/lib/sss",
)
"""Folders that look empty inside bubblewrap."""


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
        return (
            "bubblewrap (workspace read-write but .git read-only, home folder and system "
            f"secrets hidden, rest read-only, private /tmp, {net})"
        )

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
        args += hiding_args(self.workspace)
        args += ["--bind", str(self.workspace), str(self.workspace)]
        for path in read_only_git_paths(self.workspace):
            args += ["--ro-bind", path, path]
        args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.network:
            args.append("--unshare-net")
        args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session"]
        args += ["--chdir", str(cwd), "--", *self._shell_argv(command)]
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


def home_folders() -> list[Path]:
    """`$HOME` and the account's home folder from the password database (they may differ)."""
    found = []
    for home in (os.environ.get("HOME"), _account_home()):
        if home and os.path.isabs(home):
            real = Path(os.path.realpath(home))
            if real != Path("/") and real not in found:
                found.append(real)
    return found


def _account_home() -> str | None:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        return None


def hiding_args(workspace: Path) -> list[str]:
    """bwrap arguments hiding home folders and system secrets (see the module doc).

    They go before the workspace's own mount, which therefore stays visible even inside a
    hidden folder. A home folder inside the workspace (or equal to it) is not hidden.
    """
    root = Path(os.path.realpath(workspace))
    args: list[str] = []
    hidden: list[Path] = []

    def hide_dir(path: Path) -> None:
        if path.is_relative_to(root) or any(path.is_relative_to(h) for h in hidden):
            return
        if path.is_dir():
            args.extend(["--tmpfs", str(path)])
            hidden.append(path)

    for name in HIDDEN_SYSTEM_DIRS:
        hide_dir(Path(os.path.realpath(name)))
    for home in home_folders():
        hide_dir(home)
    for name in (*HIDDEN_SYSTEM_FILES, *_ssh_host_keys()):
        path = Path(os.path.realpath(name))
        if path.is_file() and not path.is_relative_to(root):
            args.extend(["--ro-bind", "/dev/null", str(path)])
    for home in home_folders():
        if not any(home.is_relative_to(h) for h in hidden):
            continue
        for name in HOME_TOOLCHAINS:
            path = home / name
            if path.exists() and not path.is_relative_to(root):
                args.extend(["--ro-bind", str(path), str(path)])
    emptied = [*hidden, *(Path(os.path.realpath(name)) for name in PRIVATE_DIRS)]
    for path in own_python():
        if not path.is_relative_to(root) and any(path.is_relative_to(e) for e in emptied):
            args.extend(["--ro-bind", str(path), str(path)])
    return args


def own_python() -> list[Path]:
    """The folders of the Python environment journeyman runs on: its virtualenv (if any) and
    the installation that virtualenv was made from."""
    found: list[Path] = []
    for prefix in (sys.prefix, sys.base_prefix):
        real = Path(os.path.realpath(prefix))
        if real.is_dir() and real != Path("/") and real not in found:
            found.append(real)
    return found


def _ssh_host_keys() -> list[str]:
    folder = Path("/etc/ssh")
    try:
        return sorted(str(p) for p in folder.glob("ssh_host_*key"))
    except OSError:
        return []
