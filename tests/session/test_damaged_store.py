"""A session store that is damaged, foreign or not writable is refused with one clear error
(library: `StoreDamagedError`; CLI: a message and exit 2, never a traceback), and a full disk at
the end of a run does not lose its outcome silently."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from journeyman.session.database import StoreDamagedError
from journeyman.session.store import (
    DATABASE_FILE,
    UNSAVED_OUTCOMES,
    SessionStore,
    StoreFullError,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.fakes.store import new_session, step
from tests.support.cli import clean_env

REPO = Path(__file__).resolve().parents[2]


def filled_store(root: Path, steps: int = 30) -> Path:
    """A store with one session, many steps and file changes, checkpointed into the main file."""
    store = SessionStore(root)
    sid = new_session(store)
    for number in range(1, steps + 1):
        store.record_step(sid, step(sid, number))
        store.record_file_change(sid, number, f"f{number}.py", None, "x = 1\n" * 300, "write_file")
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return root / DATABASE_FILE


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def foreign(path: Path) -> None:
    path.unlink()
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('ann');")
    db.close()


def random_bytes(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def flip_btree_page_header(path: Path) -> None:
    """Flip a bit in the header of the file_changes table's root page: the rows are still
    there, but SQLite can no longer walk the page correctly."""
    db = sqlite3.connect(path)
    (root_page,) = db.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'file_changes'"
    ).fetchone()
    (page_size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    data = bytearray(path.read_bytes())
    data[(root_page - 1) * page_size + 5] ^= 0x10  # the start of the cell content area
    path.write_bytes(bytes(data))


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (truncate, "is truncated"),
    "foreign": (foreign, "is not a journeyman session store (it holds the tables contacts)"),
    "random bytes": (random_bytes, "is not a SQLite database"),
    "bit flip": (flip_btree_page_header, "is damaged"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_store_is_refused_with_what_is_wrong_and_what_to_do(
    tmp_path: Path, kind: str
) -> None:
    path = filled_store(tmp_path)
    damage, problem = DAMAGE[kind]
    damage(path)
    before = path.read_bytes()
    with pytest.raises(StoreDamagedError) as caught:
        SessionStore(tmp_path, check_integrity=True).close()
    assert problem in caught.value.message
    assert f"mv {path} {path}.broken" in caught.value.message
    assert path.read_bytes() == before  # nothing was written into it


def test_a_small_store_is_checked_on_every_open(tmp_path: Path) -> None:
    path = filled_store(tmp_path)
    flip_btree_page_header(path)
    with pytest.raises(StoreDamagedError, match="is damaged"):
        SessionStore(tmp_path)  # no explicit check asked


def test_a_store_missing_a_table_is_refused(tmp_path: Path) -> None:
    path = filled_store(tmp_path, steps=1)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE file_changes")
    db.commit()
    db.close()
    with pytest.raises(StoreDamagedError, match="lacks the tables file_changes"):
        SessionStore(tmp_path)


def test_damage_found_by_a_later_query_is_reported_the_same_way(tmp_path: Path) -> None:
    path = filled_store(tmp_path, steps=1)
    db = sqlite3.connect(path)
    db.execute("UPDATE file_changes SET after = CAST(X'68C3' AS TEXT)")  # not UTF-8
    db.commit()
    db.close()
    store = SessionStore(tmp_path, check_integrity=True)  # pages are fine: the check passes
    try:
        with pytest.raises(StoreDamagedError, match="no longer valid UTF-8"):
            store.file_changes("s1")
    finally:
        store.close()


@pytest.mark.parametrize("table", ["messages", "events", "steps", "sessions"])
def test_a_flipped_bit_inside_stored_json_is_a_damaged_store(tmp_path: Path, table: str) -> None:
    """A flipped bit inside a row's text passes SQLite's page checks; reading it must still
    end in the damaged-store error (the CLI says what to do and exits 2), never a traceback."""
    path = filled_store(tmp_path, steps=2)
    column = {"messages": "body", "events": "body", "steps": "checkpoint"}.get(table, "settings")
    db = sqlite3.connect(path)
    db.execute(f'UPDATE {table} SET {column} = \'{{"role": "user", "con\' || \'tent\'')
    db.commit()
    db.close()
    store = SessionStore(tmp_path, check_integrity=True)
    try:
        with pytest.raises(StoreDamagedError, match="cannot be read"):
            store.load_session("s1")
            store.messages("s1")
            list(store.events("s1"))
    finally:
        store.close()
    # `show` reads the session, its steps and messages; `export` every event as well
    command = "export" if table == "events" else "show"
    shown = subprocess.run(
        [sys.executable, "-m", "journeyman", "sessions", command, "s1", "--session-dir", tmp_path],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert shown.returncode == 2, shown.stderr
    assert "Traceback" not in shown.stderr and "cannot be read" in shown.stderr


def test_a_session_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreDamagedError, match="is a file"):
        SessionStore(tmp_path / "file")


# --- through the command line ---------------------------------------------------------------


def as_nobody() -> list[str]:
    """Prefix that runs a command as an unprivileged user (root may write any file)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot make a store read-only")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.parametrize("kind", [*DAMAGE, "read-only file", "read-only folder"])
@pytest.mark.parametrize("command", [["sessions", "list"], ["diff", "--session", "s1"]])
def test_every_damage_ends_the_cli_with_a_message_and_exit_2(
    tmp_path: Path, kind: str, command: list[str]
) -> None:
    prefix = as_nobody() if kind.startswith("read-only") else []
    if prefix:  # the other user must reach the folder: pytest's own is private
        tmp_path = Path(tempfile.mkdtemp())
        tmp_path.chmod(0o755)
    root = tmp_path / "sessions"
    path = filled_store(root)
    if kind.startswith("read-only"):
        root.chmod(0o755)  # readable by the other user, as a shared folder would be
        path.chmod(0o444 if prefix else 0o400)
        if kind == "read-only folder":
            path.chmod(0o666)
            root.chmod(0o555)
    else:
        DAMAGE[kind][0](path)
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "journeyman", *command, "--session-dir", str(root)],
            env=clean_env(),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        if prefix:
            root.chmod(0o755)
            shutil.rmtree(tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"journeyman: the session store {root}")
    if kind.startswith("read-only"):
        assert "not writable" in done.stderr
    else:
        assert DAMAGE[kind][1] in done.stderr and ".broken" in done.stderr


FULL_DISK_RUN = textwrap.dedent(
    """
    import sqlite3, sys
    from journeyman.session import database

    original = database.StoreConnection.execute

    def execute(self, sql, parameters=(), /):
        if "INTO outcomes" in sql:
            raise sqlite3.OperationalError("database or disk is full")
        return original(self, sql, parameters)

    database.StoreConnection.execute = execute
    from journeyman.cli.app import main

    sys.argv = ["journeyman", *sys.argv[1:]]
    main()
    """
)


def test_a_full_disk_at_the_end_of_a_run_keeps_the_outcome_and_fails_loudly(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(reply("All done: nothing needed changing."))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = tmp_path / "sessions"
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_RUN, "run", "--yes", "look around",
         "-w", str(workspace), "--session-dir", str(root)],
        env=clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url),
        cwd=REPO, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "could not be saved" in done.stderr and "the disk is full" in done.stderr
    [saved] = (root / UNSAVED_OUTCOMES).iterdir()
    assert str(saved) in done.stderr
    outcome = json.loads(saved.read_text())
    assert outcome["final_text"] == "All done: nothing needed changing."
    assert saved.stat().st_mode & 0o777 == 0o600


def test_a_full_disk_on_the_outcome_write_raises_with_the_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path)
    sid = new_session(store)
    original = type(store._db).execute

    def full(self: sqlite3.Connection, sql: str, parameters: object = (), /) -> sqlite3.Cursor:
        if "INTO outcomes" in sql:
            raise sqlite3.OperationalError("database or disk is full")
        return original(self, sql, parameters)  # type: ignore[arg-type]

    monkeypatch.setattr(type(store._db), "execute", full)
    with pytest.raises(StoreFullError) as caught:
        store.record_outcome(sid, "completed", "the summary", None)
    monkeypatch.undo()
    assert "The run ended completed: the summary" in caught.value.message
    saved = Path(caught.value.details["saved_to"])
    assert json.loads(saved.read_text())["finish_reason"] == "completed"
    # the store is still usable afterwards (no transaction left open)
    store.record_outcome(sid, "completed", "the summary", None)
    assert store.summary(sid).finish_reason == "completed"
    store.close()
