"""run_command: exit codes, output caps, environment scrubbing and killing process groups."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from journeyman.core.messages import ToolCall
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.shell import (
    OutputBuffer,
    RunCommandArgs,
    RunCommandTool,
    looks_secret,
    scrub_env,
)

from .conftest import CallTool


def alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # not Linux
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat[stat.rfind(")") + 2] not in "ZX"


async def wait_gone(*pids: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(alive(pid) for pid in pids):
            return True
        await asyncio.sleep(0.02)
    return False


async def read_pids(path: Path, count: int, within: float = 5.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            words = path.read_text().split()
            if len(words) >= count:
                return [int(word) for word in words]
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} was not written")


async def test_success(call: CallTool) -> None:
    result = await call("run_command", command="echo hello")
    assert not result.is_error
    assert result.content.startswith("hello\n[exit code 0, after ")
    assert result.metadata["exit_code"] == 0
    assert result.metadata["timed_out"] is False
    assert isinstance(result.metadata["duration"], float)


async def test_non_zero_exit_is_not_a_tool_error(call: CallTool) -> None:
    result = await call("run_command", command="echo out; echo err >&2; exit 3")
    assert not result.is_error
    assert result.metadata["exit_code"] == 3
    assert "out\nerr\n" in result.content
    assert "[exit code 3 (non-zero)" in result.content


async def test_no_output_and_empty_stdin(call: CallTool) -> None:
    result = await call("run_command", command="cat")
    assert result.content.startswith("(no output)\n[exit code 0")


async def test_bash_features_and_cwd(call: CallTool, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    result = await call("run_command", command="[[ -d . ]] && pwd", cwd="sub")
    assert result.content.startswith(f"{workspace}/sub\n")
    assert result.metadata["cwd"] == "sub"


async def test_cwd_must_be_a_directory(call: CallTool, workspace: Path) -> None:
    (workspace / "file.txt").write_text("")
    not_dir = await call("run_command", command="pwd", cwd="file.txt")
    assert not_dir.is_error and "not a directory" in not_dir.content
    escape = await call("run_command", command="pwd", cwd="..")
    assert escape.is_error and "'..'" in escape.content


async def test_arguments_are_validated(call: CallTool) -> None:
    assert (await call("run_command", command="")).is_error
    assert (await call("run_command", command="true", timeout=0)).is_error
    assert (await call("run_command", command="true", shell="zsh")).is_error


async def test_timeout_is_capped(ctx: ToolContext) -> None:
    tool = RunCommandTool(max_timeout=5)
    result = await tool.execute(RunCommandArgs(command="true", timeout=100), ctx)
    assert "timeout lowered from 100 s to the maximum, 5 s" in result.content


async def test_output_keeps_head_and_tail(call: CallTool) -> None:
    command = "printf 'HEAD'; head -c 50000000 /dev/zero | tr '\\0' 'a'; printf 'TAIL\\n'"
    result = await call("run_command", command=command)
    assert result.metadata["output_bytes"] == 50_000_009
    assert result.metadata["truncated"] is True
    assert result.content.startswith("HEADaaa")
    assert "[... 49980009 bytes of output omitted ...]" in result.content
    assert "aaaTAIL\n[exit code 0" in result.content
    assert len(result.content) < 21_000


def test_output_buffer() -> None:
    buffer = OutputBuffer(head=4, tail=3)
    for chunk in (b"ab", b"cdef", b"gh", b"ij"):
        buffer.feed(chunk)
    assert bytes(buffer.head) == b"abcd" and bytes(buffer.tail) == b"hij"
    assert buffer.omitted == 3
    assert buffer.render() == "abcd\n[... 3 bytes of output omitted ...]\nhij"
    small = OutputBuffer(head=10, tail=10)
    small.feed("é".encode())
    assert small.render() == "é"


async def test_secrets_are_scrubbed_from_the_environment(
    call: CallTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "s3cret-key")
    monkeypatch.setenv("GITHUB_TOKEN", "s3cret-token")
    monkeypatch.setenv("AWS_REGION", "s3cret-aws")
    # credentials whose names no heuristic recognises: only an allow-list keeps them out
    for name in ("GH_PAT", "MYSQL_PWD", "DOCKER_AUTH_CONFIG", "CI_JOB_JWT", "SENTRY_DSN"):
        monkeypatch.setenv(name, f"s3cret-{name.lower()}")
    monkeypatch.setenv("JM_HARMLESS", "not-on-the-list")
    monkeypatch.setenv("LC_TIME", "C.UTF-8")
    result = await call("run_command", command="env")
    assert "s3cret" not in result.content
    assert "JM_HARMLESS" not in result.content
    assert "LC_TIME=C.UTF-8" in result.content and "PATH=" in result.content
    assert "PAGER=cat" in result.content


async def test_passthrough_keeps_named_variables(
    workspace: Path, registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "allowed")
    ctx = ToolContext(workspace=workspace, env_passthrough=("FAKE_API_KEY",))
    call = ToolCall("c", "run_command", {"command": "echo $FAKE_API_KEY"})
    result = await registry.execute(call, ctx, 30)
    assert result.content.startswith("allowed\n")


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("FAKE_API_KEY", True),
        ("OPENAI_API_KEY", True),
        ("OPENAI_BASE_URL", True),
        ("ANTHROPIC_AUTH", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_PROFILE", True),
        ("GITHUB_TOKEN", True),
        ("HF_TOKEN", True),
        ("DB_PASSWORD", True),
        ("client_secret", True),
        ("STRIPE_KEY", True),
        ("PATH", False),
        ("HOME", False),
        ("SSH_AUTH_SOCK", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("GIT_ASKPASS", False),
        ("KEYBOARD", False),
    ],
)
def test_looks_secret(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret


def test_scrub_env() -> None:
    env = scrub_env({"PATH": "/bin", "MY_TOKEN": "t", "OTHER_TOKEN": "o"}, ["OTHER_TOKEN"])
    assert env["PATH"] == "/bin" and env["OTHER_TOKEN"] == "o" and "MY_TOKEN" not in env


async def test_background_child_holding_output_does_not_hang(
    call: CallTool, workspace: Path
) -> None:
    started = time.monotonic()
    result = await call("run_command", command="echo start; sleep 30 & echo $! > bg.pid")
    assert time.monotonic() - started < 5
    assert not result.is_error
    assert "start" in result.content and "background processes" in result.content
    (pid,) = await read_pids(workspace / "bg.pid", 1)
    assert await wait_gone(pid)


async def test_background_child_with_redirected_output_keeps_running(
    call: CallTool, workspace: Path
) -> None:
    result = await call("run_command", command="sleep 30 > /dev/null 2>&1 & echo $!")
    pid = int(result.content.split()[0])
    try:
        assert "background processes" not in result.content
        assert alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


async def test_timeout_kills_the_whole_group(call: CallTool, workspace: Path) -> None:
    started = time.monotonic()
    result = await call(
        "run_command", command="sleep 30 & echo $$ $! > pids; echo waiting; sleep 30", timeout=0.5
    )
    assert time.monotonic() - started < 5
    assert result.is_error
    assert result.metadata["timed_out"] is True
    assert "waiting" in result.content
    assert "still running after 0.5 s and was killed" in result.content
    shell, grandchild = await read_pids(workspace / "pids", 2)
    assert await wait_gone(shell, grandchild)


async def test_sigterm_ignored_leads_to_sigkill(ctx: ToolContext) -> None:
    tool = RunCommandTool(kill_grace=0.2)
    command = "trap '' TERM; sleep 30 & echo $$ $! > pids; sleep 30"
    result = await tool.execute(RunCommandArgs(command=command, timeout=0.3), ctx)
    assert result.metadata["timed_out"] is True
    shell, grandchild = await read_pids(ctx.workspace / "pids", 2)
    assert await wait_gone(shell, grandchild)


async def test_cancellation_kills_the_group_and_propagates(ctx: ToolContext) -> None:
    tool = RunCommandTool()
    args = RunCommandArgs(command="sleep 30 & echo $$ $! > pids; wait")
    task = asyncio.create_task(tool.execute(args, ctx))
    shell, grandchild = await read_pids(ctx.workspace / "pids", 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not alive(shell) or await wait_gone(shell)
    assert await wait_gone(grandchild)


async def test_registry_timeout_cancels_and_kills(registry: ToolRegistry, ctx: ToolContext) -> None:
    call = ToolCall("c", "run_command", {"command": "sleep 30 & echo $$ $! > pids; wait"})
    result = await registry.execute(call, ctx, 0.5)
    assert result.is_error and result.metadata["error"] == "timeout"
    shell, grandchild = await read_pids(ctx.workspace / "pids", 2)
    assert await wait_gone(shell, grandchild)
