"""Whether anything in a workspace changed since a moment, without looking at every file.

`ChangeWatch` asks the kernel (Linux inotify) to report any change under every folder of the
workspace: a file written, created, deleted, renamed, its mode or times changed. It does not
say what changed, only whether something did since `arm()`; the command journal
(`tools.snapshot`) uses that to skip its scans of the workspace when nothing moved, and scans
as before otherwise.

Changes that inotify cannot see make `ChangeWatch` unusable rather than wrong: where inotify is
missing (not Linux), or a folder cannot be watched (too many folders, no permission), `arm()`
returns False and callers scan. One watch takes at most an eighth of the user's inotify watches
(`watch_budget`), so that their editor and other file watchers keep theirs. Writes that reach
a file through another name (a hard link from outside the workspace) or through a shared
memory mapping are not reported by inotify; the scans of a command's own changes before this
existed did see the former.

Folders that tools fill (`GENERATED_DIRS`) and the workspace's own `.git` are not watched: the
journal leaves them out too.

`FolderWatch` is narrower: it watches the folders a scan listed (the git metadata guard's, which
covers every folder of the workspace) for changes to their listings only (entries added,
removed, renamed; the folder's own mode), so that writes to files (a build, a test run) leave
it quiet. The scan then takes those folders as listed before, without a `stat` of each.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import select
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from journeyman.tools.context import GENERATED_DIRS

if TYPE_CHECKING:
    import ctypes

_IN_MODIFY = 0x2
_IN_ATTRIB = 0x4
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
)
MAX_FOLDERS = 20_000
"""Workspaces with more folders than this (outside generated ones) are scanned instead."""
SHARE_OF_USER_WATCHES = 8
"""One watch takes at most 1/this of the user's inotify watches (`max_user_watches`), so that
the user's editor and file watchers keep theirs; past that it gives up and callers scan."""


@functools.cache
def watch_budget() -> int:
    """Folders one watch may watch: `MAX_FOLDERS`, or less where the user's limit is low."""
    try:
        limit = int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    except (OSError, ValueError):
        return MAX_FOLDERS
    return max(0, min(MAX_FOLDERS, limit // SHARE_OF_USER_WATCHES))


_SKIPPED_NAMES = frozenset(pattern.strip("/") for pattern in GENERATED_DIRS)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only once a command is journaled: it slows every start-up otherwise
    import ctypes.util

    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        lib.inotify_init1.argtypes = [ctypes.c_int]
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return lib


class _InotifyOwner:
    """Owns one inotify descriptor (`_fd`, None when closed), closed with the object."""

    _fd: int | None = None

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()


class ChangeWatch(_InotifyOwner):
    """Reports whether anything under `workspace` changed since the last `arm()`."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._fd: int | None = None
        self._usable = True

    def arm(self) -> bool:
        """Forget earlier changes and watch every folder as it is now; False when impossible.

        Call it before scanning the workspace, so that a change made during the scan counts.
        """
        if not self._usable:
            return False
        try:
            if self._fd is None:
                self._fd = self._open()
            self._drain()
            if not self._watch_folders(self._fd):
                self._give_up()
                return False
        except OSError:
            self._give_up()
            return False
        return True

    def changed(self) -> bool:
        """Whether anything changed since `arm()` (True when not armed)."""
        if self._fd is None:
            return True
        try:
            readable, _, _ = select.select([self._fd], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _give_up(self) -> None:
        self._usable = False
        self.close()

    def _open(self) -> int:
        return _open_inotify()

    def _drain(self) -> None:
        assert self._fd is not None
        while True:
            try:
                if not os.read(self._fd, 65536):
                    return
            except BlockingIOError:
                return

    def _watch_folders(self, fd: int) -> bool:
        lib = _libc()
        if lib is None:
            return False
        walk = os.walk(self.workspace, onerror=_raise)
        for count, (root, dirs, _files) in enumerate(walk, start=1):
            top = root == str(self.workspace)
            dirs[:] = [d for d in dirs if d not in _SKIPPED_NAMES and not (top and d == ".git")]
            if count > watch_budget():
                return False
            if lib.inotify_add_watch(fd, os.fsencode(root), _MASK) < 0:
                return False
        return True


def _open_inotify() -> int:
    lib = _libc()
    if lib is None:
        raise OSError(errno.ENOSYS, "inotify is not available")
    import ctypes

    fd = int(lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1 failed")
    return fd


def _raise(error: OSError) -> None:
    raise error


_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_EVENT_HEADER = struct.Struct("iIII")
"""struct inotify_event: watch descriptor, mask, cookie, length of the name that follows."""
_FOLDER_MASK = (
    _IN_ATTRIB
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
)
"""What changes a folder's listing or its own (inode, ctime): entries added, removed or
renamed, the folder's mode or owner changed, the folder moved or deleted. Writes to the files
in it are not asked for."""


class FolderWatch(_InotifyOwner):
    """Reports whether the listing of any of a set of folders changed since they were watched.

    For a scan that lists folders and reuses what it listed while a folder is unchanged (the
    git metadata scan): `settled()` answers True only when every folder the last scan listed
    was already watched before that scan began and no event arrived since, so a change made
    during a scan is never lost. Writes to files do not count (see `_FOLDER_MASK`). Where
    inotify is missing or a folder cannot be watched, `settled()` is always False.
    """

    def __init__(self) -> None:
        self._fd: int | None = None
        self._usable = True
        self._watched: dict[str, int] = {}
        """Folder path -> the inode watched there."""
        self._paths: dict[int, set[str]] = {}
        """Watch descriptor -> the paths it was added for (a folder moved keeps its watch)."""
        self._complete = False
        """The last `cover()` added nothing: the scan before it ran under a full watch."""

    def settled(self) -> bool:
        """Whether nothing the watch covers changed since the last `cover()`, which needed no
        new watch. Reads (and so forgets) the pending events: call it just before a scan."""
        if self._fd is None:
            return False
        try:
            quiet = self._drain()
        except OSError:
            self._give_up()
            return False
        return quiet and self._complete

    def quiet(self) -> bool:
        """What `settled()` would answer now, without reading the events."""
        if self._fd is None or not self._complete:
            return False
        try:
            readable, _, _ = select.select([self._fd], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def cover(self, folders: dict[str, int]) -> None:
        """Watch each folder (path -> inode as a scan just listed it) not watched yet."""
        if not self._usable:
            return
        lib = _libc()
        try:
            if self._fd is None:
                self._fd = _open_inotify()
            added = False
            for path, inode in folders.items():
                if self._watched.get(path) == inode:
                    continue
                if lib is None or len(self._watched) >= watch_budget():
                    raise OSError(errno.ENOSPC, "too many folders to watch")
                descriptor = int(lib.inotify_add_watch(self._fd, os.fsencode(path), _FOLDER_MASK))
                if descriptor < 0:
                    raise OSError(errno.EPERM, f"cannot watch {path}")
                self._watched[path] = inode
                self._paths.setdefault(descriptor, set()).add(path)
                added = True
        except OSError:
            self._give_up()
            return
        self._complete = not added

    def _give_up(self) -> None:
        self._usable = False
        self._complete = False
        self.close()

    def _drain(self) -> bool:
        """Read every pending event; True when there was none."""
        assert self._fd is not None
        quiet = True
        while True:
            try:
                events = os.read(self._fd, 65536)
            except BlockingIOError:
                return quiet
            if not events:
                return quiet
            quiet = False
            self._forget_removed(events)

    def _forget_removed(self, events: bytes) -> None:
        """Forget the paths of watches the kernel removed (their folder is gone: a new folder
        there, even one given the same inode number, needs a watch of its own); all of them
        when the kernel's queue overflowed and such news may be lost."""
        offset = 0
        while offset + _EVENT_HEADER.size <= len(events):
            descriptor, mask, _cookie, length = _EVENT_HEADER.unpack_from(events, offset)
            offset += _EVENT_HEADER.size + length
            if mask & _IN_Q_OVERFLOW:
                self._watched.clear()
                self._paths.clear()
            elif mask & _IN_IGNORED:
                for path in self._paths.pop(descriptor, set()):
                    self._watched.pop(path, None)
