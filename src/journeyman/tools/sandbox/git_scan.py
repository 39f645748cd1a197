"""Finds git metadata anywhere in the workspace and disarms what a command added to it.

The workspace's own `.git` is read-only under bubblewrap and reverted by `git_guard`, but a
command may create a repository elsewhere: `git init` in a workspace that is not one, a nested
`vendor/lib/.git`, a bare repository, a `.git` file pointing at a git directory anywhere. The
user's next `git status` there (or a shell prompt that runs git) would run what its
configuration names, on the host.

`scan` walks the workspace (without following links, without entering git directories, at
most `MAX_ENTRIES` entries) and records every git directory's `config`, `config.worktree`,
`commondir` and `hooks/`, and every `.git` entry. `disarm` compares a later scan with an
earlier one and, for what is new or changed:

- in a configuration file, removes every key that makes git run a program (`is_program_key`),
  except values the file already held before; a file git cannot parse is moved aside;
- makes hooks non-executable (links in `hooks/` are removed);
- removes links named `.git`, `config` or `commondir`, and `.git` files or `commondir` files
  naming a git directory outside the workspace.

Configuration is read and written with git itself (`git config --file`), run with the safe
overrides of `core.safe_git`, so what is removed is what the user's git would have read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.core.safe_git import safe_git_command, safe_git_env

MAX_ENTRIES = 200_000
"""Directory entries a scan looks at before it stops (and says the workspace was not fully
checked)."""
MAX_CONFIG_BYTES = 1 << 20
"""A configuration file larger than this is moved aside unread."""
GIT_TIMEOUT_S = 20.0
RACY_NS = 100_000_000
"""A file changed this close to a scan is read again by the next one."""
CONFIG_FILES = ("config", "config.worktree")
QUARANTINE_SUFFIX = ".disabled-by-journeyman"
"""Added to the name of a file that is moved aside."""

_PROGRAM_SUFFIXES = (
    "command",
    "cmd",
    "program",
    "helper",
    "editor",
    "pager",
    "driver",
    "textconv",
    "external",
    "fsmonitor",
    "hookspath",
    "askpass",
    "uploadpack",
    "receivepack",
    "clean",
    "smudge",
    "process",
    "gitproxy",
    "smtpserver",
    "viewer",
    "browser",
    "hook",
    "vcs",
    "filter",
    "tool",
    "tunnel",
    "httpd",
)
_PROGRAM_SECTIONS = (
    "include",
    "includeif",
    "pager",
    "browser",
    "man",
    "protocol",
    "mergetool",
    "difftool",
    "instaweb",
)
"""Sections whose every key is removed: includes read other files, the rest name programs or
allow transports that run them."""
_BANG_SECTIONS = ("alias", "submodule")
"""Sections whose values run a shell command when they start with `!`."""


def is_program_key(name: str, value: str | None) -> bool:
    """Whether the configuration key `name` (as `git config --list` prints it) with `value`
    can make git run a program or read another file."""
    section, _, rest = name.partition(".")
    section = section.lower()
    variable = rest.rsplit(".", 1)[-1].lower()
    if section in _PROGRAM_SECTIONS:
        return True
    if section in _BANG_SECTIONS:
        return (value or "").lstrip().startswith("!")
    if section == "core" and variable == "worktree":
        return True
    return variable.endswith(_PROGRAM_SUFFIXES)


@dataclass(frozen=True)
class Seen:
    """One file of git metadata as a scan found it."""

    kind: str
    """"config", "hook", "pointer" (a `.git` file), "commondir", "link" or "repository"."""
    stamp: tuple[int, int, int, int, int]
    """(inode, size, mtime, ctime, mode)."""
    data: bytes | None = None
    """The file's bytes (None for a link, a folder, or a file too large to read)."""


@dataclass(frozen=True)
class Folder:
    """One folder of the workspace as a scan listed it."""

    stamp: tuple[int, int]
    """(inode, ctime)."""
    subfolders: tuple[str, ...]
    """Names of the folders in it (links not included, `.git` left out)."""
    entries: int
    dot_git: bool
    """It holds an entry named `.git`."""
    bare: bool
    """It looks like a git directory itself (HEAD, objects, refs)."""


@dataclass
class Scan:
    """The git metadata of a workspace at one moment."""

    entries: dict[Path, Seen] = field(default_factory=dict)
    truncated: bool = False
    """The walk stopped at `MAX_ENTRIES`: parts of the workspace were not looked at."""
    started_ns: int = 0
    """When the scan began (wall clock, ns)."""
    folders: dict[str, Folder] = field(default_factory=dict)
    """Every folder listed (or taken from the previous scan), by path."""

    def trusted_folders(self, racy_ns: int) -> dict[str, Folder]:
        """The folders a later scan may take by their stamp (see `trusted`)."""
        limit = self.started_ns - racy_ns
        return {path: seen for path, seen in self.folders.items() if seen.stamp[1] < limit}

    def trusted(self, racy_ns: int) -> dict[Path, Seen]:
        """The entries a later scan may take by their stamp: those not changed within `racy_ns`
        of this scan (a write that soon may not have moved the ctime)."""
        limit = self.started_ns - racy_ns
        return {path: seen for path, seen in self.entries.items() if seen.stamp[3] < limit}


@dataclass
class DisarmReport:
    """What `disarm` changed; paths are relative to the workspace."""

    removed_keys: list[str] = field(default_factory=list)
    """"path: key" for each configuration key removed."""
    disabled_hooks: list[str] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    """Links, pointers out of the workspace and unreadable configs, removed or moved aside."""
    new_repositories: list[str] = field(default_factory=list)
    truncated: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.removed_keys or self.disabled_hooks or self.removed_files)

    def message(self) -> str | None:
        """One paragraph for the model and the user; None when there is nothing to say."""
        parts = []
        if self.removed_keys:
            parts.append(
                "git configuration in the workspace named programs git would run on the user's "
                "machine; removed: " + _listing(self.removed_keys)
            )
        if self.disabled_hooks:
            parts.append("git hooks made non-executable: " + _listing(self.disabled_hooks))
        if self.removed_files:
            parts.append(
                "git metadata pointing outside the workspace or unreadable, removed or moved "
                f"aside (*{QUARANTINE_SUFFIX}): " + _listing(self.removed_files)
            )
        if parts:
            parts.append(
                "do not write git configuration or hooks that run programs; ask the user if the "
                "task needs them"
            )
        if self.truncated:
            parts.append(
                f"the workspace has over {MAX_ENTRIES} entries: git metadata beyond them was not "
                "checked"
            )
        return "; ".join(parts) or None


def _listing(items: list[str], limit: int = 12) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _stamp(info: os.stat_result) -> tuple[int, int, int, int, int]:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)


def _looks_like_git_dir(names: set[str]) -> bool:
    return "HEAD" in names and "objects" in names and "refs" in names


def scan(
    workspace: Path,
    previous: Scan | None = None,
    racy_ns: int = RACY_NS,
    *,
    listings_unchanged: bool = False,
) -> Scan:
    """Every piece of git metadata in `workspace` (see the module's description).

    What `previous` recorded is reused where nothing can have changed since: a folder whose
    inode and ctime are the same is not listed again (adding, removing or renaming an entry
    moves a folder's ctime, and no command can set a ctime), and a file with the same stamp is
    not read again. Anything changed within `racy_ns` of that scan is looked at again, as
    `git_guard` does. With `listings_unchanged` (a `FolderWatch`, complete before `previous`
    began, saw no folder's listing change since) the folders of `previous` are taken as they
    are, without walking or a `stat` of each; the git metadata files themselves are still
    looked at."""
    result = Scan(started_ns=time.time_ns())
    reuse = previous.trusted(racy_ns) if previous is not None else {}
    root = Path(os.path.realpath(workspace))
    git_dirs: list[Path] = []
    if listings_unchanged and previous is not None and previous.folders and not previous.truncated:
        result.folders = dict(previous.folders)
        for folder, listed in result.folders.items():
            if listed.bare and folder != str(root):
                git_dirs.append(Path(folder))
            elif listed.dot_git:
                _note_dot_git(result, root, Path(folder, ".git"), git_dirs, reuse)
    else:
        known = previous.trusted_folders(racy_ns) if previous is not None else {}
        _walk(result, root, known, git_dirs, reuse)
    seen_dirs: set[Path] = set()
    while git_dirs:
        git_dir = git_dirs.pop()
        if git_dir in seen_dirs:
            continue
        seen_dirs.add(git_dir)
        _note_git_dir(result, root, git_dir, git_dirs, reuse)
    return result


def _walk(
    result: Scan,
    root: Path,
    known: dict[str, Folder],
    git_dirs: list[Path],
    reuse: dict[Path, Seen],
) -> None:
    """List the folders below `root` (those in `known` unchanged are not listed again) into
    `result`, noting `.git` entries and adding the git directories found to `git_dirs`."""
    budget = MAX_ENTRIES
    pending = [str(root)]
    while pending:
        folder = pending.pop()
        listed = _list_folder(folder, known)
        if listed is None:
            continue
        result.folders[folder] = listed
        budget -= listed.entries
        if budget < 0:
            result.truncated = True
            break
        if listed.bare and folder != str(root):
            git_dirs.append(Path(folder))
            continue
        if listed.dot_git:
            _note_dot_git(result, root, Path(folder, ".git"), git_dirs, reuse)
        pending += [os.path.join(folder, name) for name in listed.subfolders]


def _list_folder(folder: str, known: dict[str, Folder]) -> Folder | None:
    """What `scan` needs of one folder: from `known` when unchanged, else by listing it."""
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    stamp = (info.st_ino, info.st_ctime_ns)
    cached = known.get(folder)
    if cached is not None and cached.stamp == stamp:
        return cached
    try:
        with os.scandir(folder) as listing:
            children = list(listing)
    except OSError:
        return None
    names = {child.name for child in children}
    subfolders = tuple(
        child.name
        for child in children
        if child.name != ".git" and child.is_dir(follow_symlinks=False)
    )
    return Folder(stamp, subfolders, len(children), ".git" in names, _looks_like_git_dir(names))


def _note(
    result: Scan,
    path: Path,
    kind: str,
    reuse: dict[Path, Seen],
    info: os.stat_result | None = None,
) -> None:
    try:
        info = info or path.lstat()
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode):
        kind = "link"
    known = reuse.get(path)
    if known is not None and known.kind == kind and known.stamp == _stamp(info):
        result.entries[path] = known
        return
    data = None
    if kind != "link" and stat.S_ISREG(info.st_mode) and info.st_size <= MAX_CONFIG_BYTES:
        with contextlib.suppress(OSError):
            data = path.read_bytes()
    result.entries[path] = Seen(kind, _stamp(info), data)


def _note_dot_git(
    result: Scan, root: Path, path: Path, git_dirs: list[Path], reuse: dict[Path, Seen]
) -> None:
    try:
        info = path.lstat()
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode):
        result.entries[path] = Seen("repository", _stamp(info))
        git_dirs.append(path)
        return
    _note(result, path, "pointer", reuse, info)
    if stat.S_ISREG(info.st_mode):
        target = pointer_target(path)
        if target is not None and _inside(root, target):
            git_dirs.append(Path(os.path.realpath(target)))


def _note_git_dir(
    result: Scan, root: Path, git_dir: Path, git_dirs: list[Path], reuse: dict[Path, Seen]
) -> None:
    for name in CONFIG_FILES:
        if os.path.lexists(git_dir / name):
            _note(result, git_dir / name, "config", reuse)
    commondir = git_dir / "commondir"
    if os.path.lexists(commondir):
        _note(result, commondir, "commondir", reuse)
        common = _commondir_target(git_dir)
        if common is not None and _inside(root, common):
            git_dirs.append(Path(os.path.realpath(common)))
    hooks = git_dir / "hooks"
    if hooks.is_symlink():
        _note(result, hooks, "link", reuse)
    elif hooks.is_dir():
        with contextlib.suppress(OSError), os.scandir(hooks) as listing:
            for child in listing:
                _note(result, Path(child.path), "hook", reuse)
    for nested in ("worktrees", "modules"):
        folder = git_dir / nested
        if folder.is_dir() and not folder.is_symlink():
            with contextlib.suppress(OSError), os.scandir(folder) as listing:
                for child in listing:
                    if child.is_dir(follow_symlinks=False):
                        git_dirs.append(Path(child.path))


def pointer_target(dot_git: Path) -> Path | None:
    """The git directory a `.git` file names, or None when it names none."""
    try:
        with dot_git.open("rb") as handle:
            line = handle.read(4096).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    target = Path(line.removeprefix("gitdir:").strip())
    return target if target.is_absolute() else dot_git.parent / target


def _commondir_target(git_dir: Path) -> Path | None:
    try:
        text = (git_dir / "commondir").read_text("utf-8", errors="replace").strip()
    except OSError:
        return None
    target = Path(text)
    return target if target.is_absolute() else git_dir / target


def _inside(root: Path, path: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(root)


def disarm(workspace: Path, before: Scan, after: Scan) -> DisarmReport:
    """Undo the dangerous part of what changed between `before` and `after` (see the module)."""
    report = DisarmReport(truncated=after.truncated)
    root = Path(os.path.realpath(workspace))
    for path, seen in after.entries.items():
        earlier = before.entries.get(path)
        if earlier is not None and _same(earlier, seen):
            continue
        shown = _show(root, path)
        if seen.kind == "repository":
            if earlier is None:
                report.new_repositories.append(shown)
        elif seen.kind == "link":
            _remove(path)
            report.removed_files.append(shown)
        elif seen.kind == "hook" and not path.name.endswith(".sample"):  # git never runs those
            _disable_hook(path, shown, report)
        elif seen.kind == "pointer":
            target = pointer_target(path)
            if target is not None and not _inside(root, target):
                _quarantine(path)
                report.removed_files.append(shown)
        elif seen.kind == "commondir":
            common = _commondir_target(path.parent)
            if common is not None and not _inside(root, common):
                _quarantine(path)
                report.removed_files.append(shown)
        elif seen.kind == "config":
            _disarm_config(path, shown, earlier, seen, report)
    return report


def _same(earlier: Seen, seen: Seen) -> bool:
    """Same kind, mode and bytes (a file rewritten with its old bytes, as `git_guard` does, is
    the same); by the stamp alone when the bytes were not read."""
    if earlier.kind != seen.kind or earlier.stamp[4] != seen.stamp[4]:
        return False
    if earlier.data is None or seen.data is None:
        return earlier.stamp == seen.stamp and earlier.data == seen.data
    return earlier.data == seen.data


def _show(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _disable_hook(path: Path, shown: str, report: DisarmReport) -> None:
    try:
        info = path.lstat()
    except OSError:
        return
    if stat.S_ISREG(info.st_mode):
        if info.st_mode & 0o111:
            with contextlib.suppress(OSError):
                path.chmod(stat.S_IMODE(info.st_mode) & ~0o111)
                report.disabled_hooks.append(shown)
    elif not stat.S_ISDIR(info.st_mode):
        _remove(path)
        report.removed_files.append(shown)


def _disarm_config(
    path: Path, shown: str, earlier: Seen | None, seen: Seen, report: DisarmReport
) -> None:
    """Remove the program keys `path` gained; move it aside when git cannot read it."""
    if not stat.S_ISREG(seen.stamp[4]) or seen.data is None:
        _quarantine(path)
        report.removed_files.append(shown)
        return
    entries = read_config(path)
    if entries is None:
        _quarantine(path)
        report.removed_files.append(shown)
        return
    old = _entries_of(earlier.data) if earlier is not None and earlier.data is not None else []
    old_values = _values(old or [])
    new_values = _values(entries)
    for key, values in new_values.items():
        if not any(is_program_key(key, value) for value in values):
            continue
        if values == old_values.get(key):
            continue
        kept = [v for v in old_values.get(key, []) if v is not None]
        if not _git_config(path, "--unset-all", key):
            _quarantine(path)
            report.removed_files.append(shown)
            return
        for value in kept:
            _git_config(path, "--add", key, value)
        report.removed_keys.append(f"{shown}: {key}")
    if report.removed_keys and not _clean(path, old_values):
        _quarantine(path)
        report.removed_files.append(shown)


def _clean(path: Path, old_values: dict[str, list[str | None]]) -> bool:
    """Whether `path` now holds no program key other than those it held before."""
    entries = read_config(path)
    if entries is None:
        return False
    for key, values in _values(entries).items():
        danger = any(is_program_key(key, value) for value in values)
        if danger and values != old_values.get(key):
            return False
    return True


def _values(entries: list[tuple[str, str | None]]) -> dict[str, list[str | None]]:
    grouped: dict[str, list[str | None]] = {}
    for key, value in entries:
        grouped.setdefault(key, []).append(value)
    return grouped


def _entries_of(data: bytes) -> list[tuple[str, str | None]] | None:
    with tempfile.TemporaryDirectory(prefix="journeyman-gitcfg-") as scratch:
        copy = Path(scratch) / "config"
        copy.write_bytes(data)
        return read_config(copy)


def read_config(path: Path) -> list[tuple[str, str | None]] | None:
    """Every (key, value) of one configuration file, includes not followed; None when git
    cannot read it (or is not installed: then nothing on this machine would run it either)."""
    done = _run_git("config", "--file", str(path), "--no-includes", "--null", "--list")
    if done is None or done.returncode != 0:
        return None
    entries: list[tuple[str, str | None]] = []
    for item in done.stdout.split(b"\0"):
        if not item:
            continue
        key, newline, value = item.decode("utf-8", errors="surrogateescape").partition("\n")
        entries.append((key, value if newline else None))
    return entries


def repository_config_names(repo: Path) -> list[str]:
    """The key names the repository at `repo` sets itself (its config and worktree config,
    with what they include; not the user's or the system's), for `safe_git_command`'s
    `config_names`; empty when git cannot tell."""
    env = safe_git_env(os.environ)
    try:
        done = subprocess.run(
            safe_git_command("config", "--show-scope", "--name-only", "--null", "--list"),
            cwd=repo,
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    names = []
    fields = done.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    for scope, name in zip(fields[::2], fields[1::2], strict=False):
        if scope in ("local", "worktree"):
            names.append(name)
    return names


def _git_config(path: Path, *args: str) -> bool:
    done = _run_git("config", "--file", str(path), *args)
    return done is not None and done.returncode == 0


def _run_git(*args: str) -> subprocess.CompletedProcess[bytes] | None:
    env = safe_git_env({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"})
    env.update({"HOME": os.devnull, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_DIR": os.devnull})
    try:
        return subprocess.run(
            safe_git_command(*args),
            cwd="/",
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _quarantine(path: Path) -> None:
    """Move `path` aside (a link is just removed)."""
    if path.is_symlink():
        _remove(path)
        return
    aside = path.with_name(path.name + QUARANTINE_SUFFIX)
    try:
        if aside.exists() or aside.is_symlink():
            _remove(aside)
        os.replace(path, aside)
        aside.chmod(0o600)
    except OSError:
        _remove(path)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
