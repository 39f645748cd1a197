"""One writer per workspace, through the CLI: a second run, resume or undo while a run holds the
workspace is refused (exit 2, naming the holder), read-only commands are not, and kill -9 of
the holder frees it. A run killed during a command is resumed with that command's edit in
diff and undo."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import hang, reply
from tests.support.cli import clean_env, journeyman

FINISH = reply(tool_calls=[("finish", {"summary": "done"})])


def start_run(env: dict[str, str], workspace: Path, sessions: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "journeyman", "run", "--yes", "--no-verify", "work",
         "-w", str(workspace), "--sandbox", "local", "--session-dir", str(sessions)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_until(condition: object, process: subprocess.Popen[str], what: str) -> None:
    assert callable(condition)
    for _ in range(1200):
        if condition():
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    pytest.fail(f"never happened: {what}")


def kill_9(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.communicate()


def stored_sessions(sessions: Path) -> int:
    if not (sessions / "journeyman.db").exists():
        return 0
    store = SessionStore(sessions)
    try:
        return len(store.list_sessions())
    finally:
        store.close()


def test_a_second_writer_is_refused_until_the_holder_is_killed(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace, sessions = tmp_path / "ws", tmp_path / "sessions"
    workspace.mkdir()
    fake_openai.enqueue(hang(60))
    fake_openai.default = FINISH
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    holder = start_run(env, workspace, sessions)
    try:
        wait_until(lambda: fake_openai.requests, holder, "the first run's model call")
        second = journeyman("run", "--yes", "--no-verify", "other", "-w", str(workspace),
                            "--sandbox", "local", "--session-dir", str(tmp_path / "elsewhere"),
                            env=env)  # fmt: skip
        assert second.returncode == 2, second.stderr
        assert f"pid {holder.pid}" in second.stderr and "session 20" in second.stderr
        assert "in use by another journeyman process" in second.stderr
        assert "Traceback" not in second.stderr
        assert stored_sessions(tmp_path / "elsewhere") == 0
        store = SessionStore(sessions)
        try:
            [running] = [s.record.id for s in store.list_sessions()]
        finally:
            store.close()
        fork = ("fork", running, "--at-step", "0", "--in-place")
        for command in (("resume", "--last"), ("undo",), fork):
            refused = journeyman(*command, "--session-dir", str(sessions), env=env, cwd=workspace)
            assert refused.returncode == 2, (command, refused.stdout, refused.stderr)
            assert f"pid {holder.pid}" in refused.stderr and "Traceback" not in refused.stderr
        for command in (("diff",), ("sessions", "list")):  # reading is never blocked
            read = journeyman(*command, "--session-dir", str(sessions), env=env, cwd=workspace)
            assert read.returncode == 0, (command, read.stderr)
    finally:
        kill_9(holder)
    after = journeyman("run", "--yes", "--no-verify", "again", "-w", str(workspace),
                       "--sandbox", "local", "--session-dir", str(sessions), env=env)  # fmt: skip
    assert after.returncode == 0, after.stderr


def test_resume_after_kill_9_during_a_command_recovers_its_edit(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace, sessions = tmp_path / "ws", tmp_path / "sessions"
    workspace.mkdir()
    (workspace / "kept.txt").write_text("kept\n")
    started = workspace / "started"
    command = "touch started; sleep 2; echo x > made.txt; sleep 60"
    fake_openai.enqueue(reply(tool_calls=[("run_command", {"command": command})]))
    fake_openai.default = FINISH
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    run = start_run(env, workspace, sessions)
    try:
        wait_until(lambda: (workspace / "made.txt").exists(), run, "the command's edit")
    finally:
        kill_9(run)
    assert started.exists()
    resumed = journeyman("resume", "--last", "--yes", "--session-dir", str(sessions),
                         env=env, cwd=workspace)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr and "ProgrammingError" not in resumed.stderr
    diff = journeyman("diff", "--session-dir", str(sessions), env=env, cwd=workspace)
    assert "+++ b/made.txt" in diff.stdout and "+x" in diff.stdout, diff.stderr
    undone = journeyman("undo", "--all", "--session-dir", str(sessions), env=env, cwd=workspace)
    assert undone.returncode == 0, undone.stderr
    assert "deleted made.txt" in undone.stdout
    assert not (workspace / "made.txt").exists() and (workspace / "kept.txt").exists()


def test_two_resumes_at_once_one_is_refused(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    workspace, sessions = tmp_path / "ws", tmp_path / "sessions"
    workspace.mkdir()
    fake_openai.enqueue(hang(60))
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    first = start_run(env, workspace, sessions)
    try:  # the session's row appears, then its process dies
        wait_until(lambda: fake_openai.requests, first, "the run's model call")
    finally:
        kill_9(first)
    fake_openai.enqueue(hang(60), hang(60))
    resume = [sys.executable, "-m", "journeyman", "resume", "--last", "--yes",
              "--session-dir", str(sessions)]  # fmt: skip
    resumes = [
        subprocess.Popen(
            resume,
            env=env,
            cwd=workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for _ in range(1200):
            if any(p.poll() is not None for p in resumes):
                break
            time.sleep(0.05)
        ended = [p for p in resumes if p.poll() is not None]
        assert len(ended) == 1, "both resumes ran, or neither ended"
        _, err = ended[0].communicate()
        assert ended[0].returncode == 2, err
        assert "journeyman process" in err and "Traceback" not in err
        assert [p.poll() for p in resumes].count(None) == 1  # the other one is running
    finally:
        for process in resumes:
            kill_9(process)
