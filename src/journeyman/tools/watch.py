"""Whether anything in a workspace changed since a moment, without looking at every file.

`ChangeWatch` asks the kernel (Linux inotify) to report any change under every folder of the
workspace: a file written, created, deleted, renamed, its mode or times changed. It does not
say what changed, only whether something did since `arm()`; the command journal
(`tools.snapshot`) uses that to skip its scans of the workspace when nothing moved, and scans
as before otherwise.

Changes that inotify cannot see make `ChangeWatch` unusable rather than wrong: where inotify is
missing (not Linux), or a folder cannot be watched (too many folders, no permission), `arm()`
returns False and callers scan. Writes that reach a file through another name (a hard link
from outside the workspace) or through a shared memory mapping are not reported by inotify;
the scans of a command's own changes before this existed did see the former.

Folders that tools fill (`GENERATED_DIRS`) and the workspace's own `.git` are not watched: the
journal leaves them out too.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import select
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


class ChangeWatch:
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

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()

    def _give_up(self) -> None:
        self._usable = False
        self.close()

    def _open(self) -> int:
        lib = _libc()
        if lib is None:
            raise OSError(errno.ENOSYS, "inotify is not available")
        import ctypes

        fd = int(lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        return fd

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
            if count > MAX_FOLDERS:
                return False
            if lib.inotify_add_watch(fd, os.fsencode(root), _MASK) < 0:
                return False
        return True


def _raise(error: OSError) -> None:
    raise error
