"""A session carried between two stores: exported, merged, merged again, continued; a shipment
that disagrees with the target is refused whole."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from journeyman.core.messages import Message, Usage
from journeyman.economics.usage_log import UsageRow
from journeyman.session.redact import Redactor
from journeyman.session.store import DATABASE_FILE, SessionRecord, SessionStore, StepRecord
from journeyman.session.transfer import (
    SessionMergeError,
    export_session,
    merge_session,
    rows_spending,
    with_workspace,
)

TOKEN = "tok-" + "z9" * 12
SID = "batch-tabc-a1"


def open_store(root: Path) -> SessionStore:
    return SessionStore(root, Redactor({"SERVICE_TOKEN": TOKEN}))


def step(store: SessionStore, number: int, cost: float) -> None:
    usage = UsageRow(SID, number, "openai", "m", Usage(10 * number, 5), cost, 0.1, 1000.0 + number)
    store.record_step(
        SID,
        StepRecord(
            step=number,
            messages=[Message.user(f"step {number}")],
            events=[{"type": "step", "n": number}],
            checkpoint={"step": number},
            usage=[usage],
        ),
    )


def worker_session(root: Path) -> SessionStore:
    """A session as a worker leaves it: two steps, a sealed undo entry, one undone, an end."""
    store = open_store(root)
    store.create_session(SessionRecord(SID, "the task", "/worker/ws", {"mode": "react"}, "sys"))
    step(store, 1, 0.25)
    store.record_file_change(SID, 1, ".env", None, f"TOKEN={TOKEN}\n", "write_file")
    undone = store.record_file_change(SID, 2, "a.txt", "old\n", "new\n", "edit_file")
    store.mark_undone(undone)
    step(store, 2, 0.5)
    store.record_outcome(SID, "completed", "done", None)
    return store


def table_rows(root: Path) -> dict[str, list[tuple[object, ...]]]:
    db = sqlite3.connect(root / DATABASE_FILE)
    try:
        tables = ["sessions", "messages", "events", "steps", "outcomes", "file_changes"]
        tables += ["undone_changes", "usage_logs"]
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}
    finally:
        db.close()


def test_a_session_merges_whole_and_a_second_merge_changes_nothing(tmp_path: Path) -> None:
    worker = worker_session(tmp_path / "worker")
    shipped = export_session(worker, SID)
    worker.close()
    driver = open_store(tmp_path / "driver")
    first = merge_session(driver, with_workspace(shipped, "/driver/ws"))
    assert first.changed and first.added["usage_logs"] == 2 and first.added["messages"] == 2
    after_first = table_rows(tmp_path / "driver")
    again = merge_session(driver, with_workspace(shipped, "/driver/ws"))
    assert not again.changed
    assert table_rows(tmp_path / "driver") == after_first

    summary = driver.summary(SID)
    assert summary.record.workspace == "/driver/ws" and summary.finish_reason == "completed"
    assert summary.steps == 2
    changes = driver.file_changes(SID)
    assert changes[0].after == f"TOKEN={TOKEN}\n"  # the exact text, from the driver's vault
    assert [c.undone for c in changes] == [False, True]
    assert TOKEN.encode() not in (tmp_path / "driver" / DATABASE_FILE).read_bytes()
    assert [r.cost_usd for r in driver.usage_rows(SID)] == [0.25, 0.5]
    driver.close()


def test_a_resumed_session_comes_back_with_only_its_new_rows_added(tmp_path: Path) -> None:
    first = worker_session(tmp_path / "first")
    driver = open_store(tmp_path / "driver")
    merge_session(driver, export_session(first, SID))
    first.close()
    # the driver seeds a second worker, which resumes the session and runs one more step
    seed = export_session(driver, SID)
    second = open_store(tmp_path / "second")
    merge_session(second, with_workspace(seed, "/second/ws"))
    second.clear_outcome(SID)
    second.update_settings(SID, {"resumed": True})
    step(second, 3, 1.0)
    second.record_outcome(SID, "max_iterations", "", None)
    back = export_session(second, SID, usage_from=len(seed.usage))
    second.close()

    assert rows_spending(back).usd == pytest.approx(1.0)  # this run's call only
    assert rows_spending(back, this_run_only=False).usd == pytest.approx(1.75)
    report = merge_session(driver, with_workspace(back, "/driver/ws"))
    assert report.added["usage_logs"] == 1 and report.added["steps"] == 1
    assert report.added["file_changes"] == 0
    summary = driver.summary(SID)
    assert summary.steps == 3 and summary.finish_reason == "max_iterations"
    assert summary.record.settings["resumed"] is True
    assert sum(r.cost_usd or 0 for r in driver.usage_rows(SID)) == pytest.approx(1.75)
    assert not merge_session(driver, with_workspace(back, "/driver/ws")).changed
    driver.close()


def test_a_conflicting_or_stale_shipment_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    worker = worker_session(tmp_path / "worker")
    shipped = export_session(worker, SID)
    worker.close()
    driver = open_store(tmp_path / "driver")
    merge_session(driver, shipped)
    before = table_rows(tmp_path / "driver")

    usage = list(shipped.usage)
    usage[0] = (*usage[0][:7], 0.0, *usage[0][8:])  # a call said to have cost nothing
    changed_steps = dict(shipped.keyed)
    changed_steps["messages"] = [shipped.keyed["messages"][0]]  # one step's messages gone
    record = list(shipped.session)
    record[4] = "another task"
    stale = replace(shipped, usage=shipped.usage[:1], outcome=None)
    for bad, says in [
        (replace(shipped, usage=usage), "usage rows number 1 differs"),
        (replace(shipped, keyed=changed_steps), "which the shipped copy lacks"),
        (replace(shipped, session=tuple(record)), "differ in task"),
        (stale, "the shipment is older than the store"),
    ]:
        with pytest.raises(SessionMergeError, match=says):
            merge_session(driver, bad)
        assert table_rows(tmp_path / "driver") == before
    driver.close()
