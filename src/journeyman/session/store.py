"""The session store: one SQLite database (WAL) per session root holding every session.

Tables: sessions, messages (as the model saw them), events, steps (a small checkpoint per
step), file_changes (the undo journal), usage_logs (one row per model call, the records of
`economics.usage_log`) and remembered permissions. Writes only append: a step is one
transaction that inserts that step's messages, events, usage rows and checkpoint, so its cost
does not grow with the session, and after a crash the store holds every completed step and
never half of one. Each fact of a step is written once: a call's arguments and a result's text
are in its messages, and its events refer to them (`session.step_facts`; read back whole).

File changes are journaled on their own, before the tool writes to disk (see
`ToolContext.journal`), because the disk changes at once even if the step never completes.

Secrets never enter the database: text is redacted before it is written. The undo journal is
the one place that needs exact text (undo must restore the user's file byte for byte), so a
file version that holds a secret is written to the database redacted, and its exact text to
`vault/<change id>.before|after` next to the database (folder 0700, files 0600), read back
transparently by `file_changes()` and deleted with its session.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import sqlite3
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from journeyman.core.errors import AgentError, ConfigurationError
from journeyman.core.events import StoredEvent, UnreadableEvent, read_event
from journeyman.core.messages import Message, Usage, with_paired_results
from journeyman.core.redact import MASK, Redactor, is_secret_name
from journeyman.core.text import clip, clip_noted
from journeyman.economics.usage_log import ModelUsage, UsageRow, summarize
from journeyman.session import database
from journeyman.session.database import StoreDamagedError
from journeyman.session.lock import SessionLock
from journeyman.session.step_facts import StepFacts, message_from_row, once, refers_to_messages

DATABASE_FILE = "journeyman.db"
SCHEMA_VERSION = 4
EXPECTED_TABLES = frozenset(
    {
        "schema_version",
        "sessions",
        "messages",
        "events",
        "steps",
        "outcomes",
        "file_changes",
        "undone_changes",
        "permissions",
        "usage_logs",
    }
)
VAULT_DIR = "vault"
"""Exact text of journaled file versions that contain secrets (see the module docstring)."""


HISTORY_START = "history_start_seq"
"""Checkpoint key: seq of the first message of the current history (after a compaction)."""


SESSION_DIR_ENV = "JOURNEYMAN_SESSION_DIR"
"""The environment variable that moves the session folder."""


def default_session_root() -> Path:
    """Where sessions go unless `--session-dir` or JOURNEYMAN_SESSION_DIR says otherwise (the
    user config's `session_dir` too: `loop.config_file.session_root` weighs all of them)."""
    override = os.environ.get(SESSION_DIR_ENV)
    if override:
        return Path(override)
    return Path(platformdirs.user_data_dir("journeyman")) / "sessions"


_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        parent_id TEXT,
        forked_at_step INTEGER,
        created_at REAL NOT NULL,
        task TEXT NOT NULL,
        workspace TEXT NOT NULL,
        settings TEXT NOT NULL,
        system_prompt TEXT NOT NULL
    );
    CREATE INDEX sessions_by_workspace ON sessions (workspace, created_at);
    CREATE TABLE messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        step INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        step INTEGER NOT NULL,
        type TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE steps (
        session_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        created_at REAL NOT NULL,
        checkpoint TEXT NOT NULL,
        PRIMARY KEY (session_id, step)
    );
    CREATE TABLE outcomes (
        session_id TEXT PRIMARY KEY,
        finished_at REAL NOT NULL,
        finish_reason TEXT NOT NULL,
        final_text TEXT NOT NULL,
        error TEXT
    );
    CREATE TABLE file_changes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        path TEXT NOT NULL,
        kind TEXT NOT NULL,
        before TEXT,
        after TEXT,
        tool TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    );
    CREATE INDEX file_changes_by_session ON file_changes (session_id, id);
    CREATE TABLE undone_changes (
        change_id INTEGER PRIMARY KEY,
        undone_at REAL NOT NULL
    );
    CREATE TABLE permissions (
        project TEXT NOT NULL,
        tool TEXT NOT NULL,
        pattern TEXT NOT NULL,
        decision TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (project, tool, pattern)
    );
    """,
    2: """
    ALTER TABLE file_changes ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0
    """,
    # Databases of earlier versions already have this table (created on every open until
    # then), with the same columns: it is kept with its rows.
    3: """
    CREATE TABLE IF NOT EXISTS usage_logs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        call_index INTEGER NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cache_read_tokens INTEGER NOT NULL,
        cache_write_tokens INTEGER NOT NULL,
        cost_usd REAL,
        latency_s REAL NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS usage_logs_by_session ON usage_logs (session_id, call_index)
    """,
    # 4: no table changes. A step's tool results and call arguments are stored once, in its
    # messages; its events refer to them (see `session.step_facts`). Older versions cannot read
    # such rows, so they must refuse the store rather than call it damaged.
    4: "",
}


@dataclass(frozen=True)
class SessionRecord:
    id: str
    task: str
    workspace: str
    settings: dict[str, Any]
    """Provider, model, base URL, tool format, mode and limits — never API keys."""
    system_prompt: str
    created_at: float = field(default_factory=time.time)
    parent_id: str | None = None
    forked_at_step: int | None = None


@dataclass(frozen=True)
class SessionSummary:
    record: SessionRecord
    steps: int
    finish_reason: str | None
    """None while running, or when the process died before the run ended."""
    final_text: str
    error: str | None


@dataclass(frozen=True)
class FileChange:
    id: int
    session_id: str
    step: int
    path: str
    kind: str
    """created, modified or deleted."""
    before: str | None
    after: str | None
    tool: str
    created_at: float
    undone: bool = False
    description: str = ""
    unrecoverable: bool = False
    """The exact text of a version holding a secret is gone from the vault: `before`/`after`
    are redacted, so this change cannot be undone."""


@dataclass
class StepRecord:
    """What one completed step adds to the store."""

    step: int
    messages: Sequence[Message]
    events: Sequence[dict[str, Any]]
    checkpoint: dict[str, Any]
    usage: Sequence[UsageRow] = ()
    replaces_history: bool = False
    """The messages are the whole model-visible history (rewritten by compaction), not an
    extension of it; the earlier rows stay, and the checkpoint marks where the new ones start."""


AMBIGUOUS_SHOWN = 5
"""How many of the sessions an ambiguous id matches its error names."""


class SessionNotFoundError(ConfigurationError):
    """No session has the given id (or begins or ends with it), or several do."""


class StoreFullError(AgentError):
    """A write to the session store failed for lack of disk space."""


class SessionStore:
    def __init__(
        self,
        root: Path,
        redactor: Redactor | None = None,
        *,
        check_integrity: bool | None = None,
    ) -> None:
        """Open (creating if needed) the store in `root`. `check_integrity` runs SQLite's
        page-level check: True always, False never, None when the file is small.

        Raises `StoreDamagedError` for a file that is damaged, not a journeyman store, or not
        writable."""
        self.root = root
        self.path = root / DATABASE_FILE
        _make_root(root)
        self._db = database.connect(self.path)
        try:
            if database.should_quick_check(self.path, check_integrity):
                database.quick_check(self._db, self.path)
            self._check_ours()
            database.use_wal(self._db, self.path)
            self._migrate()
            self._check_tables()
        except BaseException:
            self._db.close()
            raise
        self._redact = redactor or Redactor()
        self._message_seq: dict[str, int] = {}
        self._event_seq: dict[str, int] = {}
        self._locks: dict[str, SessionLock] = {}

    # --- schema ---------------------------------------------------------------------------

    def _tables(self) -> set[str]:
        rows = self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {name for (name,) in rows}

    def _check_ours(self) -> None:
        """Refuse the database of another program rather than add our tables to it."""
        tables = self._tables() - {"sqlite_sequence"}
        if "schema_version" not in tables and not tables <= {"usage_logs"}:
            shown = ", ".join(sorted(tables)[:5])
            raise database.damaged(
                self.path, f"is not a journeyman session store (it holds the tables {shown})"
            )

    def _check_tables(self) -> None:
        missing = sorted(EXPECTED_TABLES - self._tables())
        if missing:
            raise database.damaged(
                self.path, f"is damaged: its schema lacks the tables {', '.join(missing)}"
            )

    def _migrate(self) -> None:
        self._db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self._db.execute("SELECT MAX(version) FROM schema_version").fetchone()
        current = row[0] or 0
        if current > SCHEMA_VERSION:
            raise ConfigurationError(
                f"the session store {self.path} was written by a newer journeyman "
                f"(schema {current} > {SCHEMA_VERSION}); upgrade journeyman to open it"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            with self._transaction():
                # another process opening the new store at the same moment may have done it
                done = self._db.execute("SELECT MAX(version) FROM schema_version").fetchone()
                if (done[0] or 0) >= version:
                    continue
                for statement in _split_sql(_MIGRATIONS[version]):
                    self._db.execute(statement)
                self._db.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
            self._db.execute("COMMIT")  # may fail too (a full disk): then nothing is kept
        except BaseException:
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            raise

    # --- writing --------------------------------------------------------------------------

    def claim(self, session_id: str) -> None:
        """Take the session's lock (see `SessionLock`) until this store is closed; raises
        `SessionBusyError` when another process is running the session."""
        if session_id not in self._locks:
            lock = SessionLock(self.root, session_id)
            lock.acquire()
            self._locks[session_id] = lock

    def create_session(self, record: SessionRecord) -> None:
        """Store a new session and claim it: this process runs it."""
        self.claim(record.id)
        with self._transaction() as db:
            db.execute(
                "INSERT INTO sessions (id, parent_id, forked_at_step, created_at, task, "
                "workspace, settings, system_prompt) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.parent_id,
                    record.forked_at_step,
                    record.created_at,
                    self._text(record.task),
                    record.workspace,
                    self._dump(record.settings),
                    self._text(record.system_prompt),
                ),
            )

    def update_settings(self, session_id: str, changes: Mapping[str, Any]) -> bool:
        """Replace the top-level keys `changes` names in a session's stored settings (a mode or
        model switched mid-session), keeping the others (an import's origin, say); False when
        the session is not stored (yet)."""
        with self._transaction() as db:
            row = db.execute("SELECT settings FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                return False
            settings = self._stored(row[0], f"the settings of session {session_id}")
            if not isinstance(settings, dict):
                settings = {}
            settings.update(changes)
            db.execute(
                "UPDATE sessions SET settings = ? WHERE id = ?", (self._dump(settings), session_id)
            )
        return True

    def record_step(self, session_id: str, step: StepRecord) -> int:
        """Append one completed step atomically; returns the seq of its first message."""
        message_seq = self._next_seq(session_id, "messages", self._message_seq)
        event_seq = self._next_seq(session_id, "events", self._event_seq)
        checkpoint = step.checkpoint
        if step.replaces_history:
            checkpoint = {**checkpoint, HISTORY_START: message_seq}
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO messages (session_id, seq, step, body) VALUES (?, ?, ?, ?)",
                [
                    (session_id, message_seq + i, step.step, self._dump(_message_row(m)))
                    for i, m in enumerate(step.messages)
                ],
            )
            events = step.events if step.replaces_history else once(step.events, step.messages)
            db.executemany(
                "INSERT INTO events (session_id, seq, step, type, body) VALUES (?, ?, ?, ?, ?)",
                [
                    (session_id, event_seq + i, step.step, _event_type(e), self._dump(_capped(e)))
                    for i, e in enumerate(events)
                ],
            )
            for row in step.usage:
                _insert_usage(db, row)
            db.execute(
                "INSERT INTO steps (session_id, step, created_at, checkpoint) VALUES (?, ?, ?, ?)",
                (session_id, step.step, time.time(), self._dump(checkpoint)),
            )
        self._message_seq[session_id] = message_seq + len(step.messages)
        self._event_seq[session_id] = event_seq + len(step.events)
        return message_seq

    def record_ahead(
        self,
        session_id: str,
        step: int,
        messages: Sequence[Message],
        events: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Messages (and events) of `step` stored before that step completes, in one
        transaction: a user's follow-up is kept even if the step never does."""
        message_seq = self._next_seq(session_id, "messages", self._message_seq)
        event_seq = self._next_seq(session_id, "events", self._event_seq)
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO messages (session_id, seq, step, body) VALUES (?, ?, ?, ?)",
                [
                    (session_id, message_seq + i, step, self._dump(_message_row(m)))
                    for i, m in enumerate(messages)
                ],
            )
            db.executemany(
                "INSERT INTO events (session_id, seq, step, type, body) VALUES (?, ?, ?, ?, ?)",
                [
                    (session_id, event_seq + i, step, _event_type(e), self._dump(_capped(e)))
                    for i, e in enumerate(events)
                ],
            )
        self._message_seq[session_id] = message_seq + len(messages)
        self._event_seq[session_id] = event_seq + len(events)

    def append_events(
        self,
        session_id: str,
        step: int,
        events: Sequence[dict[str, Any]],
        usage: Sequence[UsageRow] = (),
    ) -> None:
        """Events (and usage) that belong to no completed step, e.g. a run's closing ones."""
        event_seq = self._next_seq(session_id, "events", self._event_seq)
        try:
            with self._transaction() as db:
                db.executemany(
                    "INSERT INTO events (session_id, seq, step, type, body) VALUES (?, ?, ?, ?, ?)",
                    [
                        (session_id, event_seq + i, step, _event_type(e), self._dump(_capped(e)))
                        for i, e in enumerate(events)
                    ],
                )
                for row in usage:
                    _insert_usage(db, row)
        except sqlite3.OperationalError as failure:
            if not _out_of_space(failure):
                raise
            raise StoreFullError(
                f"the last events of session {session_id} could not be saved in {self.path}: "
                f"the disk is full ({failure}). Free some space before resuming it"
            ) from failure
        self._event_seq[session_id] = event_seq + len(events)

    def record_outcome(
        self, session_id: str, finish_reason: str, final_text: str, error: str | None
    ) -> None:
        """Store how the run ended. When the disk is full, the outcome is written to a file
        elsewhere (see `StoreFullError`) and the error raised: it is never lost silently."""
        outcome: dict[str, Any] = {
            "session_id": session_id,
            "finished_at": time.time(),
            "finish_reason": finish_reason,
            "final_text": self._text(final_text),
            "error": self._text(error) if error else None,
        }
        try:
            with self._transaction() as db:
                db.execute(
                    "INSERT OR REPLACE INTO outcomes (session_id, finished_at, finish_reason, "
                    "final_text, error) VALUES (:session_id, :finished_at, :finish_reason, "
                    ":final_text, :error)",
                    outcome,
                )
        except sqlite3.OperationalError as failure:
            if not _out_of_space(failure):
                raise
            saved = _save_outside(self.root, outcome)
            where = f"it was saved to {saved}" if saved else "no copy could be written either"
            summary = str(outcome["error"] or outcome["final_text"])
            raise StoreFullError(
                f"the outcome of session {session_id} could not be saved in {self.path}: the "
                f"disk is full ({failure}); {where}. The run ended {finish_reason}"
                + (f": {_first_line(summary)}" if summary else "")
                + ". Free some space before resuming it",
                details={"outcome": outcome, "saved_to": str(saved) if saved else None},
            ) from failure

    def clear_outcome(self, session_id: str) -> None:
        """A resumed session is running again (in this process: it is claimed first)."""
        self.claim(session_id)
        with self._transaction() as db:
            db.execute("DELETE FROM outcomes WHERE session_id = ?", (session_id,))

    def record_file_change(
        self,
        session_id: str,
        step: int,
        path: str,
        before: str | None,
        after: str | None,
        tool: str,
        description: str = "",
    ) -> int:
        kind = "created" if before is None else "deleted" if after is None else "modified"
        versions = {"before": before, "after": after}
        redacted = {
            side: None if text is None else self._redact(text) for side, text in versions.items()
        }
        sealed = [side for side in versions if redacted[side] != versions[side]]
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO file_changes (session_id, step, path, kind, before, after, tool, "
                "description, created_at, sealed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    step,
                    storable(path),
                    kind,
                    None if redacted["before"] is None else storable(redacted["before"]),
                    None if redacted["after"] is None else storable(redacted["after"]),
                    tool,
                    self._text(description),
                    time.time(),
                    int(bool(sealed)),
                ),
            )
            change_id = int(cursor.lastrowid or 0)
            for side, text in versions.items():
                # Written before COMMIT, so a committed sealed row always has its files; a
                # leftover of a rolled-back row with the same id is replaced or removed here.
                self._vault_path(change_id, side).unlink(missing_ok=True)
                if side in sealed and text is not None:
                    self._vault_write(change_id, side, text)
        return change_id

    def mark_undone(self, change_id: int) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO undone_changes (change_id, undone_at) VALUES (?, ?)",
                (change_id, time.time()),
            )

    def remember_permission(self, project: str, tool: str, pattern: str, decision: str) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO permissions (project, tool, pattern, decision, "
                "created_at) VALUES (?, ?, ?, ?, ?)",
                (project, tool, pattern, decision, time.time()),
            )

    def remembered_permissions(self, project: str) -> list[tuple[str, str, str]]:
        rows = self._db.execute(
            "SELECT tool, pattern, decision FROM permissions WHERE project = ?", (project,)
        ).fetchall()
        return [(t, p, d) for t, p, d in rows]

    def delete_session(self, session_id: str) -> None:
        with self._transaction() as db:
            for table in ("messages", "events", "steps", "outcomes", "usage_logs"):
                db.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            db.execute(
                "DELETE FROM undone_changes WHERE change_id IN "
                "(SELECT id FROM file_changes WHERE session_id = ?)",
                (session_id,),
            )
            sealed = db.execute(
                "SELECT id FROM file_changes WHERE session_id = ? AND sealed", (session_id,)
            ).fetchall()
            db.execute("DELETE FROM file_changes WHERE session_id = ?", (session_id,))
            db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        for (change_id,) in sealed:
            for side in ("before", "after"):
                self._vault_path(change_id, side).unlink(missing_ok=True)

    # --- reading --------------------------------------------------------------------------

    def matching_ids(self, text: str) -> list[tuple[str, str]]:
        """(id, workspace) of the sessions whose id is `text`, begins with it or ends with it,
        oldest first. Compared character for character: no character of `text` is a wildcard
        (`%`, `_`) or means anything else (`/`, `..`)."""
        rows = self._db.execute(
            "SELECT id, workspace FROM sessions WHERE id = ?1 OR (length(id) > ?2 AND "
            "(substr(id, 1, ?2) = ?1 OR substr(id, -?2) = ?1)) ORDER BY created_at",
            (text, len(text)),
        ).fetchall()
        return [(str(row[0]), str(row[1])) for row in rows]

    def resolve_id(self, text: str, inside: Callable[[str], bool] | None = None) -> str:
        """The full id of the one session named by `text`: its whole id, or the beginning or
        the end of it (the date, or the suffix a person types).

        `inside` (a test of a session's workspace) limits which sessions a partial id may
        name and which are counted when it names several; a whole id is returned as it is,
        for the caller to refuse if it must. Raises `SessionNotFoundError`."""
        if not text:
            raise SessionNotFoundError("no session id given")
        matches = self.matching_ids(text)
        if any(session_id == text for session_id, _ in matches):
            return text
        ids = [i for i, workspace in matches if inside is None or inside(workspace)]
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise SessionNotFoundError(f"no session {text!r} in {self.path}")
        shown = ", ".join(ids[:AMBIGUOUS_SHOWN])
        if len(ids) > AMBIGUOUS_SHOWN:
            shown += f" and {len(ids) - AMBIGUOUS_SHOWN} more"
        raise SessionNotFoundError(
            f"session id {text!r} is ambiguous: {len(ids)} sessions match ({shown}); "
            "give more of the id"
        )

    def load_session(self, session_id: str) -> SessionRecord:
        row = self._db.execute(
            "SELECT id, task, workspace, settings, system_prompt, created_at, parent_id, "
            "forked_at_step FROM sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r} in {self.path}")
        return SessionRecord(
            id=row[0],
            task=row[1],
            workspace=row[2],
            settings=self._stored(row[3], f"the settings of session {session_id}"),
            system_prompt=row[4],
            created_at=row[5],
            parent_id=row[6],
            forked_at_step=row[7],
        )

    def summary(self, session_id: str) -> SessionSummary:
        record = self.load_session(session_id)
        (steps,) = self._db.execute(
            "SELECT COALESCE(MAX(step), 0) FROM steps WHERE session_id = ?", (session_id,)
        ).fetchone()
        outcome = self._db.execute(
            "SELECT finish_reason, final_text, error FROM outcomes WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if outcome is None:
            return SessionSummary(record, steps, None, "", None)
        return SessionSummary(record, steps, outcome[0], outcome[1], outcome[2])

    def list_sessions(self, workspace: str | None = None) -> list[SessionSummary]:
        query = "SELECT id FROM sessions"
        params: tuple[str, ...] = ()
        if workspace is not None:
            query += " WHERE workspace = ?"
            params = (workspace,)
        ids = [r[0] for r in self._db.execute(query + " ORDER BY created_at", params)]
        return [self.summary(i) for i in ids]

    def subagent_ids(self, parent_id: str) -> list[str]:
        """Sessions started by `parent_id` as its subagents or swarm workers, whatever workspace
        they ran in (forks are left out: they record the step they were forked at)."""
        rows = self._db.execute(
            "SELECT id FROM sessions WHERE parent_id = ? AND forked_at_step IS NULL "
            "ORDER BY created_at",
            (parent_id,),
        )
        return [r[0] for r in rows]

    def latest_session(self, workspace: str) -> SessionRecord | None:
        row = self._db.execute(
            "SELECT id FROM sessions WHERE workspace = ? ORDER BY created_at DESC LIMIT 1",
            (workspace,),
        ).fetchone()
        return self.load_session(row[0]) if row else None

    def messages(self, session_id: str, up_to_step: int | None = None) -> list[Message]:
        """The history the model saw after `up_to_step` (default: the last completed step),
        with an error result for any tool call stored without one (older versions could leave
        such calls, which providers refuse; see `with_paired_results`)."""
        start = int(self.checkpoint(session_id, up_to_step)[1].get(HISTORY_START, 0))
        query = "SELECT body FROM messages WHERE session_id = ? AND seq >= ?"
        params: tuple[Any, ...] = (session_id, start)
        if up_to_step is not None:
            query += " AND step <= ?"
            params = (session_id, start, up_to_step)
        rows = self._db.execute(query + " ORDER BY seq", params)
        what = f"a message of session {session_id}"
        loaded = [self._stored(b, what, message_from_row) for (b,) in rows]
        return with_paired_results(loaded, keep_pending=True)[0]

    def message_rows(self, session_id: str) -> Iterator[tuple[int, int, Message]]:
        """(seq, step, message) of every stored message of the session, in order: also those
        a compaction replaced (a compacting step stores the whole rewritten history again, from
        the seq its checkpoint names as `HISTORY_START`)."""
        rows = self._db.execute(
            "SELECT seq, step, body FROM messages WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        what = f"a message of session {session_id}"
        for seq, step, body in rows:
            yield int(seq), int(step), self._stored(body, what, message_from_row)

    def events(self, session_id: str) -> Iterator[dict[str, Any]]:
        for _step, event in self.step_events(session_id):
            yield event

    def step_events(
        self, session_id: str, types: Collection[str] | None = None
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """(step, event) of every stored event of the session (of these `types` only, when
        given), in order."""
        query = "SELECT step, body FROM events WHERE session_id = ?"
        params: list[Any] = [session_id]
        if types is not None:
            query += f" AND type IN ({', '.join('?' * len(types))})"
            params += sorted(types)
        facts: StepFacts | None = None
        for step, body in self._db.execute(query + " ORDER BY seq", params):
            event = self._stored(body, f"an event of session {session_id}")
            if refers_to_messages(event):
                facts = facts or self._step_facts(session_id)
                event = facts.rejoin(int(step), event, _capped)
            yield int(step), event

    def _step_facts(self, session_id: str) -> StepFacts:
        """The calls and results of the session's messages, for events that refer to them."""
        rows = self._db.execute(
            "SELECT step, body FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        what = f"a message of session {session_id}"
        return StepFacts.of((int(step), self._stored(body, what)) for step, body in rows)

    def read_step_events(
        self,
        session_id: str,
        clean: Callable[[Any], Any] | None = None,
        types: Collection[str] | None = None,
    ) -> Iterator[tuple[int, StoredEvent | UnreadableEvent]]:
        """(step, event) of every stored event of the session (of these `types` only, when
        given), in order, read back typed; one this version cannot read (unknown type, fields
        missing or of the wrong kind) comes as an `UnreadableEvent` for the reader to skip.
        `clean` is applied to each stored record before it is read (the inspector redacts it)."""
        for step, data in self.step_events(session_id, types):
            yield step, read_event(data if clean is None else clean(data))

    def step_checkpoints(self, session_id: str) -> Iterator[tuple[int, float, dict[str, Any]]]:
        """(step, time it was stored, checkpoint) of every stored step of the session, in order."""
        rows = self._db.execute(
            "SELECT step, created_at, checkpoint FROM steps WHERE session_id = ? ORDER BY step",
            (session_id,),
        )
        for step, created_at, body in rows:
            what = f"a checkpoint of session {session_id}"
            yield int(step), float(created_at), self._stored(body, what)

    def checkpoint(self, session_id: str, step: int | None = None) -> tuple[int, dict[str, Any]]:
        """(step, checkpoint) of the given step, or of the last completed one; (0, {}) if none."""
        if step is None:
            row = self._db.execute(
                "SELECT step, checkpoint FROM steps WHERE session_id = ? "
                "ORDER BY step DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        else:
            row = self._db.execute(
                "SELECT step, checkpoint FROM steps WHERE session_id = ? AND step = ?",
                (session_id, step),
            ).fetchone()
        if row is None:
            return 0, {}
        return int(row[0]), self._stored(row[1], f"a checkpoint of session {session_id}")

    def _stored(self, body: str, what: str, build: Callable[[Any], Any] = lambda data: data) -> Any:
        """A stored JSON text read back; text that no longer parses (a damaged page SQLite's
        own checks did not see) is a damaged store, said as such, never a traceback."""
        try:
            return build(json.loads(body))
        except (ValueError, TypeError, KeyError) as error:
            problem = f"holds {what} that cannot be read ({error})"
            raise database.damaged(self.path, problem) from None

    def usage_rows(self, session_id: str | None = None) -> list[UsageRow]:
        """The usage rows of one session (or of all), in the order they were written."""
        where, params = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
        rows = self._db.execute(
            "SELECT session_id, call_index, provider, model, input_tokens, output_tokens, "
            "cache_read_tokens, cache_write_tokens, cost_usd, latency_s, created_at "
            f"FROM usage_logs {where} ORDER BY id",
            params,
        ).fetchall()
        return [
            UsageRow(sid, index, provider, model, Usage(inp, out, cread, cwrite), cost, lat, at)
            for sid, index, provider, model, inp, out, cread, cwrite, cost, lat, at in rows
        ]

    def usage_summary(self, session_id: str | None = None) -> list[ModelUsage]:
        """Calls, tokens and cost per provider and model, of one session or of all."""
        return summarize(self.usage_rows(session_id))

    def next_call_index(self, session_id: str) -> int:
        """1 + the highest call index stored for the session (1 for a new session)."""
        (highest,) = self._db.execute(
            "SELECT COALESCE(MAX(call_index), 0) FROM usage_logs WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        return int(highest) + 1

    def file_changes(self, session_id: str, *, pending_only: bool = False) -> list[FileChange]:
        rows = self._db.execute(
            "SELECT c.id, c.session_id, c.step, c.path, c.kind, c.before, c.after, c.tool, "
            "c.created_at, u.change_id IS NOT NULL, c.description, c.sealed FROM file_changes c "
            "LEFT JOIN undone_changes u ON u.change_id = c.id "
            "WHERE c.session_id = ? ORDER BY c.id",
            (session_id,),
        ).fetchall()
        changes = []
        for r in rows:
            versions: dict[str, str | None] = {"before": r[5], "after": r[6]}
            unrecoverable = False
            if r[11]:
                for side, text in versions.items():
                    exact = self._vault_read(r[0], side)
                    if exact is not None:
                        versions[side] = exact
                    elif text is not None and MASK in text:
                        unrecoverable = True
            changes.append(
                FileChange(
                    r[0],
                    r[1],
                    r[2],
                    r[3],
                    r[4],
                    versions["before"],
                    versions["after"],
                    r[7],
                    r[8],
                    bool(r[9]),
                    r[10],
                    unrecoverable,
                )
            )
        return [c for c in changes if not c.undone] if pending_only else changes

    def close(self) -> None:
        self._db.close()
        for lock in self._locks.values():
            lock.release()
        self._locks.clear()

    # --- helpers --------------------------------------------------------------------------

    def _next_seq(self, session_id: str, table: str, cache: dict[str, int]) -> int:
        if session_id not in cache:
            (highest,) = self._db.execute(
                f"SELECT COALESCE(MAX(seq), 0) FROM {table} WHERE session_id = ?", (session_id,)
            ).fetchone()
            cache[session_id] = int(highest) + 1
        return cache[session_id]

    def _vault_path(self, change_id: int, side: str) -> Path:
        return self.root / VAULT_DIR / f"{change_id}.{side}"

    def _vault_write(self, change_id: int, side: str, text: str) -> None:
        folder = self.root / VAULT_DIR
        folder.mkdir(mode=database.PRIVATE_FOLDER, exist_ok=True)
        path = self._vault_path(change_id, side)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    def _vault_read(self, change_id: int, side: str) -> str | None:
        try:
            with self._vault_path(change_id, side).open(
                encoding="utf-8", errors="surrogatepass", newline=""
            ) as handle:
                return handle.read()
        except OSError:
            return None

    def _dump(self, data: dict[str, Any]) -> str:
        """JSON text of `data`, each string in it redacted (so the text stays valid JSON), lone
        surrogates written as `\\udXXX` escapes (they load back as they were)."""
        text = json.dumps(data, ensure_ascii=False, default=str)
        if self._redact.finds(text) or _has_secret_key(text):
            text = json.dumps(self._redact.tree(data), ensure_ascii=False, default=str)
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)

    def _text(self, text: str) -> str:
        return storable(self._redact(text))


def _insert_usage(db: sqlite3.Connection, row: UsageRow) -> None:
    u = row.usage
    db.execute(
        "INSERT INTO usage_logs (session_id, call_index, provider, model, input_tokens, "
        "output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, latency_s, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            row.session_id,
            row.call_index,
            row.provider,
            row.model,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            row.cost_usd,
            row.latency_s,
            row.created_at,
        ),
    )


UNSAVED_OUTCOMES = "unsaved-outcomes"
"""Folder (in the session root, else the temp dir) for outcomes the database could not take."""


def _out_of_space(error: sqlite3.OperationalError) -> bool:
    return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "is full" in str(
        error
    )


def _save_outside(root: Path, outcome: dict[str, Any]) -> Path | None:
    """Write `outcome` as JSON (0600) in the first folder that takes it; None if none does."""
    text = json.dumps(outcome, ensure_ascii=False, indent=2) + "\n"
    for folder in (root / UNSAVED_OUTCOMES, Path(tempfile.gettempdir()) / "journeyman-outcomes"):
        path = folder / f"{outcome['session_id']}.json"
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        return path
    return None


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return clip(line, limit)


def _make_root(root: Path) -> None:
    try:
        if root.exists() and not root.is_dir():
            raise StoreDamagedError(
                f"the session folder {root} is a file; pass a folder to --session-dir (or "
                "JOURNEYMAN_SESSION_DIR)"
            )
        root.mkdir(mode=database.PRIVATE_FOLDER, parents=True, exist_ok=True)
        database.make_private(root, database.PRIVATE_FOLDER)
    except OSError as error:
        raise StoreDamagedError(
            f"cannot use the session folder {root} ({error.strerror}); pass a folder you can "
            "write to --session-dir"
        ) from error


STORED_PREVIEW_CHARS = 2_000
"""Longest text kept whole in an event, or in a tool result's metadata. Events describe what
happened (the messages table holds the full text the model saw, once) and metadata is never
sent to the model (a written file's text is in the undo journal)."""


def _capped(data: Any) -> Any:
    """`data` with every string longer than `STORED_PREVIEW_CHARS` cut to a preview that says
    how long it was."""
    if isinstance(data, str):
        return clip_noted(data, STORED_PREVIEW_CHARS, "{total:,} characters, cut when stored")
    if isinstance(data, dict):
        return {key: _capped(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_capped(item) for item in data]
    return data


def _event_type(event: Any) -> str:
    """The type column of a stored event: what it claims, "" when it claims none (an imported
    file's event may be anything; readers skip what they cannot read)."""
    tag = event.get("type") if isinstance(event, dict) else None
    return tag if isinstance(tag, str) else ""


def _message_row(message: Message) -> dict[str, Any]:
    """What is stored of a message: all of it once (a tool result's text is the message's
    content, not repeated in the result), a tool result's metadata capped."""
    row = message.to_dict()
    if "tool_result" in row:
        result = row["tool_result"]
        row["tool_result"] = {**result, "metadata": _capped(result.get("metadata") or {})}
        if result.get("content") == row["content"]:
            del row["tool_result"]["content"]
    return row


_STRING_KEY = re.compile(r'"([\w\-]{1,80})": "')


def _has_secret_key(text: str) -> bool:
    """Whether a JSON key named like a secret has a string value (`Redactor.tree` masks it)."""
    return any(is_secret_name(m.group(1)) for m in _STRING_KEY.finditer(text))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""What a str holds for bytes that were not UTF-8 (file names decoded with surrogateescape) or
half of a broken emoji in model text; SQLite's UTF-8 cannot store it."""


def storable(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD, so that SQLite can store it."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _split_sql(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


SUFFIX_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"
"""The characters of a session id's suffix: lower-case letters and digits that cannot be taken
for one another when read off a screen (no 0/o, 1/l/i)."""
SUFFIX_LENGTH = 6
"""31**6, about 900 million suffixes: two sessions of one store sharing one is unlikely enough
that a suffix names a session (if it happens, `resolve_id` lists both)."""


def new_session_id() -> str:
    """A fresh session id: its start time (so ids sort as the sessions started) and a random
    suffix a person can type to name it, e.g. `20261127-221500-k3x9qm` (see `resolve_id`).
    Earlier versions ended ids with 8 hex digits; those ids work as they are."""
    suffix = "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(SUFFIX_LENGTH))
    return time.strftime("%Y%m%d-%H%M%S") + "-" + suffix


def short_id(session_id: str) -> str:
    """The part of `session_id` after its last dash (its suffix, for one made by
    `new_session_id`), or the whole id when that part is empty."""
    return session_id.rsplit("-", 1)[-1] or session_id
