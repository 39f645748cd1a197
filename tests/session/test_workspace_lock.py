"""One process at a time writes to a workspace: the lock names its holder, lives outside the
workspace, is shared inside one process, and goes with its process, even on kill -9."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import journeyman
from journeyman import Agent, AgentConfig
from journeyman.loop.config import ModeName
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.workspace_lock import WorkspaceBusyError, WorkspaceLock
from tests.support.cli import clean_env

REPO = Path(__file__).resolve().parents[2]

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from journeyman.session.workspace_lock import WorkspaceLock

    workspace, locks, ready = (Path(a) for a in sys.argv[1:4])
    lock_dir = None if locks.name == "default" else locks  # "default": the user's state folder
    WorkspaceLock(workspace, session_id="s-holder", lock_dir=lock_dir).acquire()
    ready.write_text("held")
    time.sleep(120)
    """
)


def hold(tmp_path: Path, workspace: Path, locks: str = "locks") -> subprocess.Popen[str]:
    ready = tmp_path / "ready"
    ready.unlink(missing_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(workspace), str(tmp_path / locks), str(ready)],
        cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for _ in range(600):
        if ready.exists():
            return holder
        assert holder.poll() is None, holder.communicate()
        time.sleep(0.05)
    pytest.fail("the holder never took the lock")


def test_a_second_process_is_refused_with_the_holder_then_kill_9_releases(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    holder = hold(tmp_path, workspace)
    try:
        with pytest.raises(WorkspaceBusyError) as refused:
            WorkspaceLock(workspace, lock_dir=tmp_path / "locks").acquire()
        message = str(refused.value)
        assert f"pid {holder.pid}" in message and "session s-holder" in message
        assert "since 20" in message and str(workspace) in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
    with WorkspaceLock(workspace, lock_dir=tmp_path / "locks") as lock:
        assert lock.held
    assert list(workspace.iterdir()) == []  # nothing of the lock is in the workspace


def test_the_same_folder_by_another_path_is_the_same_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "link").symlink_to(workspace)
    holder = hold(tmp_path, workspace)
    try:
        with pytest.raises(WorkspaceBusyError):
            WorkspaceLock(tmp_path / "link", lock_dir=tmp_path / "locks").acquire()
        other = tmp_path / "other"  # a swarm worktree, a batch copy: distinct paths
        other.mkdir()
        with WorkspaceLock(other, lock_dir=tmp_path / "locks"):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()


def test_one_process_shares_its_lock_until_the_last_release(tmp_path: Path) -> None:
    workspace, locks = tmp_path / "ws", tmp_path / "locks"
    workspace.mkdir()
    run = WorkspaceLock(workspace, lock_dir=locks)
    subagent = WorkspaceLock(workspace, lock_dir=locks)
    run.acquire()
    subagent.acquire()  # a subagent in the same process works in the same workspace
    run.release()
    probe = [sys.executable, "-c", (
        "import sys; from pathlib import Path; "
        "from journeyman.session.workspace_lock import WorkspaceLock as L; "
        "L(Path(sys.argv[1]), lock_dir=Path(sys.argv[2])).acquire()"
    ), str(workspace), str(locks)]  # fmt: skip
    still = subprocess.run(probe, cwd=REPO, env=clean_env(), capture_output=True, text=True)
    assert still.returncode != 0 and "WorkspaceBusyError" in still.stderr
    subagent.release()
    free = subprocess.run(probe, cwd=REPO, env=clean_env(), capture_output=True, text=True)
    assert free.returncode == 0, free.stderr


def test_an_unwritable_lock_folder_is_a_clear_error(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "locks").write_text("a file, not a folder")
    with pytest.raises(Exception, match="cannot lock workspace") as refused:
        WorkspaceLock(workspace, lock_dir=tmp_path / "locks").acquire()
    assert type(refused.value).__name__ == "ConfigurationError"


async def test_the_library_raises_a_typed_error_and_stores_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    holder = hold(tmp_path, workspace, locks="default")
    try:
        config = AgentConfig(session_dir=tmp_path / "sessions")
        agent = Agent(ScriptedProvider([ModelResponse(text="never")]), workspace=workspace,
                      config=config)  # fmt: skip
        with pytest.raises(journeyman.WorkspaceBusyError, match=f"pid {holder.pid}"):
            await agent.run("edit something")
        assert not (tmp_path / "sessions" / "journeyman.db").exists()
        asking = Agent(ScriptedProvider([ModelResponse(text="an answer")]), workspace=workspace,
                       config=config.model_copy(update={"mode": ModeName.ASK}))  # fmt: skip
        answered = await asking.run("what is in here?")  # a question changes nothing: no lock
        assert answered.success, answered.error
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
