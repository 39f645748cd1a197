"""`journeyman run` in a real pseudo-terminal while the model and a command take their time: a
live status line counts the seconds of each model call and command, with the turn, tokens and
cost, and is erased before anything else is written; the reply streams. Piped, the output has
neither the line nor any terminal control; --quiet has no line either; Ctrl-C during the wait
leaves no line behind."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from journeyman.cli.options import OutputFormat, streamed_text
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import Reply, hang, reply
from tests.fakes.server import RecordedRequest
from tests.support.cli import clean_env

ANSWER = "The answer is forty-two."
THINKING = re.compile(r"thinking · ([0-9]+) s")
ERASE = "\r\x1b[2K"


def slow_reply(delay_s: float) -> Callable[[RecordedRequest], Reply]:
    """The model's answer (its text, then `finish`), after `delay_s` seconds of silence."""

    def answer(_request: RecordedRequest) -> Reply:
        time.sleep(delay_s)
        return reply(ANSWER, tool_calls=[("finish", {"summary": "done"})])

    return answer


def command(server: FakeOpenAIServer, tmp_path: Path, *extra: str) -> list[str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return [
        sys.executable, "-m", "journeyman", "run", "--yes", "answer", "-w", str(workspace),
        "--session-dir", str(tmp_path / "sessions"), "--provider", "openai",
        "--model", "house-model", "--base-url", server.base_url, "--no-verify", *extra,
    ]  # fmt: skip


def environment() -> dict[str, str]:
    return clean_env(OPENAI_API_KEY="sk-test", TERM="xterm-256color", COLUMNS="120")


class Terminal:
    """A process whose stdout is the slave side of a pseudo-terminal; stdin is /dev/null
    (no prompts) and stderr a pipe, unless answers are typed."""

    def __init__(self, args: list[str], *, typed: str | None = None, **env: str) -> None:
        """`typed`: the process's stdin and stderr are the terminal too, with this typed ahead
        (a user answering its questions)."""
        master, slave = pty.openpty()
        self.master = master
        if typed is not None:
            os.write(master, typed.encode())
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL if typed is None else slave,
            stdout=slave,
            stderr=subprocess.PIPE if typed is None else slave,
            env={**environment(), **env},
        )
        os.close(slave)
        self.output = ""

    def read_until(self, done: Callable[[str], bool], timeout_s: float = 60) -> str:
        """Everything written so far, once `done(output)` holds or the terminal closed."""
        deadline = time.monotonic() + timeout_s
        while not done(self.output) and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the process exited and closed the terminal
                break
            if not chunk:
                break
            self.output += chunk.decode("utf-8", errors="replace")
        return self.output

    def finish(self) -> int:
        self.read_until(lambda _: False, timeout_s=60)
        code = self.process.wait(timeout=60)
        os.close(self.master)
        return code


def test_a_terminal_shows_the_seconds_while_the_model_thinks_then_the_streamed_reply(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(slow_reply(2.6))
    terminal = Terminal(command(fake_openai, tmp_path))
    code = terminal.finish()
    stderr = terminal.process.stderr.read().decode() if terminal.process.stderr else ""
    output = terminal.output
    assert code == 0, output + stderr
    seconds = {int(n) for n in THINKING.findall(output)}
    assert max(seconds, default=0) >= 2, output  # the count went on while the reply was awaited
    assert fake_openai.requests[0].body.get("stream") is True  # streamed by default here
    assert ANSWER in output
    # the line is erased before the reply is written, and never drawn after it
    before_answer = output[: output.index(ANSWER)]
    assert before_answer.endswith(ERASE) or before_answer.rstrip(" ").endswith(ERASE), output
    assert "thinking" not in output[output.index(ANSWER) :]
    assert "\x1b[?25l" not in output  # the cursor is never hidden: nothing to restore


def after(delay_s: float, answer: Reply) -> Callable[[RecordedRequest], Reply]:
    def late(_request: RecordedRequest) -> Reply:
        time.sleep(delay_s)
        return answer

    return late


def rows(output: str) -> list[str]:
    """The terminal's rows as a reader sees them: each erased row replaced by what was drawn
    after the erase (the status line while it was up, then the line written over it)."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)  # styles are not what is read
    return [row.split(ERASE)[-1] for row in plain.replace("\r\n", "\n").split("\n")]


def test_the_line_names_the_running_command_with_its_seconds_turn_and_tokens(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        after(0.5, reply(tool_calls=[("run_command", {"command": "sleep 2.2; echo slept"})])),
        after(0.5, reply(ANSWER, tool_calls=[("finish", {"summary": "done"})])),
    )
    terminal = Terminal(command(fake_openai, tmp_path, "--sandbox", "local"))
    code = terminal.finish()
    output = terminal.output
    assert code == 0, output
    running = re.findall(
        r"run_command sleep 2\.2; echo slept · ([0-9]+) s · turn 1 · 19 tokens", output
    )
    assert running and max(int(n) for n in running) >= 2, output
    assert "thinking · 0 s · turn 2 · 19 tokens" in output  # the second call counts the first
    # the command's result line was written over the erased status line, on a row of its own
    assert any(row.lstrip().startswith("✓") and "slept" in row for row in rows(output))
    assert not any("·" in row and "run_command" in row for row in rows(output)[:-1])
    assert rows(output)[-1] == ""  # nothing left below the summary


def test_quiet_has_no_live_line_and_no_streamed_text(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(slow_reply(1.5))
    terminal = Terminal(command(fake_openai, tmp_path, "--quiet"))
    assert terminal.finish() == 0, terminal.output
    assert "thinking" not in terminal.output and ERASE not in terminal.output
    assert not fake_openai.requests[0].body.get("stream")
    assert ANSWER in terminal.output


def test_an_approval_question_is_never_drawn_over(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """stdin, stdout and stderr on one terminal: the line is erased before the question, is not
    drawn while it waits, and comes back for the command it allowed."""
    fake_openai.enqueue(
        after(1.2, reply(tool_calls=[("run_command", {"command": "sleep 1.5; echo allowed"})])),
        after(0.2, reply(ANSWER, tool_calls=[("finish", {"summary": "done"})])),
    )
    args = [arg for arg in command(fake_openai, tmp_path, "--sandbox", "local") if arg != "--yes"]
    terminal = Terminal(args, typed="y\n")
    code = terminal.finish()
    output = terminal.output
    assert code == 0, output
    assert THINKING.search(output), output
    question = output.index("Allow it?")
    answered = output.index("\n", question)
    assert "·" not in output[question:answered], repr(output[question - 200 : answered])
    assert "needs your approval" in rows(output[:question])[-3], rows(output[:question])[-4:]
    assert re.search(r"run_command sleep 1\.5; echo allowed · 1 s", output[answered:]), output
    assert "allowed" in output[answered:]


def test_no_stream_turns_streaming_off_on_a_terminal(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(slow_reply(0))
    terminal = Terminal(command(fake_openai, tmp_path, "--no-stream"))
    assert terminal.finish() == 0, terminal.output
    assert not fake_openai.requests[0].body.get("stream")
    assert ANSWER in terminal.output


def test_stream_false_in_the_user_config_is_kept_on_a_terminal(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    config = tmp_path / "user-config"
    config.mkdir()
    (config / "config.toml").write_text("stream = false\n")
    fake_openai.enqueue(slow_reply(0))
    terminal = Terminal(command(fake_openai, tmp_path), JOURNEYMAN_CONFIG_DIR=str(config))
    assert terminal.finish() == 0, terminal.output
    assert not fake_openai.requests[0].body.get("stream")


def test_piped_text_output_has_no_live_line_and_no_terminal_controls(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(slow_reply(1.5))
    done = subprocess.run(
        command(fake_openai, tmp_path), capture_output=True, text=True, env=environment(),
        timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ANSWER in done.stdout
    assert "thinking" not in done.stdout + done.stderr
    for stream in (done.stdout, done.stderr):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", stream), repr(stream)
    assert not fake_openai.requests[0].body.get("stream")  # as before: no stream when piped


def test_stream_json_on_a_terminal_is_json_lines_only(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(slow_reply(1.5))
    terminal = Terminal(command(fake_openai, tmp_path, "-o", "stream-json"))
    assert terminal.finish() == 0, terminal.output
    lines = [line for line in terminal.output.replace("\r\n", "\n").split("\n") if line]
    assert lines
    types = [json.loads(line)["type"] for line in lines]
    assert "model_request" in types and "text_delta" in types
    assert "thinking" not in terminal.output


def test_ctrl_c_while_the_model_thinks_restores_the_cursor(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(hang(60))
    terminal = Terminal(command(fake_openai, tmp_path))
    terminal.read_until(lambda text: THINKING.search(text) is not None, timeout_s=30)
    assert THINKING.search(terminal.output), terminal.output
    terminal.process.send_signal(signal.SIGINT)
    code = terminal.finish()
    assert code == 130, terminal.output
    output = terminal.output
    assert output.rindex(ERASE) > output.rindex("thinking"), repr(output[-300:])


class _Terminal:
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("given", "fmt", "on_terminal", "expected"),
    [
        (None, OutputFormat.TEXT, True, True),  # a person watching: streamed
        (None, OutputFormat.TEXT, False, None),  # piped: the config decides, as before
        (False, OutputFormat.TEXT, True, False),  # --no-stream wins over the terminal
        (True, OutputFormat.TEXT, False, True),
        (None, OutputFormat.JSON, True, None),  # one JSON document: nothing to stream into
        (False, OutputFormat.STREAM_JSON, False, True),  # text deltas are events there
    ],
)
def test_when_the_reply_streams(
    monkeypatch: pytest.MonkeyPatch,
    given: bool | None,
    fmt: OutputFormat,
    on_terminal: bool,
    expected: bool | None,
) -> None:
    if on_terminal:
        monkeypatch.setattr(sys, "stdout", _Terminal())
    assert streamed_text(given, fmt) is expected


def test_a_stream_setting_in_the_config_is_kept_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdout", _Terminal())
    assert streamed_text(None, OutputFormat.TEXT, configured=True) is None
    assert streamed_text(True, OutputFormat.TEXT, configured=True) is True


def test_quiet_leaves_streaming_to_the_flag_and_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdout", _Terminal())
    assert streamed_text(None, OutputFormat.TEXT, quiet=True) is None  # not on by default
    assert streamed_text(True, OutputFormat.TEXT, quiet=True) is True  # --quiet --stream
    assert streamed_text(None, OutputFormat.STREAM_JSON, quiet=True) is True


NOISY_SERVER = """
import runpy, sys, threading, time
def chatter():
    while True:
        print("NOISE-FROM-THE-SERVER", file=sys.stderr, flush=True)
        time.sleep(0.1)
threading.Thread(target=chatter, daemon=True).start()
runpy.run_path(sys.argv[1], run_name="__main__")
"""


def test_a_server_writing_to_stderr_never_reaches_the_terminal(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The processes a run starts write nowhere near the status line: an MCP server chattering
    on its stderr the whole run (kept for its error report) shows nothing on the terminal."""
    from tests.integrations.mcp.conftest import SERVER_APP

    config = tmp_path / "config"
    config.mkdir()
    server = {"command": sys.executable, "args": ["-c", NOISY_SERVER, str(SERVER_APP)]}
    (config / "mcp.json").write_text(json.dumps({"mcpServers": {"noisy": server}}))
    fake_openai.enqueue(
        after(1.2, reply(tool_calls=[("noisy_add", {"a": 2, "b": 3})])),
        slow_reply(1.2),
    )
    terminal = Terminal(
        command(fake_openai, tmp_path, "--sandbox", "local"),
        typed="",
        JOURNEYMAN_CONFIG_DIR=str(config),
    )
    code = terminal.finish()
    output = terminal.output
    assert code == 0, output
    assert THINKING.search(output) and ANSWER in output, output
    tool_result = [m for m in fake_openai.requests[1].json["messages"] if m["role"] == "tool"]
    assert tool_result and "5" in str(tool_result[0]["content"])  # the server did answer
    assert "NOISE" not in output, output
