"""Opening a second store in a process must not drop the locks of the first (a batch runs
many sessions of one store side by side)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from journeyman.session.database import StoreDamagedError, check_file
from journeyman.session.store import SessionRecord, SessionStore

CLOSE_ELSEWHERE = (
    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
    "c.execute('SELECT 1 FROM sessions').fetchall(); c.close()"
)


def test_a_second_store_keeps_the_first_ones_wal_alive(tmp_path: Path) -> None:
    first = SessionStore(tmp_path)
    first.create_session(SessionRecord("s1", "task", str(tmp_path), {}, ""))
    wal = tmp_path / "journeyman.db-wal"
    assert wal.exists()
    SessionStore(tmp_path).close()
    # another process that opens and closes the store: while `first` holds it, that process
    # is not the last user, so it must neither checkpoint nor delete the WAL
    subprocess.run(
        [sys.executable, "-c", CLOSE_ELSEWHERE, str(tmp_path / "journeyman.db")], check=True
    )
    assert wal.exists()
    assert first.load_session("s1").task == "task"
    first.close()


def test_a_store_caught_mid_checkpoint_is_not_taken_for_truncated(tmp_path: Path) -> None:
    """Another process's checkpoint writes the header's new page count before the pages that
    extend the file; a store opened in that moment is whole a moment later."""
    store = SessionStore(tmp_path)
    store.create_session(SessionRecord("s1", "task " * 2000, str(tmp_path), {}, ""))
    store.close()
    path = tmp_path / "journeyman.db"
    whole = path.read_bytes()
    page = int.from_bytes(whole[16:18], "big")
    path.write_bytes(whole[:-page])  # the last page not written yet

    def finish_checkpoint() -> None:
        time.sleep(0.03)
        path.write_bytes(whole)

    writer = threading.Thread(target=finish_checkpoint)
    writer.start()
    try:
        check_file(path)
    finally:
        writer.join()


def test_a_store_that_stays_short_is_truncated(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create_session(SessionRecord("s1", "task " * 2000, str(tmp_path), {}, ""))
    store.close()
    path = tmp_path / "journeyman.db"
    whole = path.read_bytes()
    path.write_bytes(whole[: -int.from_bytes(whole[16:18], "big")])
    with pytest.raises(StoreDamagedError, match="is truncated"):
        check_file(path)
