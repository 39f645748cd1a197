"""Opening a second store in a process must not drop the locks of the first (a batch runs
many sessions of one store side by side)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
