"""Reading a file of the workspace on the host, where a sandboxed command may have planted it.

journeyman reads some workspace files itself, outside any sandbox: rules files (AGENTS.md,
CLAUDE.md, `.journeyman/rules.md`) that go into the system prompt, and the project's config.
A command could have replaced one with a link to `~/.ssh/id_rsa`, a FIFO that blocks the
reader forever, or a file of hundreds of megabytes. `read_host_file` reads a file only when:

- its resolved path is inside one of the given folders (the workspace), checked before opening
  and again on what was opened (through /proc, where there is one), so a link swapped in
  between cannot lead out;
- the last component is opened with O_NOFOLLOW and O_NONBLOCK (a FIFO does not block);
- what was opened is a regular file (`fstat`), no larger than the limit.

Anything else raises `RefusedFile` saying why, so the caller can skip the file with a warning
naming it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)


class RefusedFile(Exception):
    """A file that is not read: a link out of the allowed folders, a special file, too big."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def read_host_file(path: Path, *, limit: int, inside: Sequence[Path] | None) -> bytes:
    """The bytes of `path` (see the module). `inside` None allows any place (a file of the
    user's own). Raises FileNotFoundError when there is no such file, `RefusedFile` when it may
    not be read, OSError when reading fails."""
    roots = [Path(os.path.realpath(root)) for root in inside] if inside is not None else None
    resolved = Path(os.path.realpath(path))
    if roots is not None and not _within(resolved, roots):
        if not os.path.lexists(path):
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path))
        raise RefusedFile(path, f"it links outside the workspace (to {resolved})")
    try:
        descriptor = os.open(resolved, _FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RefusedFile(path, "it is a link that changed while it was opened") from None
        raise
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise RefusedFile(path, f"it is not a regular file ({_kind(info.st_mode)})")
        if roots is not None:
            opened = _opened_path(descriptor)
            if opened is not None and not _within(opened, roots):
                raise RefusedFile(path, f"it links outside the workspace (to {opened})")
        if info.st_size > limit:
            raise RefusedFile(path, f"it is {info.st_size:,} bytes, over the {limit:,}-byte limit")
        data = _read_up_to(descriptor, limit + 1)
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise RefusedFile(path, f"it grew over the {limit:,}-byte limit while it was read")
    return data


def _within(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _opened_path(descriptor: int) -> Path | None:
    link = f"/proc/self/fd/{descriptor}"
    try:
        return Path(os.readlink(link))
    except OSError:
        return None


def _read_up_to(descriptor: int, size: int) -> bytes:
    chunks = []
    left = size
    while left > 0:
        chunk = os.read(descriptor, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
