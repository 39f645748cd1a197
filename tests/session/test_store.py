"""The SQLite session store: schema versions, one transaction per step, WAL, append-only rows,
remembered permissions, deletion, and the usage log sharing the database file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message
from journeyman.session import store as store_module
from journeyman.session.store import (
    DATABASE_FILE,
    HISTORY_START,
    SCHEMA_VERSION,
    SessionRecord,
    SessionStore,
    StepRecord,
)
from tests.fakes.store import new_session, rows, step

TABLES_WITH_SESSION_ID = ("messages", "events", "steps", "outcomes", "file_changes", "usage_logs")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = SessionStore(tmp_path / "sessions")
    yield opened
    opened.close()


# --- schema ---------------------------------------------------------------------------------


def test_a_new_store_is_at_the_current_schema_in_wal_mode(store: SessionStore) -> None:
    assert rows(store.path, "SELECT MAX(version) FROM schema_version") == [(SCHEMA_VERSION,)]
    assert rows(store.path, "PRAGMA journal_mode") == [("wal",)]
    tables = {name for (name,) in rows(store.path, "SELECT name FROM sqlite_master")}
    assert {"sessions", "messages", "events", "steps", "file_changes", "permissions"} <= tables
    assert "usage_logs" in tables


def test_reopening_does_not_migrate_again(tmp_path: Path) -> None:
    SessionStore(tmp_path).close()
    SessionStore(tmp_path).close()
    assert rows(tmp_path / DATABASE_FILE, "SELECT version FROM schema_version") == [
        (version,) for version in range(1, SCHEMA_VERSION + 1)
    ]


def test_a_database_from_before_sessions_is_migrated_and_keeps_its_usage_rows(
    tmp_path: Path,
) -> None:
    # the usage table existed before the session store did: schema version 0
    db = sqlite3.connect(tmp_path / DATABASE_FILE)
    db.executescript(SCHEMA_0_USAGE_ONLY)
    db.close()

    store = SessionStore(tmp_path)
    new_session(store)
    assert rows(store.path, "SELECT MAX(version) FROM schema_version") == [(SCHEMA_VERSION,)]
    [old] = store.usage_summary("old")
    store.close()
    assert (old.calls, old.usage.input_tokens, old.cost_usd) == (1, 100, 0.5)


SCHEMA_0_USAGE_ONLY = """
CREATE TABLE usage_logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
    call_index INTEGER NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL,
    cost_usd REAL, latency_s REAL NOT NULL, created_at REAL NOT NULL);
CREATE INDEX usage_logs_by_session ON usage_logs (session_id, call_index);
INSERT INTO usage_logs (session_id, call_index, provider, model, input_tokens, output_tokens,
    cache_read_tokens, cache_write_tokens, cost_usd, latency_s, created_at)
    VALUES ('old', 1, 'openai', 'gpt-4.1-mini', 100, 20, 0, 0, 0.5, 0.2, 1.0);
"""


def test_a_store_written_by_a_newer_version_is_refused_with_a_clear_error(
    tmp_path: Path,
) -> None:
    SessionStore(tmp_path).close()
    db = sqlite3.connect(tmp_path / DATABASE_FILE)
    db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    with pytest.raises(ConfigurationError, match=r"newer journeyman .*upgrade journeyman"):
        SessionStore(tmp_path)


def test_an_older_store_is_migrated_step_by_step_keeping_its_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = SessionStore(tmp_path)
    new_session(old)
    old.record_step("s1", step("s1", 1))
    old.close()

    upgraded = SCHEMA_VERSION + 1
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", upgraded)
    monkeypatch.setitem(
        store_module._MIGRATIONS,
        upgraded,
        "ALTER TABLE sessions ADD COLUMN label TEXT NOT NULL DEFAULT '';"
        "CREATE TABLE bookmarks (session_id TEXT NOT NULL, step INTEGER NOT NULL)",
    )
    store = SessionStore(tmp_path)
    try:
        assert [v for (v,) in rows(store.path, "SELECT version FROM schema_version")] == list(
            range(1, upgraded + 1)
        )
        assert rows(store.path, "SELECT id, label FROM sessions") == [("s1", "")]
        assert [m.content for m in store.messages("s1")] == ["reading f1", "contents 1"]
    finally:
        store.close()


def test_a_failing_migration_leaves_the_store_at_its_old_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    SessionStore(tmp_path).close()
    upgraded = SCHEMA_VERSION + 1
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", upgraded)
    monkeypatch.setitem(
        store_module._MIGRATIONS,
        upgraded,
        "CREATE TABLE half_done (x INTEGER); ALTER TABLE no_such_table ADD COLUMN y INTEGER",
    )
    with pytest.raises(sqlite3.OperationalError):
        SessionStore(tmp_path)
    path = tmp_path / DATABASE_FILE
    assert rows(path, "SELECT MAX(version) FROM schema_version") == [(SCHEMA_VERSION,)]
    assert rows(path, "SELECT name FROM sqlite_master WHERE name = 'half_done'") == []


# --- one transaction per step ---------------------------------------------------------------


class Unwritable:
    """A value whose text cannot be made: the insert of its event fails after the messages'."""

    def __str__(self) -> str:
        raise RuntimeError("the insert fails after the messages")


def test_a_step_that_fails_while_being_written_leaves_no_trace(store: SessionStore) -> None:
    sid = new_session(store)
    store.record_step(sid, step(sid, 1))
    broken = step(sid, 2)
    broken.events = [*broken.events, {"type": "note", "value": Unwritable()}]
    with pytest.raises(RuntimeError, match="after the messages"):
        store.record_step(sid, broken)

    for table in ("messages", "events", "steps", "usage_logs"):
        column = "call_index" if table == "usage_logs" else "step"
        assert rows(store.path, f"SELECT COUNT(*) FROM {table} WHERE {column} = 2") == [(0,)]
    assert store.checkpoint(sid) == (1, {"counters": {"iterations": 1}})

    # the store is still usable, and the step goes in whole when retried
    store.record_step(sid, step(sid, 2))
    assert [m.content for m in store.messages(sid)] == [
        "reading f1",
        "contents 1",
        "reading f2",
        "contents 2",
    ]
    assert [seq for (seq,) in rows(store.path, "SELECT seq FROM messages ORDER BY seq")] == [
        1,
        2,
        3,
        4,
    ]


def test_a_repeated_step_number_is_rejected_whole(store: SessionStore) -> None:
    sid = new_session(store)
    store.record_step(sid, step(sid, 1))
    with pytest.raises(sqlite3.IntegrityError):
        store.record_step(sid, step(sid, 1))  # the checkpoint insert is the last statement
    assert len(store.messages(sid)) == 2
    assert rows(store.path, "SELECT COUNT(*) FROM usage_logs") == [(1,)]


CRASH_MID_STEP = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from journeyman.session import store as store_module
    from tests.fakes.store import new_session, step

    store = store_module.SessionStore(Path(sys.argv[1]))
    sid = new_session(store)
    store.record_step(sid, step(sid, 1))
    store.record_step(sid, step(sid, 2))

    def die(db, row):  # messages and events of step 3 are written; the process dies
        os._exit(9)

    store_module._insert_usage = die
    store.record_step(sid, step(sid, 3))
    """
)


def test_a_process_killed_inside_a_step_leaves_only_whole_steps(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", CRASH_MID_STEP, str(root)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 9, done.stderr
    store = SessionStore(root)
    try:
        assert store.summary("s1").steps == 2
        assert [m.content for m in store.messages("s1")][-1] == "contents 2"
        assert len(list(store.events("s1"))) == 4
        assert rows(store.path, "SELECT COUNT(*) FROM messages WHERE step = 3") == [(0,)]
        # and the next step continues the sequence without a gap
        store.record_step("s1", step("s1", 3))
        assert rows(store.path, "SELECT MAX(seq) FROM messages") == [(6,)]
    finally:
        store.close()


# --- append only ----------------------------------------------------------------------------


def test_steps_only_append_rows(store: SessionStore) -> None:
    sid = new_session(store)
    statements: list[str] = []
    for number in range(1, 6):
        store.record_step(sid, step(sid, number))
    snapshot = {
        table: rows(store.path, f"SELECT rowid, * FROM {table} ORDER BY rowid")
        for table in ("messages", "events", "steps", "usage_logs")
    }

    store._db.set_trace_callback(statements.append)
    per_step: list[int] = []
    for number in range(6, 206):
        before = len(statements)
        store.record_step(sid, step(sid, number))
        per_step.append(len(statements) - before)
    store._db.set_trace_callback(None)

    for table, earlier in snapshot.items():
        now = rows(store.path, f"SELECT rowid, * FROM {table} ORDER BY rowid")
        assert now[: len(earlier)] == earlier, f"{table}: an earlier row changed"
    assert len(store.messages(sid)) == 205 * 2
    # the same statements for step 6 as for step 205: nothing scans or rewrites the history
    assert set(per_step) == {per_step[0]}
    writes = [s.split()[0].upper() for s in statements if not s.startswith(("BEGIN", "COMMIT"))]
    assert set(writes) == {"INSERT"}
    assert not any("OR REPLACE" in s.upper() for s in statements)


def test_compaction_appends_a_new_history_and_keeps_the_old_one(store: SessionStore) -> None:
    sid = new_session(store)
    store.record_step(sid, step(sid, 1))
    store.record_step(sid, step(sid, 2))
    summary = [Message.user("summary of steps 1-2")]
    first = store.record_step(
        sid, StepRecord(3, summary, [], {"counters": {"iterations": 3}}, replaces_history=True)
    )
    assert store.checkpoint(sid)[1][HISTORY_START] == first
    later = step(sid, 4)
    later.checkpoint = {**later.checkpoint, HISTORY_START: first}  # as the recorder carries it
    store.record_step(sid, later)

    assert [m.content for m in store.messages(sid)] == [
        "summary of steps 1-2",
        "reading f4",
        "contents 4",
    ]
    assert [m.content for m in store.messages(sid, up_to_step=2)][-1] == "contents 2"
    assert rows(store.path, "SELECT COUNT(*) FROM messages") == [(7,)]


# --- permissions, deletion, lookup ----------------------------------------------------------


def test_remembered_permissions_survive_a_restart_per_project(tmp_path: Path) -> None:
    first = SessionStore(tmp_path)
    first.remember_permission("/proj/a", "run_command", "git status*", "allow")
    first.remember_permission("/proj/a", "write_file", "src/**", "allow")
    first.remember_permission("/proj/b", "run_command", "make*", "deny")
    first.close()

    second = SessionStore(tmp_path)
    try:
        assert sorted(second.remembered_permissions("/proj/a")) == [
            ("run_command", "git status*", "allow"),
            ("write_file", "src/**", "allow"),
        ]
        assert second.remembered_permissions("/proj/b") == [("run_command", "make*", "deny")]
        assert second.remembered_permissions("/proj/c") == []
        # remembering the same rule again replaces the decision rather than adding a row
        second.remember_permission("/proj/b", "run_command", "make*", "allow")
        assert second.remembered_permissions("/proj/b") == [("run_command", "make*", "allow")]
    finally:
        second.close()


def fill(store: SessionStore, sid: str) -> None:
    new_session(store, sid)
    store.record_step(sid, step(sid, 1))
    change = store.record_file_change(sid, 1, "a.txt", None, "new\n", "write_file")
    store.record_file_change(sid, 1, "b.txt", "old\n", "new\n", "edit_file")
    store.mark_undone(change)
    store.append_events(sid, 1, [{"type": "run_finished"}])
    store.record_outcome(sid, "completed", "done", None)


def count_for(store: SessionStore, sid: str) -> dict[str, int]:
    counts = {
        table: rows(store.path, f"SELECT COUNT(*) FROM {table} WHERE session_id = ?", sid)[0][0]
        for table in TABLES_WITH_SESSION_ID
    }
    counts["sessions"] = rows(store.path, "SELECT COUNT(*) FROM sessions WHERE id = ?", sid)[0][0]
    counts["undone_changes"] = rows(
        store.path,
        "SELECT COUNT(*) FROM undone_changes u JOIN file_changes c ON c.id = u.change_id "
        "WHERE c.session_id = ?",
        sid,
    )[0][0]
    return counts


def test_deleting_a_session_removes_all_its_rows_and_nothing_else(store: SessionStore) -> None:
    fill(store, "gone")
    fill(store, "kept")
    store.remember_permission("/ws", "run_command", "ls*", "allow")
    kept_before = count_for(store, "kept")
    assert all(kept_before.values()), kept_before

    store.delete_session("gone")

    assert set(count_for(store, "gone").values()) == {0}
    assert rows(store.path, "SELECT COUNT(*) FROM undone_changes") == [(1,)]
    assert count_for(store, "kept") == kept_before
    assert store.remembered_permissions("/ws") == [("run_command", "ls*", "allow")]
    with pytest.raises(ConfigurationError, match="no session 'gone'"):
        store.load_session("gone")


def test_session_ids_resolve_by_unique_prefix(store: SessionStore) -> None:
    new_session(store, "20250101-abc")
    new_session(store, "20250101-abd")
    assert store.resolve_id("20250101-abc") == "20250101-abc"
    assert store.resolve_id("20250101-abd") == "20250101-abd"
    with pytest.raises(ConfigurationError, match="ambiguous"):
        store.resolve_id("20250101-ab")
    with pytest.raises(ConfigurationError, match="no session"):
        store.resolve_id("nope")


def test_the_store_round_trips_settings_and_parentage(store: SessionStore) -> None:
    store.create_session(
        SessionRecord(
            id="child",
            task="t",
            workspace="/w",
            settings={"model": "m", "config": {"max_iterations": 7}},
            system_prompt="sys",
            parent_id="parent",
            forked_at_step=3,
        )
    )
    record = store.load_session("child")
    assert (record.parent_id, record.forked_at_step) == ("parent", 3)
    assert record.settings == {"model": "m", "config": {"max_iterations": 7}}
    assert json.loads(rows(store.path, "SELECT settings FROM sessions")[0][0])["model"] == "m"


def test_updating_settings_replaces_the_named_keys_and_keeps_the_others(
    store: SessionStore,
) -> None:
    store.create_session(
        SessionRecord(
            id="s1",
            task="t",
            workspace="/w",
            settings={"model": "m", "config": {"mode": "react"}, "imported_from": "a.json"},
            system_prompt="sys",
        )
    )
    assert store.update_settings("s1", {"config": {"mode": "phased"}, "model": "m2"})
    record = store.load_session("s1")
    assert record.settings == {
        "model": "m2",
        "config": {"mode": "phased"},
        "imported_from": "a.json",  # the import's origin still holds its settings to the rules
    }


def test_updating_the_settings_of_an_unknown_session_changes_nothing(
    store: SessionStore,
) -> None:
    new_session(store)
    assert not store.update_settings("nope", {"model": "x"})
    assert store.load_session("s1").settings == {"provider": "scripted", "model": "m"}


def test_updated_settings_are_redacted_like_new_ones(store: SessionStore) -> None:
    new_session(store)
    secret = "sk-ant-api03-" + "x" * 40
    store.update_settings("s1", {"config": {"system_prompt": f"key {secret}"}})
    assert secret not in rows(store.path, "SELECT settings FROM sessions")[0][0]


def test_events_and_checkpoints_are_read_back_with_their_steps(store: SessionStore) -> None:
    sid = new_session(store)
    for number in (1, 2):
        store.record_step(sid, step(sid, number))
    store.append_events(sid, 2, [{"type": "run_finished", "step": 2}])
    assert [(n, e["type"]) for n, e in store.step_events(sid)] == [
        (1, "tool_call"),
        (1, "tool_result"),
        (2, "tool_call"),
        (2, "tool_result"),
        (2, "run_finished"),
    ]
    checkpoints = list(store.step_checkpoints(sid))
    assert [(n, c) for n, _, c in checkpoints] == [
        (1, {"counters": {"iterations": 1}}),
        (2, {"counters": {"iterations": 2}}),
    ]
    assert checkpoints[0][1] <= checkpoints[1][1]
