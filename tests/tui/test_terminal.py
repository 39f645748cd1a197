"""The real `journeyman` binary in a real terminal (tmux): it opens the app, a message gets the
model's answer on screen, /extend's dialog answers to keys, Ctrl-D quits with status 0."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (Debian package tmux)"
)


class Tmux:
    def __init__(self) -> None:
        self.socket = f"jm-test-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.target)

    target = "jm"

    def wait_for(self, text: str, timeout_s: float = 60) -> float:
        """Seconds until `text` is on screen; fails with the screen when it never shows."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if text in self.screen():
                return time.monotonic() - start
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared; the screen:\n{self.screen()}")

    def kill(self) -> None:
        self("kill-server")

    def type_line(self, line: str) -> None:
        self("send-keys", "-t", self.target, "-l", line)
        self("send-keys", "-t", self.target, "Enter")


def chat_command(server: FakeOpenAIServer, tmp_path: Path) -> Callable[..., str]:
    """The shell line that opens `journeyman ARGS...` on the fake server in `tmp_path / "ws"`,
    then prints its exit status as JM-EXITED-N."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    env = clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=server.base_url,
        JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"),
        TERM="xterm-256color",
    )
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())

    def command(*args: str) -> str:
        return (
            f"cd {shlex.quote(str(workspace))} && env -i {exports} "
            f"{shlex.quote(sys.executable)} -m journeyman {' '.join(args)}; "
            "echo JM-EXITED-$?; sleep 60"
        )

    return command


def test_the_binary_opens_the_app_answers_and_quits(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(reply("hello from the fake model"))
    command = chat_command(fake_openai, tmp_path)
    tmux = Tmux()
    try:
        tmux("new-session", "-d", "-s", "jm", "-x", "100", "-y", "30", command())
        seconds = tmux.wait_for("Ask journeyman")
        print(f"journeyman -> interactive prompt: {seconds:.2f} s")
        tmux.wait_for("journeyman in")  # the welcome line names the workspace (long: it may wrap)
        welcome = " ".join(tmux.screen().split())  # words, wherever the lines wrap
        assert "sandbox " in welcome and "permissions " in welcome
        tmux("send-keys", "-t", "jm", "-l", "say hello")
        tmux("send-keys", "-t", "jm", "Enter")
        tmux.wait_for("hello from the fake model")
        assert "session 2" in tmux.screen()  # the status bar names the session
        tmux("send-keys", "-t", "jm", "C-d")
        tmux.wait_for("JM-EXITED-0")
        # the terminal is back: the session and how to reopen it are left on it
        farewell = tmux.screen()
        assert "`journeyman chat --last` reopens" in farewell
        assert re.search(r"session 2\d{7}-\S+ saved", farewell), farewell
        # `journeyman chat --last` reopens the session with its history on screen
        tmux("new-session", "-d", "-s", "again", "-x", "100", "-y", "30", command("chat", "--last"))
        tmux.target = "again"
        tmux.wait_for("Ask journeyman")
        # the stored history is mounted once the app is up: wait for it, on a busy machine too
        tmux.wait_for("hello from the fake model")
        assert "> say hello" in tmux.screen()
        tmux("send-keys", "-t", "again", "C-c")
        tmux("send-keys", "-t", "again", "C-c")
        tmux.wait_for("JM-EXITED-0")
    finally:
        tmux.kill()
    assert fake_openai.requests[0].json["messages"][-1]["content"] == "say hello"


def test_ctrl_c_mid_turn_reads_cancelled_and_ctrl_d_names_the_session(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(reply(tool_calls=[("run_command", {"command": "sleep 30"})]))
    command = chat_command(fake_openai, tmp_path)
    tmux = Tmux()
    try:
        tmux("new-session", "-d", "-s", "jm", "-x", "120", "-y", "40", command("chat", "--yes"))
        tmux.wait_for("Ask journeyman")
        tmux.type_line("wait a while")
        tmux.wait_for("running run_command sleep 30")  # the command's card, mid-run
        tmux("send-keys", "-t", "jm", "C-c")
        tmux.wait_for("cancelled; the session is saved")
        screen = tmux.screen()
        assert "cancelled run_command sleep 30" in screen, screen
        assert "running run_command" not in screen and "CANCELLED" in screen
        assert "ERROR" not in screen, screen
        tmux("send-keys", "-t", "jm", "C-d")
        tmux.wait_for("JM-EXITED-0")
        farewell = tmux.screen()
        assert re.search(r"session 2\d{7}-\S+ saved", farewell), farewell
        assert "`journeyman chat --last` reopens" in farewell
    finally:
        tmux.kill()


EXTEND_CHAT = ("chat", "--max-total-tokens", "100000", "--no-verify")
EXTEND_QUESTION = "Extend the budget by +50,000 tokens?"


def test_extend_answers_n_and_y_and_the_app_goes_on(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(reply("still listening"))
    command = chat_command(fake_openai, tmp_path)
    tmux = Tmux()
    try:
        tmux("new-session", "-d", "-s", "jm", "-x", "120", "-y", "40", command(*EXTEND_CHAT))
        tmux.wait_for("Ask journeyman")
        tmux.type_line("/extend")
        tmux.wait_for(EXTEND_QUESTION)
        tmux("send-keys", "-t", "jm", "n")
        tmux.wait_for("budget extension denied")
        tmux.type_line("/extend")
        tmux.wait_for(EXTEND_QUESTION)
        tmux("send-keys", "-t", "jm", "y")
        tmux.wait_for("budget extension granted")
        tmux.type_line("/budget")
        tmux.wait_for("tokens 0 of 150000")
        tmux.type_line("are you there?")
        tmux.wait_for("still listening")
        tmux("send-keys", "-t", "jm", "C-d")
        tmux.wait_for("JM-EXITED-0")
    finally:
        tmux.kill()


@pytest.mark.slow
def test_an_unanswered_extend_closes_after_60_s_and_keys_still_work(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    command = chat_command(fake_openai, tmp_path)
    tmux = Tmux()
    try:
        tmux("new-session", "-d", "-s", "jm", "-x", "120", "-y", "40", command(*EXTEND_CHAT))
        tmux.wait_for("Ask journeyman")
        tmux.type_line("/extend")
        tmux.wait_for(EXTEND_QUESTION)
        seconds = tmux.wait_for("budget extension denied", timeout_s=180)
        print(f"/extend unanswered -> denied: {seconds:.1f} s")
        assert EXTEND_QUESTION not in tmux.screen()
        tmux.type_line("/cost")
        tmux.wait_for("0 model call(s)")
        tmux("send-keys", "-t", "jm", "C-d")
        tmux.wait_for("JM-EXITED-0")
    finally:
        tmux.kill()
