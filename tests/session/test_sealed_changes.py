"""The undo journal keeps secrets out of the database and still restores files exactly.

A journaled file version that holds a secret is stored redacted in SQLite; its exact text goes
to the owner-only vault next to the database, from which `file_changes()` and undo read it.
"""

from __future__ import annotations

import stat
from pathlib import Path

from journeyman.session.redact import Redactor
from journeyman.session.store import VAULT_DIR, SessionRecord, SessionStore
from journeyman.session.undo import FileChangeTracker

KEY = "sk-proj-" + "Q7" * 20
TOKEN = "tok-" + "z9" * 12


def database_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.iterdir() if p.is_file())


def store_with_change(root: Path, ws: Path) -> tuple[SessionStore, int]:
    store = SessionStore(root, Redactor({"SERVICE_TOKEN": TOKEN}))
    store.create_session(SessionRecord("s1", "task", str(ws), {}, "system"))
    before = f"KEY={KEY}\nTOKEN={TOKEN}\nDEBUG=1\n"
    after = f"KEY={KEY}\nTOKEN={TOKEN}\nDEBUG=0\n"
    (ws / ".env").write_text(after)
    change = store.record_file_change("s1", 1, ".env", before, after, "edit_file")
    return store, change


def test_secrets_stay_out_of_the_database_and_undo_is_exact(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    store, _ = store_with_change(tmp_path / "sessions", ws)
    store.record_file_change("s1", 2, "plain.txt", None, "no secret here\n", "write_file")
    (ws / "plain.txt").write_text("no secret here\n")
    data = database_bytes(tmp_path / "sessions")
    assert KEY.encode() not in data
    assert TOKEN.encode() not in data
    changes = store.file_changes("s1")
    assert changes[0].before == f"KEY={KEY}\nTOKEN={TOKEN}\nDEBUG=1\n"
    assert changes[1].after == "no secret here\n"
    vault = sorted((tmp_path / "sessions" / VAULT_DIR).iterdir())
    assert [p.name for p in vault] == ["1.after", "1.before"]  # nothing for the plain file
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in vault)
    result = FileChangeTracker(store, "s1", ws).undo_all()
    assert len(result.undone) == 2 and not result.conflicts
    assert (ws / ".env").read_text() == f"KEY={KEY}\nTOKEN={TOKEN}\nDEBUG=1\n"
    assert not (ws / "plain.txt").exists()
    store.close()


def test_a_lost_vault_file_is_a_conflict_never_a_redacted_restore(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    store, change = store_with_change(tmp_path / "sessions", ws)
    (tmp_path / "sessions" / VAULT_DIR / f"{change}.before").unlink()
    (pending,) = store.file_changes("s1")
    assert pending.unrecoverable
    result = FileChangeTracker(store, "s1", ws).undo_all(force=True)
    assert result.undone == [] and len(result.conflicts) == 1
    assert (ws / ".env").read_text() == f"KEY={KEY}\nTOKEN={TOKEN}\nDEBUG=0\n"
    store.close()


def test_deleting_the_session_deletes_its_vault_files(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    store, _ = store_with_change(tmp_path / "sessions", ws)
    store.delete_session("s1")
    assert list((tmp_path / "sessions" / VAULT_DIR).iterdir()) == []
    store.close()
