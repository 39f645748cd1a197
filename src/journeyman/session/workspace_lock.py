"""One process at a time writes to a workspace: a lock held for the length of a run.

Two runs in one folder would each journal the other's edits as their own (so undoing one
throws the other's work away). The lock is an `flock` on a file in journeyman's per-user state
folder (never in the workspace, which a sandboxed command can write), named after a digest of
the workspace's resolved path, so the operating system releases it when its process ends, even
on kill -9. The file holds who took it (session, pid, since when, what for) for the refusal.

Within one process the lock is shared: a run's subagents, and a server's sessions, work in the
workspace of the process that took it. Read-only commands (diff, inspect, sessions) never take
it. The files stay after release: unlinking a lock file another process may have just opened
would let two processes hold "the" lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import platformdirs

from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError

LOCK_DIR_NAME = "workspace-locks"
HOLDER_BYTES = 4096
"""At most this much of a lock file is read for the refusal message."""


class WorkspaceBusyError(ConfigurationError):
    """Another journeyman process is writing to the workspace."""


def default_lock_dir() -> Path:
    """Where workspace locks live: journeyman's per-user state folder."""
    return Path(platformdirs.user_state_dir("journeyman")) / LOCK_DIR_NAME


@dataclass
class _Held:
    fd: int
    count: int


_HELD: dict[Path, _Held] = {}
_HELD_GUARD = threading.Lock()


class WorkspaceLock:
    """Exclusive right of this process to write to `workspace`, until `release`."""

    def __init__(
        self,
        workspace: Path,
        *,
        purpose: str = "run",
        session_id: str | None = None,
        lock_dir: Path | None = None,
    ) -> None:
        try:
            self.workspace = workspace.resolve()
        except (OSError, ValueError) as error:  # a symlink loop, a NUL byte from a session file
            raise ConfigurationError(
                f"workspace {printable(str(workspace))} cannot be used: {error}"
            ) from None
        self.purpose = purpose
        self.session_id = session_id
        digest = hashlib.sha256(os.fsencode(self.workspace)).hexdigest()[:32]
        self.path = (lock_dir or default_lock_dir()) / f"{digest}.lock"
        self._taken = False

    @property
    def held(self) -> bool:
        return self._taken

    def acquire(self) -> None:
        """Take the lock, or raise `WorkspaceBusyError` naming the process that holds it."""
        if self._taken:
            return
        with _HELD_GUARD:
            shared = _HELD.get(self.path)
            if shared is not None:  # this process writes there already: share its lock
                shared.count += 1
                self._taken = True
                return
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise WorkspaceBusyError(self._refusal(holder)) from None
            except BaseException:
                os.close(fd)
                raise
            self._write_holder(fd)
            _HELD[self.path] = _Held(fd, 1)
            self._taken = True

    def release(self) -> None:
        if not self._taken:
            return
        self._taken = False
        with _HELD_GUARD:
            shared = _HELD.get(self.path)
            if shared is None:
                return
            shared.count -= 1
            if shared.count > 0:
                return
            del _HELD[self.path]
            with contextlib.suppress(OSError):
                os.ftruncate(shared.fd, 0)
            os.close(shared.fd)  # closing the descriptor drops the flock

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as error:
            raise ConfigurationError(
                f"cannot lock workspace {printable(str(self.workspace))}: {self.path}: "
                f"{error.strerror or error}"
            ) from None

    def _write_holder(self, fd: int) -> None:
        record = {
            "pid": os.getpid(),
            "since": time.time(),
            "session": self.session_id,
            "purpose": self.purpose,
            "workspace": str(self.workspace),
        }
        with contextlib.suppress(OSError):  # the record only explains a refusal
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)

    def _refusal(self, holder: dict[str, object]) -> str:
        who = f"pid {holder.get('pid', 'unknown')}"
        session = holder.get("session")
        if isinstance(session, str) and session:
            who = f"session {printable(session)}, {who}"
        since = holder.get("since")
        if isinstance(since, (int, float)) and not isinstance(since, bool):
            with contextlib.suppress(ValueError, OverflowError, OSError):
                who += time.strftime(", since %Y-%m-%d %H:%M:%S", time.localtime(since))
        purpose = holder.get("purpose")
        doing = f" ({printable(purpose)})" if isinstance(purpose, str) and purpose else ""
        return (
            f"workspace {printable(str(self.workspace))} is in use by another journeyman "
            f"process{doing}: {who}; wait for it to end or stop it, then try again"
        )

    def __enter__(self) -> WorkspaceLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, object]:
    """The holder record of a lock file; empty when it cannot be read (being written)."""
    try:
        data = json.loads(os.pread(fd, HOLDER_BYTES, 0).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
