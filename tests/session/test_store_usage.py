"""Usage rows live in the session store: written with a step, read back and summed, and kept
when a database written by an earlier version (usage table made outside the migrations) opens."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from journeyman.core.messages import Usage
from journeyman.economics.usage_log import UsageRow
from journeyman.session.store import DATABASE_FILE, SCHEMA_VERSION, SessionStore, StepRecord
from tests.fakes.store import new_session, rows, step

# The schema as version 2 of the store left it: the usage table was created by the economics
# module on every open, outside the numbered migrations.
SCHEMA_2 = """
CREATE TABLE usage_logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
    call_index INTEGER NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL,
    cost_usd REAL, latency_s REAL NOT NULL, created_at REAL NOT NULL);
CREATE INDEX usage_logs_by_session ON usage_logs (session_id, call_index);
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_id TEXT, forked_at_step INTEGER,
    created_at REAL NOT NULL, task TEXT NOT NULL, workspace TEXT NOT NULL,
    settings TEXT NOT NULL, system_prompt TEXT NOT NULL);
CREATE INDEX sessions_by_workspace ON sessions (workspace, created_at);
CREATE TABLE messages (session_id TEXT NOT NULL, seq INTEGER NOT NULL, step INTEGER NOT NULL,
    body TEXT NOT NULL, PRIMARY KEY (session_id, seq));
CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, step INTEGER NOT NULL,
    type TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session_id, seq));
CREATE TABLE steps (session_id TEXT NOT NULL, step INTEGER NOT NULL, created_at REAL NOT NULL,
    checkpoint TEXT NOT NULL, PRIMARY KEY (session_id, step));
CREATE TABLE outcomes (session_id TEXT PRIMARY KEY, finished_at REAL NOT NULL,
    finish_reason TEXT NOT NULL, final_text TEXT NOT NULL, error TEXT);
CREATE TABLE file_changes (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
    step INTEGER NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL, before TEXT, after TEXT,
    tool TEXT NOT NULL, description TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL,
    sealed INTEGER NOT NULL DEFAULT 0);
CREATE INDEX file_changes_by_session ON file_changes (session_id, id);
CREATE TABLE undone_changes (change_id INTEGER PRIMARY KEY, undone_at REAL NOT NULL);
CREATE TABLE permissions (project TEXT NOT NULL, tool TEXT NOT NULL, pattern TEXT NOT NULL,
    decision TEXT NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (project, tool, pattern));
INSERT INTO schema_version (version) VALUES (1), (2);
INSERT INTO sessions VALUES ('old', NULL, NULL, 1.0, 'the task', '/ws', '{"model": "m"}', 'sys');
INSERT INTO messages VALUES ('old', 1, 0, '{"role": "user", "content": "the task"}');
INSERT INTO steps VALUES ('old', 0, 1.0, '{}');
INSERT INTO usage_logs (session_id, call_index, provider, model, input_tokens, output_tokens,
    cache_read_tokens, cache_write_tokens, cost_usd, latency_s, created_at)
    VALUES ('old', 1, 'openai', 'gpt-4.1-mini', 100, 20, 0, 0, 0.5, 0.2, 1.0);
"""


def usage_row(session: str, index: int, cost: float | None = 0.001) -> UsageRow:
    return UsageRow(session, index, "scripted", "m", Usage(10, 5), cost, 0.01, 1.0 + index)


def test_a_database_of_schema_2_opens_migrated_with_its_sessions_and_usage(
    tmp_path: Path,
) -> None:
    db = sqlite3.connect(tmp_path / DATABASE_FILE)
    db.executescript(SCHEMA_2)
    db.close()

    store = SessionStore(tmp_path)
    try:
        assert rows(store.path, "SELECT MAX(version) FROM schema_version") == [(SCHEMA_VERSION,)]
        assert store.load_session("old").task == "the task"
        assert [m.content for m in store.messages("old")] == ["the task"]
        [old] = store.usage_summary("old")
        assert (old.provider, old.calls, old.usage.input_tokens, old.cost_usd) == (
            "openai",
            1,
            100,
            0.5,
        )
        assert store.next_call_index("old") == 2
        store.record_step("old", StepRecord(1, [], [], {}, usage=[usage_row("old", 2)]))
        assert [r.call_index for r in store.usage_rows("old")] == [1, 2]
    finally:
        store.close()


def test_a_new_store_makes_the_usage_table_in_a_numbered_migration(tmp_path: Path) -> None:
    SessionStore(tmp_path).close()
    assert rows(tmp_path / DATABASE_FILE, "SELECT COUNT(*) FROM usage_logs") == [(0,)]
    versions = rows(tmp_path / DATABASE_FILE, "SELECT version FROM schema_version ORDER BY 1")
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]


def test_usage_of_steps_and_closing_events_is_read_back_and_summed(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    try:
        sid = new_session(store)
        for number in range(1, 4):
            store.record_step(sid, step(sid, number))
        store.append_events(sid, 3, [], usage=[usage_row(sid, 4, cost=None)])
        [model] = store.usage_summary(sid)
        assert (model.calls, model.usage.input_tokens, model.usage.output_tokens) == (4, 40, 20)
        assert model.cost_usd is None  # one call had no price
        assert store.next_call_index(sid) == 5
        assert store.next_call_index("other") == 1
        assert store.usage_summary("other") == []
    finally:
        store.close()


def test_a_second_store_on_the_same_file_sees_the_rows(tmp_path: Path) -> None:
    first, second = SessionStore(tmp_path), SessionStore(tmp_path)
    try:
        sid = new_session(first)
        first.record_step(sid, step(sid, 1))
        assert second.next_call_index(sid) == 2
        assert [m.calls for m in second.usage_summary()] == [1]
    finally:
        first.close()
        second.close()


def test_deleting_a_session_deletes_its_usage(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    try:
        sid = new_session(store)
        store.record_step(sid, step(sid, 1))
        store.delete_session(sid)
        assert store.usage_rows() == []
    finally:
        store.close()


@pytest.mark.parametrize("session", [None, "s1"])
def test_usage_rows_keep_every_field(tmp_path: Path, session: str | None) -> None:
    store = SessionStore(tmp_path)
    try:
        sid = new_session(store)
        row = UsageRow(sid, 7, "openai", "x", Usage(1, 2, 3, 4), 0.25, 1.5, 123.0)
        store.append_events(sid, 0, [], usage=[row])
        assert store.usage_rows(session) == [row]
    finally:
        store.close()
