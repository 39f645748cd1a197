"""Opening the session database safely: the checks that turn a damaged, foreign or unwritable
file into one clear error instead of a sqlite3 traceback.

Checked on every open: the file starts with the SQLite header and is not shorter than the page
count its header gives (truncation), the folder and file are writable, and SQLite can read the
schema. `PRAGMA quick_check` reads every page, so it runs when asked (the CLI asks before
commands that read a session's history) or when the file is small enough for it to be cheap.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from journeyman.core.errors import ConfigurationError

SQLITE_HEADER = b"SQLite format 3\x00"
QUICK_CHECK_MAX_BYTES = 16 * 1024 * 1024
"""Files up to this size get `PRAGMA quick_check` on every open (a few ms per MB)."""


class StoreDamagedError(ConfigurationError):
    """The session database cannot be used: damaged, not ours, or not writable."""


class StoreLockedError(ConfigurationError):
    """Another process held the session database locked for longer than `BUSY_WAIT_S`."""


BUSY_WAIT_S = 10.0
"""How long a statement waits for another process's lock on the store before giving up."""


def damaged(path: Path, problem: str) -> StoreDamagedError:
    return StoreDamagedError(
        f"the session store {path} {problem}. Move it aside, with its -wal and -shm files if "
        f"any (mv {path} {path}.broken), to start a new store there, or pass --session-dir to "
        "use another folder"
    )


def read_only(path: Path) -> StoreDamagedError:
    return StoreDamagedError(
        f"the session store {path} is not writable by this user; make it writable "
        f"(chmod u+w {path}) or pass --session-dir to use another folder"
    )


def _translated(path: Path, error: sqlite3.DatabaseError) -> Exception:
    # SQLite raises the plain DatabaseError for a malformed image; its subclasses (integrity,
    # lock, disk-full errors) mean something else and are left alone.
    if type(error) is sqlite3.DatabaseError:
        return damaged(path, f"is damaged ({error})")
    if isinstance(error, sqlite3.OperationalError) and "decode" in str(error):
        # the store writes only valid UTF-8: text that is not was changed on disk
        return damaged(path, "is damaged (a stored text is no longer valid UTF-8)")
    if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
        return StoreLockedError(
            f"the session store {path} stayed locked by another process for {BUSY_WAIT_S:g} s "
            "(a journeyman still writing to it, or a tool such as sqlite3 holding a "
            "transaction); end that process and try again, or pass --session-dir to use "
            "another folder"
        )
    return error


class StoreCursor(sqlite3.Cursor):
    """Rows are read lazily: damage found while fetching is reported like damage found by
    `execute`."""

    store_path: Path = Path()

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as error:
            raise _translated(self.store_path, error) from error

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as error:
            raise _translated(self.store_path, error) from error

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as error:
            raise _translated(self.store_path, error) from error


class StoreConnection(sqlite3.Connection):
    """A connection that reports a damaged file as `StoreDamagedError`, whichever query finds
    it."""

    store_path: Path = Path()
    open_key: str | None = None

    def close(self) -> None:
        with _OPEN_LOCK:
            if self.open_key is not None:
                _OPEN_IN_PROCESS[self.open_key] -= 1
                self.open_key = None
        super().close()

    def cursor(self, factory: Any = None) -> Any:
        cursor = super().cursor(factory or StoreCursor)
        cursor.store_path = self.store_path
        return cursor

    def _store_cursor(self) -> StoreCursor:
        cursor: StoreCursor = self.cursor()
        return cursor

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        cursor = self._store_cursor()
        try:
            return cursor.execute(sql, parameters)
        except sqlite3.DatabaseError as error:
            raise _translated(self.store_path, error) from error

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        cursor = self._store_cursor()
        try:
            return cursor.executemany(sql, parameters)
        except sqlite3.DatabaseError as error:
            raise _translated(self.store_path, error) from error


PRIVATE_FOLDER = 0o700
PRIVATE_FILE = 0o600
WAL_SUFFIXES = ("", "-wal", "-shm", "-journal")


def make_private(path: Path, mode: int) -> None:
    """Give `path` (if it exists and is ours) exactly `mode` when others could read it: the
    store holds task texts, file contents and settings."""
    try:
        info = path.stat()
        if info.st_uid == os.geteuid() and info.st_mode & 0o077:
            path.chmod(mode)
    except OSError:
        pass  # missing, or not ours: the open that follows reports what matters


def private_database_files(path: Path) -> None:
    """Create the database file 0600 (SQLite gives its -wal and -shm files the same mode) and
    tighten existing ones left readable by others."""
    if not path.exists():
        with contextlib.suppress(OSError):  # check_file says why it cannot be created
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    for suffix in WAL_SUFFIXES:
        make_private(path.with_name(path.name + suffix), PRIVATE_FILE)


def check_file(path: Path) -> None:
    """Refuse a file that is not a SQLite database, or shorter than its header says."""
    if not path.exists():
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise read_only(path.parent)
        return
    if path.is_dir():
        raise damaged(path, "is a folder, not a database file")
    if not os.access(path, os.R_OK | os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
        raise read_only(path)
    size = path.stat().st_size
    if size == 0:  # SQLite treats an empty file as a new database
        return
    with path.open("rb") as handle:
        header = handle.read(100)
    if not header.startswith(SQLITE_HEADER):
        raise damaged(path, "is not a SQLite database (its first bytes are not a SQLite header)")
    if len(header) < 100:
        raise damaged(path, f"is truncated ({size} bytes, shorter than a SQLite header)")
    declared = _declared_size(header)
    for _ in range(TRUNCATION_RECHECKS):
        if size >= declared:
            return
        # Another process may be checkpointing: it writes the header's new page count before
        # the pages that extend the file. Truncation that lasts is damage; a moment's is not.
        time.sleep(TRUNCATION_RECHECK_S)
        with path.open("rb") as handle:
            declared = _declared_size(handle.read(100))
        size = path.stat().st_size
    if size < declared:
        raise damaged(path, f"is truncated ({size:,} bytes; its header says {declared:,})")


TRUNCATION_RECHECKS = 10
TRUNCATION_RECHECK_S = 0.02


def _declared_size(header: bytes) -> int:
    """The file size a SQLite header gives (0 when its page count is not kept up to date)."""
    if len(header) < 100:
        return 0
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96]  # the page count is kept up to date
    return pages * page_size if header_valid else 0


_OPEN_IN_PROCESS: Counter[str] = Counter()
"""Connections of this process to each database file. Closing any descriptor of a file drops
every POSIX lock the process holds on it — SQLite's included — so `check_file` must not open
a file this process already has a connection to: another process would then take the store
for unused, checkpoint it and remove its WAL under the live connection ("malformed")."""
_OPEN_LOCK = threading.Lock()


def connect(path: Path) -> StoreConnection:
    """Open the database after `check_file` (and `private_database_files`); SQLite's own
    refusals become `StoreDamagedError`."""
    key = str(path.resolve())
    with _OPEN_LOCK:
        if not _OPEN_IN_PROCESS[key]:  # already open here: it was checked then
            check_file(path)
        private_database_files(path)  # opens only a file that does not exist yet
        try:
            connection = sqlite3.connect(
                path, timeout=BUSY_WAIT_S, isolation_level=None, factory=StoreConnection
            )
        except sqlite3.OperationalError as error:
            raise damaged(path, f"cannot be opened ({error})") from error
        _OPEN_IN_PROCESS[key] += 1
        connection.open_key = key
    connection.store_path = path
    try:
        connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except (StoreDamagedError, StoreLockedError):
        connection.close()
        raise
    except sqlite3.OperationalError as error:
        connection.close()
        raise damaged(path, f"cannot be opened ({error})") from error
    return connection


def use_wal(connection: StoreConnection, path: Path) -> None:
    """Switch to WAL, once the file is known to be ours (the switch rewrites its header)."""
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.OperationalError as error:
        if "readonly" in str(error):
            raise read_only(path) from error
        raise damaged(path, f"cannot be opened ({error})") from error


def quick_check(connection: StoreConnection, path: Path) -> None:
    """SQLite's page-level consistency check; raises `StoreDamagedError` naming the first
    problem."""
    try:
        rows = connection.execute("PRAGMA quick_check(5)").fetchall()
    except sqlite3.OperationalError as error:
        raise damaged(path, f"fails SQLite's consistency check ({error})") from error
    lines = [line for (text,) in rows for line in str(text).splitlines()]
    found = [line.strip() for line in lines if line.strip() and not line.startswith("***")]
    if found != ["ok"]:
        raise damaged(path, f"is damaged (SQLite's consistency check: {'; '.join(found)})")


def should_quick_check(path: Path, requested: bool | None) -> bool:
    if requested is not None:
        return requested
    try:
        return path.stat().st_size <= QUICK_CHECK_MAX_BYTES
    except OSError:
        return False
