"""Session ids on the command line: `sessions list` shows every id whole at any terminal width
(other columns give way), and a command takes a session by the end of its id as well as by its
beginning, literally."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from journeyman.session.store import SessionStore
from tests.fakes.store import new_session
from tests.support.cli import clean_env, jm

IDS = ("20261127-221500-k3x9qm", "20261127-221500-7az2kr", "20261127-221500-k3x9qm-sub1-0a1b2c3d")


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    store = SessionStore(root)
    try:
        for session_id in IDS:
            new_session(store, session_id, workspace="/a/workspace/with/a/rather/long/path")
    finally:
        store.close()
    return root


def listed(sessions: Path, columns: int) -> str:
    done = jm(
        "sessions", "list", "--session-dir", str(sessions), env=clean_env(COLUMNS=str(columns))
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("columns", [30, 40, 60, 80, 120, 200])
def test_every_id_is_shown_whole_and_the_table_fits(sessions: Path, columns: int) -> None:
    shown = listed(sessions, columns)
    for session_id in IDS:
        assert re.search(rf"(^|\s){re.escape(session_id)}(\s|$)", shown, re.M), shown
    assert "…" not in shown
    widest = max(columns, *(len(i) for i in IDS))  # an id wider than the terminal wraps
    assert max(len(line) for line in shown.splitlines()) <= widest, shown


def test_a_wide_terminal_shows_every_column_and_a_narrow_one_drops_some(sessions: Path) -> None:
    wide, narrow = listed(sessions, 200), listed(sessions, 60)
    for column in ("created", "steps", "status", "model", "workspace", "task"):
        assert column in wide
    assert "status" in narrow and "workspace" not in narrow


def test_a_command_takes_a_session_by_the_end_of_its_id(sessions: Path) -> None:
    env = clean_env()
    where = ("--session-dir", str(sessions))
    shown = jm("sessions", "show", "7az2kr", *where, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "session 20261127-221500-7az2kr" in shown.stdout
    child = jm("sessions", "show", "0a1b2c3d", *where, env=env)
    assert "session 20261127-221500-k3x9qm-sub1-0a1b2c3d" in child.stdout
    both = jm("sessions", "show", "20261127-2215", *where, env=env)
    assert both.returncode == 2
    assert "ambiguous: 3 sessions match" in both.stderr and "Traceback" not in both.stderr


@pytest.mark.parametrize("hostile", ["%", "_", "%qm", "_az2kr", "../7az2kr", "/etc/passwd"])
def test_an_id_like_argument_with_wildcards_or_paths_matches_literally(
    sessions: Path, hostile: str
) -> None:
    done = jm("sessions", "delete", hostile, "--session-dir", str(sessions), env=clean_env())
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("journeyman: no session ") and done.stderr.count("\n") == 1
    store = SessionStore(sessions)
    try:
        assert sorted(s.record.id for s in store.list_sessions()) == sorted(IDS)
    finally:
        store.close()


def test_usage_takes_a_session_by_the_end_of_its_id(sessions: Path) -> None:
    where = ("--session-dir", str(sessions))
    found = jm("usage", "--session", "7az2kr", *where, env=clean_env())
    assert found.returncode == 1  # found, but these sessions made no model call
    assert "no usage recorded for session 20261127-221500-7az2kr" in found.stderr
    unknown = jm("usage", "--session", "%", *where, env=clean_env())
    assert unknown.returncode == 2 and "no session '%'" in unknown.stderr
