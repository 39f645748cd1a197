"""The per-call usage log in SQLite: rows, summaries, call indices, WAL, sharing and reopening."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.core.messages import Usage
from journeyman.economics.usage_log import (
    DATABASE_FILE,
    ModelUsage,
    UsageLog,
    UsageRow,
    connect,
)


def row(
    session: str,
    index: int,
    model: str,
    usage: Usage,
    cost: float | None,
    provider: str = "anthropic",
) -> UsageRow:
    return UsageRow(
        session_id=session,
        call_index=index,
        provider=provider,
        model=model,
        usage=usage,
        cost_usd=cost,
        latency_s=0.5,
        created_at=1_700_000_000.0 + index,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "root" / DATABASE_FILE


@pytest.fixture
def log(db_path: Path) -> Iterator[UsageLog]:
    usage_log = UsageLog(db_path)
    yield usage_log
    usage_log.close()


def fill(log: UsageLog) -> None:
    """Session s1: two calls of model a, one of model b (priced). Session s2: one of a, one
    unpriced call of b."""
    log.append(row("s1", 1, "a", Usage(100, 10, 1_000, 50), 0.01))
    log.append(row("s1", 2, "a", Usage(200, 20, 2_000, 0), 0.02))
    log.append(row("s1", 3, "b", Usage(300, 30, 0, 0), 0.10))
    log.append(row("s2", 1, "a", Usage(1, 2, 3, 4), 0.5))
    log.append(row("s2", 2, "b", Usage(5, 6, 0, 0), None))


def by_model(summary: list[ModelUsage]) -> dict[str, ModelUsage]:
    return {m.model: m for m in summary}


def test_summary_per_session(log: UsageLog) -> None:
    fill(log)
    s1 = log.summary("s1")
    assert [(m.provider, m.model) for m in s1] == [("anthropic", "a"), ("anthropic", "b")]
    a, b = by_model(s1)["a"], by_model(s1)["b"]
    assert a.calls == 2
    assert a.usage == Usage(300, 30, 3_000, 50)
    assert a.cost_usd == pytest.approx(0.03)
    assert b.calls == 1
    assert b.usage == Usage(300, 30, 0, 0)
    assert b.cost_usd == pytest.approx(0.10)

    s2 = by_model(log.summary("s2"))
    assert s2["a"].calls == 1
    assert s2["a"].usage == Usage(1, 2, 3, 4)
    assert s2["a"].cost_usd == pytest.approx(0.5)
    assert s2["b"].calls == 1
    assert s2["b"].usage == Usage(5, 6, 0, 0)
    assert s2["b"].cost_usd is None  # unpriced


def test_summary_overall(log: UsageLog) -> None:
    fill(log)
    overall = by_model(log.summary())
    assert set(overall) == {"a", "b"}
    assert overall["a"].calls == 3
    assert overall["a"].usage == Usage(301, 32, 3_003, 54)
    assert overall["a"].cost_usd == pytest.approx(0.53)
    assert overall["b"].calls == 2
    assert overall["b"].usage == Usage(305, 36, 0, 0)
    assert overall["b"].cost_usd is None  # one of its rows has no price


def test_summary_groups_by_provider_too(log: UsageLog) -> None:
    log.append(row("s", 1, "m", Usage(1, 1), 0.1, provider="openai"))
    log.append(row("s", 2, "m", Usage(2, 2), 0.2, provider="anthropic"))
    summary = log.summary("s")
    assert [(m.provider, m.model, m.calls) for m in summary] == [
        ("anthropic", "m", 1),
        ("openai", "m", 1),
    ]


def test_summary_of_unknown_session_is_empty(log: UsageLog) -> None:
    fill(log)
    assert log.summary("nope") == []


def test_zero_cost_is_priced_not_unknown(log: UsageLog) -> None:
    log.append(row("s", 1, "free", Usage(10, 10), 0.0))
    (free,) = log.summary("s")
    assert free.cost_usd == 0.0


def test_next_call_index(log: UsageLog) -> None:
    assert log.next_call_index("s1") == 1
    fill(log)
    assert log.next_call_index("s1") == 4
    assert log.next_call_index("s2") == 3
    assert log.next_call_index("other") == 1
    log.append(row("s2", 10, "a", Usage(), 0.0))
    assert log.next_call_index("s2") == 11


def test_wal_mode_is_on(log: UsageLog, db_path: Path) -> None:
    connection = connect(db_path)
    try:
        (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
    finally:
        connection.close()
    assert mode == "wal"
    # WAL is a property of the file: a plain connection sees it too
    plain = sqlite3.connect(db_path)
    try:
        assert plain.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        plain.close()


def test_second_log_on_the_same_file_sees_the_rows(log: UsageLog, db_path: Path) -> None:
    other = UsageLog(db_path)
    try:
        fill(log)
        assert by_model(other.summary("s1"))["a"].calls == 2
        assert other.next_call_index("s1") == 4
        other.append(row("s1", 4, "b", Usage(1, 1), 0.0))
        assert log.next_call_index("s1") == 5
        assert by_model(log.summary("s1"))["b"].calls == 2
    finally:
        other.close()


def test_rows_survive_reopen(db_path: Path) -> None:
    first = UsageLog(db_path)
    fill(first)
    first.close()

    reopened = UsageLog(db_path)
    try:
        assert by_model(reopened.summary())["a"].calls == 3
        assert reopened.next_call_index("s1") == 4
    finally:
        reopened.close()

    plain = sqlite3.connect(db_path)
    try:
        rows = plain.execute(
            "SELECT session_id, call_index, provider, model, input_tokens, output_tokens,"
            " cache_read_tokens, cache_write_tokens, cost_usd, latency_s, created_at"
            " FROM usage_logs ORDER BY id"
        ).fetchall()
    finally:
        plain.close()
    assert len(rows) == 5
    assert rows[0] == ("s1", 1, "anthropic", "a", 100, 10, 1_000, 50, 0.01, 0.5, 1_700_000_001.0)
    assert rows[-1][8] is None  # the unpriced cost is stored as NULL


def test_connect_creates_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / DATABASE_FILE
    connection = connect(path)
    try:
        tables = {
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    finally:
        connection.close()
    assert path.exists()
    assert "usage_logs" in tables
