"""One process at a time runs a session: a second `resume` of a running session is refused
with the runner's pid (exit 2), and the lock goes with its process, even on kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from journeyman.session.lock import SessionBusyError, SessionLock
from journeyman.session.store import SessionStore
from tests.fakes.store import new_session
from tests.support.cli import clean_env

REPO = Path(__file__).resolve().parents[2]

HOLDING_RUN = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from journeyman import Agent, AgentConfig
    from journeyman.providers.base import ModelResponse
    from journeyman.providers.scripted import ScriptedProvider

    root, workspace, ready = (Path(a) for a in sys.argv[1:4])

    def hold(request):  # the run is under way: say so, then keep it running
        ready.write_text("running")
        time.sleep(120)
        return ModelResponse(text="late")

    config = AgentConfig(session_dir=root)
    agent = Agent(ScriptedProvider([hold]), workspace=workspace, config=config)
    asyncio.run(agent.run("wait"))
    """
)


def wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    for _ in range(600):
        if path.exists():
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    pytest.fail("the first process never started its run")


def test_a_second_process_cannot_resume_a_running_session(tmp_path: Path) -> None:
    root, workspace, ready = tmp_path / "sessions", tmp_path / "ws", tmp_path / "ready"
    workspace.mkdir()
    runner = subprocess.Popen(
        [sys.executable, "-c", HOLDING_RUN, str(root), str(workspace), str(ready)],
        cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(ready, runner)
        store = SessionStore(root)
        [summary] = store.list_sessions()
        store.close()
        session_id = summary.record.id

        second = subprocess.run(
            [sys.executable, "-m", "journeyman", "resume", session_id, "--session-dir", str(root),
             "--provider", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"],
            cwd=REPO, env=clean_env(OPENAI_API_KEY="sk-test"), capture_output=True, text=True,
            timeout=90,
        )  # fmt: skip
        assert second.returncode == 2, second.stderr
        assert f"pid {runner.pid}" in second.stderr and "Traceback" not in second.stderr
        with pytest.raises(SessionBusyError, match=f"pid {runner.pid}"):
            SessionLock(root, session_id).acquire()
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.communicate()

    # the operating system released the lock with the killed process
    with SessionLock(root, session_id) as lock:
        assert lock.held
        assert (root / "locks").stat().st_mode & 0o077 == 0


def test_the_store_claims_a_session_it_creates_or_resumes_until_closed(tmp_path: Path) -> None:
    first = SessionStore(tmp_path)
    new_session(first)
    with pytest.raises(SessionBusyError, match=f"pid {os.getpid()}"):
        SessionLock(tmp_path, "s1").acquire()
    first.close()

    second = SessionStore(tmp_path)
    second.clear_outcome("s1")  # what a resume does first
    with pytest.raises(SessionBusyError):
        SessionLock(tmp_path, "s1").acquire()
    second.close()
    SessionLock(tmp_path, "s1").acquire()


def test_a_lock_taken_twice_by_its_holder_is_one_lock(tmp_path: Path) -> None:
    lock = SessionLock(tmp_path, "../odd id")
    lock.acquire()
    lock.acquire()
    assert lock.path.parent == tmp_path / "locks"
    lock.release()
    assert not lock.held
