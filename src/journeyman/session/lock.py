"""One process at a time drives a session: a per-session lock file next to the database.

The lock is an `flock` on `locks/<session id>.lock` in the session root, so the operating
system releases it when its process ends, however it ends (kill -9 included); the file holds
the owner's pid, for the refusal message. The files stay after release (unlinking a lock file
that another process may have just opened would let two processes hold "the" lock).
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path
from types import TracebackType

from journeyman.core.errors import ConfigurationError

LOCK_DIR = "locks"


class SessionBusyError(ConfigurationError):
    """Another process is running the session."""


class SessionLock:
    """Exclusive right to run one session, held until `release` (or the process ends)."""

    def __init__(self, root: Path, session_id: str) -> None:
        self.session_id = session_id
        safe = re.sub(r"[^A-Za-z0-9_.\-]", "_", session_id)
        self.path = root / LOCK_DIR / f"{safe}.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or raise `SessionBusyError` naming the process that holds it."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise SessionBusyError(
                f"session {self.session_id} is being run by another journeyman process (pid "
                f"{owner}); wait for it to end or stop it, then resume the session"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> SessionLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
