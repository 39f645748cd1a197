"""The session folder is private to its user (0700) and the database with its -wal and -shm
files is 0600, whether the store is new or was left readable by an earlier version."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from journeyman.session.store import DATABASE_FILE, SessionStore
from tests.fakes.store import new_session, step


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """The usual umask: without care, new files would be readable by everyone."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def database_files(root: Path) -> list[Path]:
    return [root / (DATABASE_FILE + suffix) for suffix in ("", "-wal", "-shm")]


def test_a_new_store_is_private(tmp_path: Path) -> None:
    root = tmp_path / "data" / "sessions"
    store = SessionStore(root)
    try:
        sid = new_session(store)
        store.record_step(sid, step(sid, 1))
        assert mode(root) == 0o700
        for path in database_files(root):
            assert path.exists() and mode(path) == 0o600, path
    finally:
        store.close()


def test_a_store_left_readable_by_others_is_tightened_on_open(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store = SessionStore(root)
    new_session(store)
    root.chmod(0o755)
    for path in database_files(root):
        path.chmod(0o644)
    reopened = SessionStore(root)
    try:
        assert mode(root) == 0o700
        for path in database_files(root):
            assert mode(path) == 0o600, path
        assert reopened.load_session("s1").task == "fix the bug"
    finally:
        reopened.close()
        store.close()


def test_a_secret_vault_is_private_too(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    try:
        sid = new_session(store)
        change = store.record_file_change(
            sid, 1, ".env", None, "KEY=sk-ant-" + "a" * 30 + "\n", "write_file"
        )
        vault = tmp_path / "sessions" / "vault"
        assert mode(vault) == 0o700
        assert mode(vault / f"{change}.after") == 0o600
    finally:
        store.close()
