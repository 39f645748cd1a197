"""Per-call usage rows in SQLite (`usage_logs`), one database file per session root.

The table definition lives here; the session store (a later layer) opens the same database
file and adopts this table rather than defining its own.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.core.messages import Usage

DATABASE_FILE = "journeyman.db"

USAGE_LOGS_DDL = """
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
CREATE INDEX IF NOT EXISTS usage_logs_by_session ON usage_logs (session_id, call_index);
"""


@dataclass(frozen=True)
class UsageRow:
    session_id: str
    call_index: int
    provider: str
    model: str
    usage: Usage
    cost_usd: float | None
    """None when the model's price is unknown."""
    latency_s: float
    created_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class ModelUsage:
    """Usage of one provider/model, summed over the selected rows."""

    provider: str
    model: str
    calls: int
    usage: Usage
    cost_usd: float | None
    """None when any of the calls could not be priced."""


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the database with the settings every writer uses."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.executescript(USAGE_LOGS_DDL)
    return connection


def insert_usage(db: sqlite3.Connection, row: UsageRow) -> None:
    """Insert one row; inside the caller's transaction when it has one open."""
    u = row.usage
    db.execute(
        "INSERT INTO usage_logs (session_id, call_index, provider, model, input_tokens,"
        " output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, latency_s,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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


class UsageLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = connect(path)

    def append(self, row: UsageRow) -> None:
        insert_usage(self._db, row)

    def next_call_index(self, session_id: str) -> int:
        """1 + the highest call index stored for the session (1 for a new session)."""
        (highest,) = self._db.execute(
            "SELECT COALESCE(MAX(call_index), 0) FROM usage_logs WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        return int(highest) + 1

    def summary(self, session_id: str | None = None) -> list[ModelUsage]:
        where, params = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
        rows = self._db.execute(
            "SELECT provider, model, COUNT(*), SUM(input_tokens), SUM(output_tokens),"
            " SUM(cache_read_tokens), SUM(cache_write_tokens), SUM(cost_usd),"
            f" SUM(cost_usd IS NULL) FROM usage_logs {where}"
            " GROUP BY provider, model ORDER BY provider, model",
            params,
        ).fetchall()
        return [
            ModelUsage(
                provider=provider,
                model=model,
                calls=calls,
                usage=Usage(inp, out, cread, cwrite),
                cost_usd=None if unpriced else float(cost or 0.0),
            )
            for provider, model, calls, inp, out, cread, cwrite, cost, unpriced in rows
        ]

    def close(self) -> None:
        self._db.close()
