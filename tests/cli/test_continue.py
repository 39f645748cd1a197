"""`journeyman run --continue ID "follow-up"`: a finished session goes on with a new message."""

from __future__ import annotations

import json
from pathlib import Path

from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman


def test_a_finished_session_continues_with_a_follow_up(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    sessions = tmp_path / "sessions"
    env = clean_env(OPENAI_API_KEY="sk-test", JOURNEYMAN_SESSION_DIR=str(sessions))
    fake_openai.enqueue(
        reply(tool_calls=[("write_file", {"path": "a.txt", "content": "one\n"})]),
        reply(tool_calls=[("finish", {"summary": "wrote a"})]),
    )
    first = journeyman(
        "run", "--yes", "write a.txt", "-w", str(workspace), "--provider", "openai",
        "--model", "remembered-model", "--base-url", fake_openai.base_url, "--no-verify",
        "-o", "json", env=env,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)["session_id"]
    sent_before = len(fake_openai.requests)

    fake_openai.enqueue(
        reply(tool_calls=[("write_file", {"path": "b.txt", "content": "two\n"})]),
        reply(tool_calls=[("finish", {"summary": "wrote b"})]),
    )
    follow = journeyman("run", "--continue", session[:12], "now write b.txt", "-o", "json", env=env)

    assert follow.returncode == 0, follow.stderr
    result = json.loads(follow.stdout)
    assert result["session_id"] == session and result["final_text"] == "wrote b"
    request = fake_openai.requests[sent_before].json
    assert request["model"] == "remembered-model"  # the session's own settings
    contents = [str(m.get("content")) for m in request["messages"] if m["role"] == "user"]
    assert "write a.txt" in contents[0] and contents[-1] == "now write b.txt"
    assert (workspace / "b.txt").read_text() == "two\n"
    store = SessionStore(sessions)
    try:
        assert [c.path for c in store.file_changes(session)] == ["a.txt", "b.txt"]
    finally:
        store.close()


def test_continuing_an_unknown_session_says_so(tmp_path: Path) -> None:
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"))
    (tmp_path / "sessions").mkdir()
    done = journeyman("run", "--continue", "nope", "more", env=env)
    assert done.returncode == 2
    assert "nope" in done.stderr and "Traceback" not in done.stderr


def test_an_empty_follow_up_is_refused(tmp_path: Path) -> None:
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"))
    done = journeyman("run", "--continue", "abc", " ", env=env)
    assert done.returncode == 2 and "follow-up message is empty" in done.stderr


def test_chat_with_an_unknown_session_says_so(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"))
    done = journeyman("chat", "--resume", "nope", env=env)
    assert done.returncode == 2
    assert "nope" in done.stderr and "Traceback" not in done.stderr


def test_journeyman_alone_without_a_terminal_prints_the_commands(tmp_path: Path) -> None:
    done = journeyman(env=clean_env(), cwd=tmp_path)
    assert done.returncode == 2
    assert "chat" in done.stdout and "run" in done.stdout and "Traceback" not in done.stderr


def test_a_refusal_in_the_first_message_does_not_fail_the_follow_up(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = clean_env(OPENAI_API_KEY="sk-test", JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"))
    fake_openai.enqueue(
        reply(tool_calls=[("run_command", {"command": "echo hi"})]),
        reply(tool_calls=[("finish", {"summary": "could not run it"})]),
    )
    first = journeyman(
        "run", "run echo hi", "-w", str(workspace), "--provider", "openai", "--model", "m",
        "--base-url", fake_openai.base_url, "--no-verify", "-o", "json", env=env,
    )  # fmt: skip
    assert first.returncode != 0  # nobody to approve the command: refused
    assert json.loads(first.stdout)["finish_reason"] == "refused"
    session = json.loads(first.stdout)["session_id"]

    fake_openai.enqueue(reply(tool_calls=[("finish", {"summary": "hello"})]))
    follow = journeyman("run", "--continue", session, "just say hello", "-o", "json", env=env)

    assert follow.returncode == 0, follow.stdout + follow.stderr
    result = json.loads(follow.stdout)
    assert result["finish_reason"] == "completed" and result["refused_calls"] == []
