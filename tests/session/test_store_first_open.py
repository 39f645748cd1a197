"""Several processes (batch workers) opening a new session store at the same moment."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from journeyman.session.store import SessionStore


def open_store(root: str, start: object) -> str:
    start.wait()  # type: ignore[attr-defined]
    try:
        SessionStore(Path(root)).close()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "ok"


def test_a_new_store_opened_by_several_processes_at_once_is_created_once(
    tmp_path: Path,
) -> None:
    context = multiprocessing.get_context("forkserver")  # no threads of the suite inherited
    failures = []
    with context.Manager() as manager, context.Pool(4) as pool:
        for trial in range(8):
            root = tmp_path / f"store{trial}"
            start = manager.Barrier(4)
            outcomes = pool.starmap(open_store, [(str(root), start)] * 4)
            failures += [o for o in outcomes if o != "ok"]
    # each schema change applied once: none found its table or column already there (a
    # simultaneous first open can still meet "database is locked" while the file switches to
    # WAL; that is a separate matter)
    twice = [f for f in failures if "already exists" in f or "duplicate column" in f]
    assert twice == [], "\n".join(twice)
