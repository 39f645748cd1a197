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
- /tmp, /dev/shm and /run private and empty; the command sees only its own processes
  (`--unshare-pid`: a new `/proc`, in which the agent and its environment do not exist), has
  no network unless allowed (`--unshare-net`), holds no capabilities, and dies with the agent
  (`--die-with-parent`). Every process a command starts ends with it: the pid namespace is
  torn down when the command exits.
- the Python journeyman itself runs from (`own_python`: its prefixes, site-packages, the user's
  site-packages, the folder the `journeyman` package comes from, an editable install's source)
  is read-only wherever it lies, inside the workspace too (journeyman installed in the
  project's `.venv`): a `.pth` file or a `sitecustomize.py` written there would run on the host
  the next time journeyman starts. It and the other folders of `sys.path` stay visible where
  they lie in an emptied folder (a virtualenv under /tmp), so checks that run that interpreter
  work.
- the folders of `hidden` (the session store, the user's config, the snapshot cache) are empty
  wherever they lie, also outside the home folder and /tmp, also inside the workspace.

Mounts are made from the shallowest path to the deepest, so the deeper one wins: the workspace
shows through a hidden home folder, and its `.git`, journeyman's Python and a session folder
inside it are read-only or hidden over the writable workspace.

The workspace's git metadata (`.git`, and the git directory a worktree's `.git` file names when
it lies in the workspace) is mounted read-only over the writable workspace: git runs programs
named in `.git/config` and `.git/hooks/` on the user's machine, outside the sandbox. Commands
can read the repository (`git status`, `git diff`, `git log`) but not commit, stage or stash.
"""

from __future__ import annotations

import os
import shutil
import site
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from journeyman.core.errors import ConfigurationError
from journeyman.core.package import import_root
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
    hidden: tuple[Path, ...] = ()
    """Folders of the host commands must not see at all, wherever they are (the session store,
    the user's config): an empty folder in memory covers each."""
    kind: SandboxKind = SandboxKind.BUBBLEWRAP

    @property
    def description(self) -> str:
        net = "network allowed" if self.network else "network off"
        return (
            "bubblewrap (workspace read-write but .git and journeyman's own Python read-only, "
            "home folder, session store, config and system secrets hidden, rest read-only, "
            f"private /tmp, {net})"
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
        args += mount_args(self.workspace, self.hidden)
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


Mount = tuple[Path, list[str]]
"""Where a mount goes, and the bwrap arguments making it."""


def mount_args(workspace: Path, hidden: Iterable[Path] = ()) -> list[str]:
    """bwrap arguments for everything above the read-only root (see the module doc): what is
    hidden, the writable workspace, and what stays read-only inside it.

    Mounts are made from the shallowest path to the deepest, so a deeper one always wins: the
    workspace shows through a hidden home folder, its `.git`, journeyman's own Python and a
    session folder inside it are read-only or hidden over the writable workspace.
    """
    root = Path(os.path.realpath(workspace))
    mounts = _hiding_mounts(root)
    mounts.append((root, ["--bind", str(root), str(root)]))
    for git_path in read_only_git_paths(root):
        mounts.append((Path(git_path), ["--ro-bind", git_path, git_path]))
    user_hidden = [path for path in _real_folders(hidden) if path != root]
    out_of_sight = {path for path, _args in mounts} | set(user_hidden)
    elsewhere = [path for path in python_path() if not path.is_relative_to(root)]
    for own in dict.fromkeys([*own_python(), *elsewhere]):
        # one that holds the workspace is read-only already; one that is a hidden folder
        # itself (PYTHONPATH=$HOME) stays hidden
        if not root.is_relative_to(own) and own not in out_of_sight:
            mounts.append((own, ["--ro-bind", str(own), str(own)]))
    for folder in user_hidden:
        mounts.append((folder, _hide(folder)))  # in the workspace too; one holding it shows it
    mounts.sort(key=lambda mount: len(mount[0].parts))  # stable: same depth keeps this order
    return [arg for _path, args in mounts for arg in args]


def _hiding_mounts(root: Path) -> list[Mount]:
    """Home folders and system secrets out of sight, the home folder's toolchains back
    (read-only). What lies in the workspace is left alone."""
    mounts: list[Mount] = []
    emptied: list[Path] = []
    folders = [*(Path(os.path.realpath(name)) for name in HIDDEN_SYSTEM_DIRS), *home_folders()]
    for path in dict.fromkeys(folders):
        if path.is_dir() and not path.is_relative_to(root):
            mounts.append((path, _hide(path)))
            emptied.append(path)
    for name in (*HIDDEN_SYSTEM_FILES, *_ssh_host_keys()):
        path = Path(os.path.realpath(name))
        if path.is_file() and not path.is_relative_to(root):
            mounts.append((path, _hide(path)))
    for home in home_folders():
        if home not in emptied:
            continue
        for name in HOME_TOOLCHAINS:
            path = home / name
            if path.exists() and not path.is_relative_to(root):
                mounts.append((path, ["--ro-bind", str(path), str(path)]))
    return mounts


def _hide(path: Path) -> list[str]:
    """An empty folder in memory over a folder, a device refusing reads over a file."""
    if path.is_dir():
        return ["--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def _real_folders(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        real = Path(os.path.realpath(path))
        if real.exists() and real != Path("/") and real not in found:
            found.append(real)
    return found


def own_python() -> list[Path]:
    """Where the Python that runs journeyman finds its own code: the prefixes of its virtualenv
    and of the installation it was made from, the site-packages folders (the user's own too),
    and the folder the `journeyman` package is imported from (an editable install's source).

    A command that could write there would choose the code journeyman itself runs next
    (a `.pth` file, a `sitecustomize.py`, a changed module), on the host: they are mounted
    read-only wherever they are, inside the workspace too. Other folders on `sys.path` (a
    project's own source, installed in the same virtualenv in editable mode) stay writable:
    the model's work is to change them.
    """
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    candidates += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    candidates += [site.getusersitepackages(), str(journeyman_root())]
    return [path for path in _real_folders(Path(c) for c in candidates) if path.is_dir()]


def journeyman_root() -> Path:
    """The `sys.path` folder the `journeyman` package is imported from."""
    return import_root()


def python_path() -> list[Path]:
    """Every folder on `sys.path`, to keep visible (read-only) what lies in a hidden folder."""
    entries = [Path(entry) for entry in sys.path if entry and os.path.isabs(entry)]
    return [path for path in _real_folders(entries) if path.is_dir()]


def _ssh_host_keys() -> list[str]:
    folder = Path("/etc/ssh")
    try:
        return sorted(str(p) for p in folder.glob("ssh_host_*key"))
    except OSError:
        return []
