"""Keeps a command from arming the workspace's git repository against the user.

git runs programs named in a repository's metadata: `core.fsmonitor`, `core.hooksPath`, filter
and diff drivers in `.git/config`, scripts in `.git/hooks/`. A command that writes one of them
runs code on the host the next time the user types `git status`, outside any sandbox.

Under bubblewrap the workspace's `.git` is mounted read-only (see `bubblewrap`). Everywhere else
(and as a second line under bubblewrap) `GitMetadataGuard` records the bytes of those files
before a command and puts them back afterwards: `.git` itself when it is a file (a worktree's
pointer to its git directory), and in the git directory and the common one it names: `config`,
`config.worktree` and everything under `hooks/`. Files the command added there are removed.

A repository the command created (no `.git` before) has no old bytes to go back to; it is
disarmed instead, as is every other piece of git metadata anywhere in the workspace: each guard
also scans the workspace (`git_scan`) and, after the command, removes from what is new or
changed the configuration keys that run programs, makes new hooks non-executable and removes
pointers out of the workspace. A guard given the previous one compares against what that one
left, so a change made between two commands (by a process left running) is caught too.

Reading those files twice per command is most of the guard's cost, so a file whose inode,
size, mtime and ctime are those seen when its bytes were read is taken as unchanged: by the
next guard (given the previous one), and by `restore()`. A command cannot set a ctime, and any
write moves it, except within the kernel's timestamp granularity of the read: a file changed
that recently (`RACY_NS`) is read again, as git does with its "racily clean" entries.

Walking the workspace after every command is the rest of its cost (a `stat` per folder, so
milliseconds in a workspace holding a virtualenv). A `FolderWatch` (inotify) on every folder
the scan listed tells when none of their listings changed since the scan; the next scan then
takes them as they were and only looks at the git metadata files again (which catches a
config rewritten in place, or through a hard link). Writing to files changes no listing, so
most commands (a build, tests, `echo`) leave the watch quiet. Where inotify cannot watch, every
scan walks as before.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

import journeyman.tools.sandbox.git_scan as git_scan
from journeyman.tools.sandbox.git_scan import DisarmReport, Scan
from journeyman.tools.watch import FolderWatch

GUARDED_FILES = ("config", "config.worktree")
"""Files of a git directory that name programs git runs."""
GUARDED_DIRS = ("hooks",)
"""Folders of a git directory whose files git runs."""
RACY_NS = 100_000_000
"""A file whose ctime is this close to the moment it was read is never trusted by its stat."""

_Stamp = tuple[int, int, int, int]


@dataclass(frozen=True)
class _Saved:
    data: bytes
    mode: int
    stamp: _Stamp | None = None
    """(inode, size, mtime, ctime) when `data` was read, None when too recent to trust."""


def _stamp(info: os.stat_result) -> _Stamp:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@dataclass
class GuardReport:
    """What `GitMetadataGuard.restore` found and undid."""

    reverted: list[str] = field(default_factory=list)
    """Guarded files the command changed or deleted; their old bytes are back."""
    removed: list[str] = field(default_factory=list)
    """Files the command added to a hooks folder; they were deleted."""
    created_repository: bool = False
    """The workspace had no `.git` before the command and has one now."""
    disarmed: DisarmReport = field(default_factory=DisarmReport)
    """What was disarmed in git metadata elsewhere in the workspace (or in a new `.git`)."""

    @property
    def changed(self) -> bool:
        return bool(self.reverted or self.removed or self.disarmed.changed)

    def message(self) -> str | None:
        """One paragraph for the model and the user; None when there is nothing to say."""
        parts = []
        if self.reverted or self.removed:
            names = ", ".join(self.reverted + self.removed)
            parts.append(
                "the command changed git metadata that makes git run programs on the user's "
                f"machine ({names}); the change was reverted. Do not edit git configuration or "
                "hooks; ask the user if the task needs it"
            )
        if self.created_repository:
            parts.append(
                "the command created a git repository (.git) in the workspace; settings of it "
                "that run programs are removed after every command"
            )
        disarmed = self.disarmed.message()
        if disarmed is not None:
            parts.append(disarmed)
        return "; ".join(parts) or None


def git_dirs(workspace: Path) -> list[Path]:
    """The workspace's git directory and its common directory (a worktree's main `.git`)."""
    dot_git = workspace / ".git"
    if dot_git.is_symlink():
        return []
    if dot_git.is_dir():
        found = [dot_git]
    elif dot_git.is_file():
        try:
            line = dot_git.read_text("utf-8", errors="replace").strip()
        except OSError:
            return []
        if not line.startswith("gitdir:"):
            return []
        target = Path(line.removeprefix("gitdir:").strip())
        found = [target if target.is_absolute() else workspace / target]
    else:
        return []
    common = found[0] / "commondir"
    with contextlib.suppress(OSError):
        named = Path(common.read_text("utf-8", errors="replace").strip())
        found.append(named if named.is_absolute() else found[0] / named)
    unique: list[Path] = []
    for path in found:
        real = Path(os.path.realpath(path))
        if real.is_dir() and real not in unique:
            unique.append(real)
    return unique


class GitMetadataGuard:
    """Saves the git files that run programs before a command; `restore()` puts them back."""

    def __init__(self, workspace: Path, previous: GitMetadataGuard | None = None) -> None:
        """Save the files now; those `previous` saved and that have not changed since are
        taken from it instead of being read again."""
        self.workspace = workspace
        self._previous = previous._saved if previous is not None else {}
        self.watch: FolderWatch = previous.watch if previous is not None else FolderWatch()
        """Watches the folders of `scan`: while it saw nothing, the next scan lists none."""
        if previous is not None and previous.scan.started_ns:
            self.scan: Scan = previous.scan
        else:
            self.scan = git_scan.scan(workspace, racy_ns=RACY_NS)
            self.watch.cover(_inodes(self.scan))
        """The workspace's git metadata as the command found it (as the previous guard left
        it, when there is one); after `restore()`, as the guard left it."""
        self._told_truncated: bool = previous._told_truncated if previous is not None else False
        self.had_repository = os.path.lexists(workspace / ".git")
        self._saved: dict[Path, _Saved | None] = {}
        self._dirs: list[Path] = []
        dot_git = workspace / ".git"
        if dot_git.is_file() and not dot_git.is_symlink():
            self._save(dot_git)
        for git_dir in git_dirs(workspace):
            for name in GUARDED_FILES:
                self._save(git_dir / name)
            for name in GUARDED_DIRS:
                folder = git_dir / name
                self._dirs.append(folder)
                for path in _files_under(folder):
                    self._save(path)

    def _save(self, path: Path) -> None:
        reading = time.time_ns()
        try:
            info = path.lstat()
            earlier = self._previous.get(path)
            if earlier is not None and earlier.stamp is not None and earlier.stamp == _stamp(info):
                self._saved[path] = earlier
                return
            data = path.read_bytes()
        except OSError:
            self._saved[path] = None  # absent: a file appearing there is removed
            return
        # a link is never trusted: what it points to can change without touching it
        trusted = stat.S_ISREG(info.st_mode) and info.st_ctime_ns < reading - RACY_NS
        self._saved[path] = _Saved(data, info.st_mode & 0o7777, _stamp(info) if trusted else None)

    def restore(self) -> GuardReport:
        """Undo every change the command made to the saved files; report what was undone."""
        report = GuardReport()
        for folder in self._dirs:  # first, so that a folder swapped for a link goes away
            for path in _files_under(folder):
                if path not in self._saved:
                    _remove(path)
                    report.removed.append(self._show(path))
        for path, saved in self._saved.items():
            if saved is None:
                if os.path.lexists(path):
                    _remove(path)
                    report.removed.append(self._show(path))
                continue
            if _same(path, saved):
                continue
            _remove(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(saved.data)
            path.chmod(saved.mode)
            report.reverted.append(self._show(path))
        report.created_repository = not self.had_repository and os.path.lexists(
            self.workspace / ".git"
        )
        report.disarmed = self.disarm()
        return report

    def disarm(self) -> DisarmReport:
        """Scan the workspace and disarm what changed in its git metadata since `self.scan`;
        the scan then holds what is left (also called at the end of a run)."""
        settled = self.watch.settled()
        after = git_scan.scan(
            self.workspace, self.scan, racy_ns=RACY_NS, listings_unchanged=settled
        )
        found = git_scan.disarm(self.workspace, self.scan, after)
        if found.truncated:  # said once a run, not after every command
            found.truncated = not self._told_truncated
            self._told_truncated = True
        if found.changed:
            after = git_scan.scan(self.workspace, after, racy_ns=RACY_NS)
        self.scan = after
        if not settled or found.changed:  # else the folders are those already watched
            self.watch.cover(_inodes(after))
        return found

    def cheap(self) -> bool:
        """Whether `restore()` would look at the git metadata files only, not at every folder
        of the workspace (the watch saw no folder change since the last scan)."""
        return self.watch.quiet()

    def _show(self, path: Path) -> str:
        try:
            return path.relative_to(self.workspace).as_posix()
        except ValueError:
            return str(path)


def _inodes(scan: Scan) -> dict[str, int]:
    return {path: folder.stamp[0] for path, folder in scan.folders.items()}


def _files_under(folder: Path) -> list[Path]:
    """Every file and link under `folder` (links are not followed)."""
    if folder.is_symlink() or not folder.is_dir():
        return [folder] if os.path.lexists(folder) else []
    found = []
    for root, dirs, files in os.walk(folder):
        found += [Path(root) / name for name in files]
        found += [Path(root) / name for name in dirs if (Path(root) / name).is_symlink()]
    return sorted(found)


def _same(path: Path, saved: _Saved) -> bool:
    try:
        info = path.lstat()
        if saved.stamp is not None and _stamp(info) == saved.stamp:
            return True
        if path.is_symlink() or (info.st_mode & 0o7777) != saved.mode:
            return False
        return path.read_bytes() == saved.data
    except OSError:
        return False


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            for child in sorted(path.rglob("*"), reverse=True):
                with contextlib.suppress(OSError):
                    child.rmdir() if child.is_dir() and not child.is_symlink() else child.unlink()
            path.rmdir()
        else:
            path.unlink()
