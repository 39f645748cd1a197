"""One session's rows as a plain value, to carry it between session stores on different
machines: `export_session` reads them, `merge_session` writes them into another store.

A batch task on a Ray worker runs against a store of the worker's own; its session's rows
travel back with the task's outcome and are merged into the batch's store. A resumed task
travels the other way first: the driver's rows seed the worker's empty store.

Merging is idempotent and never silent about a conflict:
- the append-only rows (messages, events and steps by their keys; usage rows and the undo
  journal by their position in the session) already in the target must be exactly the ones
  shipped; a row the target holds that the shipment lacks, or holds differently, raises
  `SessionMergeError` and nothing is written (one transaction);
- the session's record (its settings and workspace) and its outcome are the state the latest
  run left: the shipment's replaces the target's, once its fixed columns (parent, creation
  time, task, system prompt) are checked equal.
Merging the same shipment twice therefore changes nothing the second time.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any

from journeyman.core.errors import AgentError
from journeyman.session.store import SessionNotFoundError, SessionStore

Row = tuple[Any, ...]

SESSION_COLUMNS = (
    "id, parent_id, forked_at_step, created_at, task, workspace, settings, system_prompt"
)
FIXED_SESSION_FIELDS = {
    0: "id",
    1: "parent_id",
    2: "forked_at_step",
    3: "created_at",
    4: "task",
    7: "system_prompt",
}
"""Columns of the session's record that no later run changes (by index in `SESSION_COLUMNS`)."""
KEYED_TABLES: dict[str, tuple[str, str]] = {
    "messages": ("seq", "seq, step, body"),
    "events": ("seq", "seq, step, type, body"),
    "steps": ("step", "step, created_at, checkpoint"),
}
"""Append-only tables whose rows have a key within the session: (key column, columns)."""
OUTCOME_COLUMNS = "finished_at, finish_reason, final_text, error"
CHANGE_COLUMNS = "step, path, kind, before, after, tool, description, created_at, sealed"
USAGE_COLUMNS = (
    "call_index, provider, model, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, cost_usd, latency_s, created_at"
)


class SessionMergeError(AgentError):
    """A shipped session's rows disagree with what the target store already holds."""


@dataclass(frozen=True)
class SessionRows:
    """Everything a store holds for one session (plain values: it pickles)."""

    session_id: str
    session: Row
    """The `sessions` row, columns as `SESSION_COLUMNS`."""
    keyed: dict[str, list[Row]]
    """messages, events and steps rows, in key order (columns as `KEYED_TABLES`)."""
    outcome: Row | None
    file_changes: list[Row]
    """The undo journal in the order it was written (columns as `CHANGE_COLUMNS`)."""
    undone: dict[int, float] = field(default_factory=dict)
    """Position in `file_changes` → when that change was undone."""
    vault: dict[tuple[int, str], str] = field(default_factory=dict)
    """(position in `file_changes`, "before"|"after") → the exact text of a sealed version."""
    usage: list[Row] = field(default_factory=list)
    """One row per model call, in the order they were written (columns as `USAGE_COLUMNS`)."""
    usage_from: int = 0
    """How many of `usage` the store already held when this copy of the session started
    running (the rows it was seeded with): the calls after them are this run's."""


def export_session(store: SessionStore, session_id: str, *, usage_from: int = 0) -> SessionRows:
    """The rows `store` holds for `session_id` (raises `SessionNotFoundError` without any)."""
    db, sid = store._db, session_id
    session = db.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (sid,))
    record = session.fetchone()
    if record is None:
        raise SessionNotFoundError(f"no session {session_id} in {store.path}")
    keyed = {
        table: _rows(db, f"SELECT {columns} FROM {table} WHERE session_id = ? ORDER BY {key}", sid)
        for table, (key, columns) in KEYED_TABLES.items()
    }
    outcome = db.execute(
        f"SELECT {OUTCOME_COLUMNS} FROM outcomes WHERE session_id = ?", (session_id,)
    ).fetchone()
    changes = _rows(
        db,
        f"SELECT id, {CHANGE_COLUMNS} FROM file_changes WHERE session_id = ? ORDER BY id",
        session_id,
    )
    undone_at = dict(
        db.execute(
            "SELECT u.change_id, u.undone_at FROM undone_changes u JOIN file_changes c "
            "ON c.id = u.change_id WHERE c.session_id = ?",
            (session_id,),
        ).fetchall()
    )
    undone: dict[int, float] = {}
    vault: dict[tuple[int, str], str] = {}
    for position, change in enumerate(changes):
        change_id, sealed = change[0], change[-1]
        if change_id in undone_at:
            undone[position] = undone_at[change_id]
        for side in ("before", "after") if sealed else ():
            text = store._vault_read(change_id, side)
            if text is not None:
                vault[(position, side)] = text
    usage = _rows(
        db, f"SELECT {USAGE_COLUMNS} FROM usage_logs WHERE session_id = ? ORDER BY id", session_id
    )
    return SessionRows(
        session_id=session_id,
        session=tuple(record),
        keyed=keyed,
        outcome=None if outcome is None else tuple(outcome),
        file_changes=[change[1:] for change in changes],
        undone=undone,
        vault=vault,
        usage=usage,
        usage_from=usage_from,
    )


def _rows(db: sqlite3.Connection, sql: str, session_id: str) -> list[Row]:
    return [tuple(row) for row in db.execute(sql, (session_id,)).fetchall()]


def with_workspace(rows: SessionRows, workspace: str) -> SessionRows:
    """`rows` with the session's record naming `workspace` (where the copy that receives it
    keeps the task's files)."""
    session = list(rows.session)
    session[5] = workspace
    return replace(rows, session=tuple(session))


@dataclass(frozen=True)
class MergeReport:
    """What a merge added (all zeros: the target already held the shipment)."""

    added: dict[str, int]

    @property
    def changed(self) -> bool:
        return any(self.added.values())


def merge_session(store: SessionStore, rows: SessionRows) -> MergeReport:
    """Write `rows` into `store` (see the module docstring); one transaction, all or nothing.
    Raises `SessionMergeError` on a conflict."""
    sid = rows.session_id
    added: dict[str, int] = {}
    vault_writes: list[tuple[int, str, str]] = []
    with store._transaction() as db:
        added["sessions"] = _merge_record(db, rows)
        for table, (key, columns) in KEYED_TABLES.items():
            added[table] = _merge_keyed(db, sid, table, key, columns, rows.keyed.get(table, []))
        added["outcomes"] = _merge_outcome(db, rows)
        added["file_changes"], vault_writes = _merge_changes(db, rows)
        added["usage_logs"] = _merge_usage(db, rows)
    for change_id, side, text in vault_writes:
        store._vault_write(change_id, side, text)
    return MergeReport(added)


def _merge_record(db: sqlite3.Connection, rows: SessionRows) -> int:
    sid = rows.session_id
    if rows.session[0] != sid:
        raise SessionMergeError(f"the shipped record is of session {rows.session[0]}, not {sid}")
    found = db.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (sid,)).fetchone()
    if found is None:
        marks = ", ".join("?" * len(rows.session))
        db.execute(f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({marks})", rows.session)
        return 1
    for index, name in FIXED_SESSION_FIELDS.items():
        if found[index] != rows.session[index]:
            raise SessionMergeError(
                f"session {sid}: the store's record and the shipped one differ in {name}; "
                "they are not the same session"
            )
    if tuple(found) == rows.session:
        return 0
    db.execute(
        "UPDATE sessions SET workspace = ?, settings = ? WHERE id = ?",
        (rows.session[5], rows.session[6], sid),
    )
    return 1


def _merge_keyed(
    db: sqlite3.Connection, sid: str, table: str, key: str, columns: str, shipped: list[Row]
) -> int:
    query = f"SELECT {columns} FROM {table} WHERE session_id = ?"
    held = {row[0]: row for row in _rows(db, query, sid)}
    incoming = {row[0]: row for row in shipped}
    for value, row in held.items():
        if value not in incoming:
            raise SessionMergeError(
                f"session {sid}: the store holds {table} {key} {value}, which the shipped copy "
                "lacks (the shipment is older than the store)"
            )
        if incoming[value] != row:
            raise SessionMergeError(
                f"session {sid}: {table} {key} {value} differs between the store and the "
                "shipped copy"
            )
    new = [row for value, row in incoming.items() if value not in held]
    marks = ", ".join("?" * (len(columns.split(",")) + 1))
    db.executemany(
        f"INSERT INTO {table} (session_id, {columns}) VALUES ({marks})",
        [(sid, *row) for row in new],
    )
    return len(new)


def _merge_outcome(db: sqlite3.Connection, rows: SessionRows) -> int:
    sid = rows.session_id
    found = db.execute(
        f"SELECT {OUTCOME_COLUMNS} FROM outcomes WHERE session_id = ?", (sid,)
    ).fetchone()
    if (None if found is None else tuple(found)) == rows.outcome:
        return 0
    db.execute("DELETE FROM outcomes WHERE session_id = ?", (sid,))
    if rows.outcome is not None:
        db.execute(
            f"INSERT INTO outcomes (session_id, {OUTCOME_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
            (sid, *rows.outcome),
        )
    return 1


def _merge_changes(
    db: sqlite3.Connection, rows: SessionRows
) -> tuple[int, list[tuple[int, str, str]]]:
    sid = rows.session_id
    held = _rows(
        db,
        f"SELECT id, {CHANGE_COLUMNS} FROM file_changes WHERE session_id = ? ORDER BY id",
        sid,
    )
    _check_prefix(sid, "undo journal entries", [row[1:] for row in held], rows.file_changes)
    ids = [row[0] for row in held]
    vault: list[tuple[int, str, str]] = []
    marks = ", ".join("?" * (len(CHANGE_COLUMNS.split(",")) + 1))
    for position in range(len(held), len(rows.file_changes)):
        cursor = db.execute(
            f"INSERT INTO file_changes (session_id, {CHANGE_COLUMNS}) VALUES ({marks})",
            (sid, *rows.file_changes[position]),
        )
        change_id = int(cursor.lastrowid or 0)
        ids.append(change_id)
        for side in ("before", "after"):
            text = rows.vault.get((position, side))
            if text is not None:
                vault.append((change_id, side, text))
    for position, undone_at in rows.undone.items():
        if not 0 <= position < len(ids):
            raise SessionMergeError(f"session {sid}: an undo mark names no journal entry")
        db.execute(
            "INSERT OR IGNORE INTO undone_changes (change_id, undone_at) VALUES (?, ?)",
            (ids[position], undone_at),
        )
    return len(rows.file_changes) - len(held), vault


def _merge_usage(db: sqlite3.Connection, rows: SessionRows) -> int:
    sid = rows.session_id
    held = _rows(
        db, f"SELECT {USAGE_COLUMNS} FROM usage_logs WHERE session_id = ? ORDER BY id", sid
    )
    _check_prefix(sid, "usage rows", held, rows.usage)
    marks = ", ".join("?" * (len(USAGE_COLUMNS.split(",")) + 1))
    new = rows.usage[len(held) :]
    db.executemany(
        f"INSERT INTO usage_logs (session_id, {USAGE_COLUMNS}) VALUES ({marks})",
        [(sid, *row) for row in new],
    )
    return len(new)


def _check_prefix(sid: str, what: str, held: list[Row], shipped: list[Row]) -> None:
    """The store's rows must be the first of the shipped ones, exactly."""
    if len(held) > len(shipped):
        raise SessionMergeError(
            f"session {sid}: the store holds {len(held)} {what}, the shipped copy only "
            f"{len(shipped)} (the shipment is older than the store)"
        )
    for position, row in enumerate(held):
        if shipped[position] != row:
            raise SessionMergeError(
                f"session {sid}: {what} number {position + 1} differs between the store and "
                "the shipped copy"
            )


@dataclass(frozen=True)
class RowsSpending:
    """Dollars and tokens the usage rows of a shipment count."""

    usd: float
    tokens: int


def rows_spending(rows: SessionRows, *, this_run_only: bool = True) -> RowsSpending:
    """What the shipped usage rows count: the calls of the run that shipped them (after the
    `usage_from` rows it was seeded with), or with `this_run_only=False` the whole session's.
    Tokens are input + output + cache reads and writes, as `Usage.total_tokens` counts them."""
    chosen = rows.usage[rows.usage_from :] if this_run_only else rows.usage
    usd = 0.0
    tokens = 0
    for row in chosen:
        _index, _provider, _model, inp, out, cread, cwrite, cost, _latency, _at = row
        usd += cost or 0.0
        tokens += int(inp) + int(out) + int(cread) + int(cwrite)
    return RowsSpending(usd, tokens)


__all__ = [
    "MergeReport",
    "RowsSpending",
    "SessionMergeError",
    "SessionRows",
    "export_session",
    "merge_session",
    "rows_spending",
    "with_workspace",
]
