"""Inputs an attacker, a damaged file or a slip of the keyboard can give the command line: each
ends in one clear message (exit 2 where it is bad input), never a traceback."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from journeyman.session.store import SessionRecord, SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman

NOWHERE = "http://127.0.0.1:9/v1"
"""Never reached: these inputs are refused before any request."""


def env() -> dict[str, str]:
    return clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=NOWHERE)


def refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--price-per-mtok", "nan,nan"), "is not a price"),
        (("--price-per-mtok", "inf,inf"), "is not a price"),
        (("--price-per-mtok", "1,inf"), "is not a price"),
        (("--max-budget-usd", "inf"), "--max-budget-usd must be a finite amount"),
        (("--max-budget-usd", "1e400"), "--max-budget-usd must be a finite amount"),
        (("--max-budget-usd", "nan"), "--max-budget-usd"),
        (("--max-budget-usd", "-1"), "--max-budget-usd"),
        (("--max-duration", "nan"), "--max-duration must be positive"),
        (("--tool-timeout", "inf"), "--tool-timeout must be a finite number"),
    ],
)
def test_limits_that_are_not_finite_exit_2(
    tmp_path: Path, flags: tuple[str, ...], message: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    done = journeyman("run", "x", "-w", str(workspace), "--session-dir", str(tmp_path / "s"),
                      *flags, env=env())  # fmt: skip
    refused(done, message)
    assert not (tmp_path / "s" / "journeyman.db").exists()


def stored(root: Path, workspace: str, task: str = "fix the bug") -> str:
    store = SessionStore(root)
    try:
        store.create_session(
            SessionRecord(
                id="20260101-000000-0badf00d",
                task=task,
                workspace=workspace,
                settings={"provider": "openai", "model": "m", "imported_from": "evil.jsonl"},
                system_prompt="",
            )
        )
    finally:
        store.close()
    return "20260101-000000-0badf00d"


def test_a_fork_of_a_session_whose_workspace_is_the_root_is_refused(tmp_path: Path) -> None:
    session = stored(tmp_path / "s", "/")
    for extra in ((), ("--in-place",)):
        # an import never chooses where it works: without -w it is refused, naming the flag
        done = journeyman("fork", session, "--at-step", "0", *extra,
                          "--session-dir", str(tmp_path / "s"), env=env())  # fmt: skip
        refused(done, "--workspace DIR")
        # and / named as its workspace is refused too
        done = journeyman("fork", session, "--at-step", "0", *extra, "-w", "/",
                          "--session-dir", str(tmp_path / "s"), env=env())  # fmt: skip
        refused(done, "it is the root folder")


def test_sessions_list_escapes_an_imported_task(tmp_path: Path) -> None:
    stored(tmp_path / "s", str(tmp_path), task="pwn \x1b]0;owned\x07\x1b[2J\x1b[31mred\u202e")
    done = journeyman("sessions", "list", "--session-dir", str(tmp_path / "s"),
                      env=clean_env(COLUMNS="250"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout and "\u202e" not in done.stdout
    assert "\\x1b]0;owned\\x07" in done.stdout


def test_export_into_a_folder_writes_a_file_in_it(tmp_path: Path) -> None:
    session = stored(tmp_path / "s", str(tmp_path))
    folder = tmp_path / "exports"
    folder.mkdir()
    done = journeyman("sessions", "export", session, "-o", str(folder),
                      "--session-dir", str(tmp_path / "s"), env=env())  # fmt: skip
    assert done.returncode == 0, done.stderr
    header = json.loads((folder / f"{session}.jsonl").read_text().splitlines()[0])
    assert header["id"] == session
    missing = journeyman("sessions", "export", session, "-o", str(tmp_path / "no" / "x.jsonl"),
                         "--session-dir", str(tmp_path / "s"), env=env())  # fmt: skip
    refused(missing, "cannot write")


@pytest.mark.parametrize("path", ["../outside/x", "/etc/passwd", ""])
def test_undo_of_a_file_outside_the_workspace_exits_2(tmp_path: Path, path: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    stored(tmp_path / "s", str(workspace))
    done = journeyman("undo", "--file", path, "--session-dir", str(tmp_path / "s"),
                      env=env(), cwd=workspace)  # fmt: skip
    refused(done, "undo: ")


LOCKER = textwrap.dedent(
    """
    import sqlite3, sys, time
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("PRAGMA locking_mode=EXCLUSIVE")
    db.execute("BEGIN EXCLUSIVE")
    db.execute("SELECT COUNT(*) FROM sessions").fetchall()
    print("locked", flush=True)
    time.sleep(120)
    """
)


@pytest.mark.slow
def test_a_store_locked_by_another_process_is_a_clear_error(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    stored(tmp_path / "s", str(workspace))
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(tmp_path / "s" / "journeyman.db")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        started = time.monotonic()
        for command in (("sessions", "list"), ("run", "x", "-w", str(workspace), "--model", "m")):
            done = journeyman(*command, "--session-dir", str(tmp_path / "s"), env=env())
            refused(done, "stayed locked by another process")
        assert time.monotonic() - started < 80  # a bounded wait, not a hang
    finally:
        locker.kill()
        locker.wait()
    with sqlite3.connect(tmp_path / "s" / "journeyman.db") as db:  # and nothing was damaged
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)


def test_a_nul_byte_in_a_model_given_path_is_a_tool_error(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    nul = "a\x00b"
    calls = [
        ("read_file", {"path": nul}),
        ("write_file", {"path": nul, "content": "x"}),
        ("edit_file", {"path": nul, "old_string": "a", "new_string": "b"}),
        ("list_files", {"path": nul}),
        ("grep", {"pattern": "x", "path": nul}),
        ("run_command", {"command": "true", "cwd": nul}),
    ]
    fake_openai.enqueue(reply(tool_calls=calls))
    fake_openai.default = reply(tool_calls=[("finish", {"summary": "done"})])
    run_env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    done = journeyman("run", "--yes", "--no-verify", "x", "-w", str(workspace), "--sandbox",
                      "local", "--session-dir", str(tmp_path / "s"), env=run_env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "internal_error" not in done.stdout + done.stderr
    results = [m for m in fake_openai.requests[1].json["messages"] if m["role"] == "tool"]
    assert len(results) == len(calls)
    assert all("invalid path 'a\\x00b'" in r["content"] for r in results), results
    assert list(workspace.iterdir()) == []


def test_a_nul_byte_in_an_imported_workspace_is_refused(tmp_path: Path) -> None:
    session = stored(tmp_path / "s", f"{tmp_path}/a\x00b")
    for command in (("fork", session, "--at-step", "0"), ("resume", session), ("undo",)):
        extra = ("--session", session) if command == ("undo",) else ()
        done = journeyman(*command, *extra, "--session-dir", str(tmp_path / "s"), env=env())
        assert done.returncode == 2, (command, done.stderr)
        assert "Traceback" not in done.stderr, (command, done.stderr)

