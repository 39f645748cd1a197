"""Where a swarm's shared state is kept between processes: one protocol, several stores.

Every adapter stores JSON objects (dicts) under keys. A key is one or more segments joined by
"/", each made of letters, digits, ".", "_" and "-" and starting with a letter or digit, at
most 200 characters in all; anything else (``..``, absolute paths, empty segments, spaces) is
refused with `InvalidKeyError`, so a key can never name a file outside the adapter's directory.

- `JSONFilePersistenceAdapter`: one ``.json`` file per key under a directory; each save writes
  a temporary file beside the target and renames it over, so a reader sees the old or the new
  object, never half of one. For development and debugging.
- `SQLitePersistenceAdapter`: one table in a SQLite database in WAL mode with a busy timeout,
  safe for several processes writing at once.
- `RedisPersistenceAdapter` (``redis_adapter.py``, needs the ``redis`` extra): workers on
  several machines.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from journeyman.core.errors import AgentError, ErrorCategory

MAX_KEY_CHARS = 200
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*")


class PersistenceError(AgentError):
    """Shared state could not be saved or loaded."""

    default_category = ErrorCategory.INTERNAL


class InvalidKeyError(PersistenceError, ValueError):
    """A key that is not allowed (it could escape the store, or is empty or too long)."""

    default_category = ErrorCategory.CONFIGURATION


class CorruptRecordError(PersistenceError):
    """A stored record is not a JSON object any more."""


@runtime_checkable
class PersistenceAdapter(Protocol):
    """Keeps JSON objects under string keys."""

    def save(self, key: str, value: Mapping[str, Any]) -> None:
        """Store `value` under `key`, replacing what was there."""
        ...

    def load(self, key: str) -> dict[str, Any] | None:
        """The object under `key`, or None when there is none."""
        ...

    def list_keys(self, prefix: str = "") -> list[str]:
        """Every key starting with `prefix`, sorted."""
        ...

    def delete(self, key: str) -> bool:
        """Remove `key`; whether it was there."""
        ...

    def exists(self, key: str) -> bool: ...


def validate_key(key: object) -> str:
    """`key` if it is allowed, else `InvalidKeyError` saying why."""
    if not isinstance(key, str):
        raise InvalidKeyError(f"a persistence key must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidKeyError("a persistence key may not be empty")
    if len(key) > MAX_KEY_CHARS:
        raise InvalidKeyError(
            f"persistence key is {len(key)} characters long; the limit is {MAX_KEY_CHARS}"
        )
    if _KEY.fullmatch(key) is None:
        raise InvalidKeyError(
            f"persistence key {key[:80]!r} is not allowed: use segments of letters, digits, "
            "'.', '_' and '-' joined by '/', each starting with a letter or digit (no '..', "
            "no leading '/', no spaces)"
        )
    return key


def encode_value(key: str, value: Mapping[str, Any]) -> str:
    """`value` as compact JSON, or `PersistenceError` if it is not a JSON object."""
    if not isinstance(value, Mapping):
        raise PersistenceError(
            f"cannot save {key!r}: the value must be a dict, got {type(value).__name__}"
        )
    try:
        return json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise PersistenceError(
            f"cannot save {key!r}: the value is not plain JSON ({error}); keep to dicts, "
            "lists, strings, finite numbers, booleans and None"
        ) from None


def decode_value(key: str, text: str | bytes, where: str) -> dict[str, Any]:
    """The object stored as `text`, or `CorruptRecordError` naming `key` and `where`."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise CorruptRecordError(
            f"{key!r} in {where} is damaged: not valid JSON ({error}); delete it or save it again"
        ) from None
    if not isinstance(value, dict):
        raise CorruptRecordError(
            f"{key!r} in {where} is damaged: a JSON object was expected, found "
            f"{type(value).__name__}; delete it or save it again"
        )
    return value


class JSONFilePersistenceAdapter:
    """One ``<key>.json`` file per key under `directory` (created when missing)."""

    SUFFIX = ".json"

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).resolve()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise PersistenceError(
                f"cannot create the state directory {self.directory}: {error.strerror or error}"
            ) from None

    def path_of(self, key: str) -> Path:
        path = (self.directory / (validate_key(key) + self.SUFFIX)).resolve()
        if not path.is_relative_to(self.directory):  # a symlinked folder pointing outside
            raise InvalidKeyError(f"persistence key {key!r} leads outside {self.directory}")
        return path

    def save(self, key: str, value: Mapping[str, Any]) -> None:
        text = encode_value(key, value)
        path = self.path_of(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(
                prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
            )
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as file:
                    file.write(text)
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temporary, path)
            except BaseException:
                with _suppress_os_error():
                    os.unlink(temporary)
                raise
        except OSError as error:
            raise PersistenceError(
                f"cannot save {key!r} to {path}: {error.strerror or error}"
            ) from None

    def load(self, key: str) -> dict[str, Any] | None:
        path = self.path_of(key)
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise PersistenceError(
                f"cannot read {key!r} from {path}: {error.strerror or error}"
            ) from None
        return decode_value(key, text, str(path))

    def list_keys(self, prefix: str = "") -> list[str]:
        keys: list[str] = []
        for path in self.directory.rglob(f"*{self.SUFFIX}"):
            if not path.is_file():
                continue
            key = path.relative_to(self.directory).as_posix()[: -len(self.SUFFIX)]
            if key.startswith(prefix) and _KEY.fullmatch(key) and len(key) <= MAX_KEY_CHARS:
                keys.append(key)
        return sorted(keys)

    def delete(self, key: str) -> bool:
        path = self.path_of(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as error:
            raise PersistenceError(
                f"cannot delete {key!r} ({path}): {error.strerror or error}"
            ) from None
        return True

    def exists(self, key: str) -> bool:
        return self.path_of(key).is_file()


class _suppress_os_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, OSError)


BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another process's write to finish before giving up."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS shared_state (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID
"""


class SQLitePersistenceAdapter:
    """Keys in one table of a SQLite database (WAL mode), shared by threads and processes.

    Each save is a single upsert, so concurrent writers from several processes never lose one
    another's keys; `update` reads, changes and writes one key under a write lock for
    read-modify-write cycles. One adapter may be used from several threads (it serialises its
    own calls); each process opens its own.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = BUSY_TIMEOUT_MS):
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout_ms / 1000, isolation_level=None,
                check_same_thread=False,
            )  # fmt: skip
        except (OSError, sqlite3.Error) as error:
            raise PersistenceError(f"cannot open the state database {self.path}: {error}") from None
        try:
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._retry_busy(lambda: self._db.execute("PRAGMA journal_mode = WAL"))
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._retry_busy(lambda: self._db.execute(_SCHEMA))
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise PersistenceError(
                f"{self.path} is not a usable SQLite database ({error}); move it away or pass "
                "another path"
            ) from None

    @staticmethod
    def _retry_busy(action: Callable[[], object], attempts: int = 50) -> None:
        # Switching to WAL needs a moment alone with the file; the busy handler does not
        # always cover it when several processes open a new database at once.
        for attempt in range(attempts):
            try:
                action()
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or attempt == attempts - 1:
                    raise
                time.sleep(0.02 * (attempt + 1))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLitePersistenceAdapter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _run(self, what: str, action: Callable[[sqlite3.Connection], Any]) -> Any:
        with self._lock:
            try:
                return action(self._db)
            except sqlite3.Error as error:
                raise PersistenceError(f"{what} in {self.path} failed: {error}") from None

    def save(self, key: str, value: Mapping[str, Any]) -> None:
        text = encode_value(validate_key(key), value)
        self._run(
            f"saving {key!r}",
            lambda db: db.execute(
                "INSERT INTO shared_state (key, value, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at",
                (key, text, time.time()),
            ),
        )

    def load(self, key: str) -> dict[str, Any] | None:
        validate_key(key)
        row = self._run(
            f"loading {key!r}",
            lambda db: db.execute(
                "SELECT value FROM shared_state WHERE key = ?", (key,)
            ).fetchone(),
        )
        if row is None:
            return None
        return decode_value(key, row[0], str(self.path))

    def update(
        self, key: str, change: Callable[[dict[str, Any] | None], Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Read `key`, pass it to `change`, store what it returns: all under one write lock,
        so concurrent updates from several processes are applied one after the other."""
        validate_key(key)

        def transaction(db: sqlite3.Connection) -> dict[str, Any]:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute("SELECT value FROM shared_state WHERE key = ?", (key,)).fetchone()
                current = None if row is None else decode_value(key, row[0], str(self.path))
                new = dict(change(current))
                db.execute(
                    "INSERT INTO shared_state (key, value, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
                    "updated_at = excluded.updated_at",
                    (key, encode_value(key, new), time.time()),
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return new

        result: dict[str, Any] = self._run(f"updating {key!r}", transaction)
        return result

    def list_keys(self, prefix: str = "") -> list[str]:
        rows = self._run(
            "listing keys",
            lambda db: db.execute(
                "SELECT key FROM shared_state WHERE substr(key, 1, ?) = ? ORDER BY key",
                (len(prefix), prefix),
            ).fetchall(),
        )
        return [row[0] for row in rows]

    def delete(self, key: str) -> bool:
        validate_key(key)
        cursor = self._run(
            f"deleting {key!r}",
            lambda db: db.execute("DELETE FROM shared_state WHERE key = ?", (key,)),
        )
        return bool(cursor.rowcount)

    def exists(self, key: str) -> bool:
        validate_key(key)
        row = self._run(
            f"looking up {key!r}",
            lambda db: db.execute("SELECT 1 FROM shared_state WHERE key = ?", (key,)).fetchone(),
        )
        return row is not None
