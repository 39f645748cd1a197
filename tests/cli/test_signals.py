"""SIGTERM and SIGHUP end `journeyman run` like Ctrl-C: the running command's whole process group
is stopped and the session gets the outcome `cancelled`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from journeyman.cli.signals import FORCE_AFTER_S
from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import hang, reply
from tests.support.cli import clean_env
from tests.support.waiting import wait_until


def group_members(group: int) -> list[int]:
    """Processes (not zombies) of a process group."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[2] == str(group) and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_termination_signal_cancels_the_run_and_its_command(
    fake_openai: FakeOpenAIServer, tmp_path: Path, sig: signal.Signals
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    pid_file = workspace / "group.txt"
    # the command writes its process group, then waits in a child of its own
    command = f"ps -o pgid= $$ > {pid_file.name}; sleep 300; echo never"
    fake_openai.enqueue(reply(tool_calls=[("run_command", {"command": command})]))
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    sessions = tmp_path / "sessions"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "journeyman", "run", "--yes", "wait", "-w", str(workspace)),
            *("--sandbox", "local", "-o", "stream-json", "--session-dir", str(sessions)),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(  # the command has started its sleep
            lambda: pid_file.exists() and pid_file.read_text().strip(), what="the command's start"
        )
        group = int(pid_file.read_text())
        wait_until(lambda: len(group_members(group)) >= 2, what="the command's sleep")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    finished = json.loads(out.splitlines()[-1])
    assert finished["type"] == "run_finished"
    assert finished["result"]["finish_reason"] == "cancelled"
    survivors = group_members(group)
    for pid in survivors:  # do not leave them behind when the test fails
        os.kill(pid, signal.SIGKILL)
    assert survivors == [], "the command's process group survived"
    store = SessionStore(sessions)
    try:
        (summary,) = store.list_sessions()
        assert summary.finish_reason == "cancelled"
    finally:
        store.close()


@pytest.mark.parametrize("waiting_on", ["model", "command"])
@pytest.mark.parametrize("gap_s", [0.0, 0.05, 0.3], ids=["at-once", "quick", "slower"])
def test_three_quick_ctrl_cs_end_the_run_cleanly(
    fake_openai: FakeOpenAIServer, tmp_path: Path, waiting_on: str, gap_s: float
) -> None:
    """The first Ctrl-C cancels the run; the next ones, landing in its cleanup or its exit,
    are ignored: exit 130, the outcome stored, no traceback."""
    workspace, sessions = tmp_path / "ws", tmp_path / "sessions"
    workspace.mkdir()
    if waiting_on == "model":
        fake_openai.enqueue(hang(60))
    else:
        command = "touch started; sleep 60"
        fake_openai.enqueue(reply(tool_calls=[("run_command", {"command": command})]))
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    proc = subprocess.Popen(
        [*(sys.executable, "-m", "journeyman", "run", "--yes", "wait", "-w", str(workspace)),
         *("--sandbox", "local", "--session-dir", str(sessions))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:

        def waiting() -> bool:
            assert proc.poll() is None, proc.communicate()
            started = (workspace / "started").exists()
            return bool(fake_openai.requests if waiting_on == "model" else started)

        wait_until(waiting, what=f"the run waiting on the {waiting_on}")
        time.sleep(0.2)
        for _ in range(3):
            proc.send_signal(signal.SIGINT)
            time.sleep(gap_s)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "cancelled" in err
    store = SessionStore(sessions)
    try:
        (summary,) = store.list_sessions()
        assert summary.finish_reason == "cancelled"
    finally:
        store.close()


STUCK_CLEANUP = """
import asyncio, sys
from journeyman.cli.signals import run_cancellable

async def main() -> None:
    print("running", flush=True)
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        print("cleaning up", flush=True)
        await asyncio.shield(asyncio.sleep(60))  # a cleanup that never ends

run_cancellable(main())
"""


def test_ctrl_c_after_waiting_on_a_stuck_cleanup_ends_the_process() -> None:
    """Ctrl-Cs right after the first are ignored; one sent after the grace period stops a
    cleanup that hangs, with exit 130 and no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK_CLEANUP], env=clean_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "running"
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline().strip() == "cleaning up"
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert proc.poll() is None  # a quick second Ctrl-C lets the cleanup go on
        time.sleep(FORCE_AFTER_S)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "stopped without finishing the cleanup" in err and "Traceback" not in err
