"""`journeyman chat` builds its agent with the same language and MCP server choices as `run`
(--lsp/--no-lsp, --mcp/--no-mcp), without opening the app."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from journeyman.cli import chat_cmd
from journeyman.cli.app import app
from journeyman.cli.chat_cmd import chat
from journeyman.core.lifecycle import AgentState
from journeyman.economics.choices import BudgetMode
from journeyman.integrations.mcp import McpManager
from journeyman.loop.config import ModeName
from journeyman.policy.permissions import PermissionMode
from journeyman.tools.choices import SandboxKind
from journeyman.tui.app import ChatApp
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env
from tests.tui.harness import finish_turn, submit


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[ChatApp]:
    """The apps `chat` would have run."""
    apps: list[ChatApp] = []
    monkeypatch.setattr(ChatApp, "run", lambda self, **_: apps.append(self))
    monkeypatch.setattr(chat_cmd, "terminal_problem", lambda: None)  # pytest has no terminal
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", str(tmp_path / "user-config"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("JOURNEYMAN_LSP", raising=False)
    return apps


def open_chat(tmp_path: Path, **options: object) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".journeyman").mkdir(parents=True, exist_ok=True)
    servers = {"mcpServers": {"calc": {"command": "no-such-program-jm"}}}
    (workspace / ".journeyman" / "mcp.json").write_text(json.dumps(servers))
    chat(
        workspace=workspace,
        provider="openai",
        model="gpt-4.1-mini",
        base_url="http://127.0.0.1:9/v1",
        session_dir=tmp_path / "sessions",
        **options,  # type: ignore[arg-type]
    )


def test_chat_mcp_starts_the_workspace_servers_and_no_mcp_none(
    tmp_path: Path, opened: list[ChatApp], capsys: pytest.CaptureFixture[str]
) -> None:
    open_chat(tmp_path, mcp=True, lsp=False)
    agent = opened[-1].agent
    assert isinstance(agent.mcp, McpManager)
    assert [s.name for s in agent.mcp.status()] == ["calc"]
    assert agent.lsp is None

    open_chat(tmp_path, mcp=False, lsp=False)
    assert opened[-1].agent.mcp is None

    open_chat(tmp_path, lsp=False)  # by default the workspace's servers need --mcp
    assert opened[-1].agent.mcp is None
    assert "pass --mcp to start them" in capsys.readouterr().err


@pytest.mark.parametrize("stdin_is_a_file", [True, False])
def test_chat_without_a_terminal_exits_2_with_one_line(
    tmp_path: Path, stdin_is_a_file: bool
) -> None:
    """No escape codes into a file, no hang waiting for keys that never come; a terminal on
    stdin alone is not enough either."""
    terminal, other_end = pty.openpty()
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"), OPENAI_API_KEY="sk-test")
    args = ["chat", "--provider", "openai", "--model", "gpt-4.1-mini"]
    args += ["--base-url", "http://127.0.0.1:9/v1", "--no-lsp", "--no-mcp"]
    done = subprocess.run(
        [sys.executable, "-m", "journeyman", *args],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL if stdin_is_a_file else other_end,
        capture_output=True,
        text=True,
        timeout=60,
    )
    os.close(terminal)
    os.close(other_end)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "needs a terminal" in done.stderr
    assert ("stdin and stdout" if stdin_is_a_file else "stdout") in done.stderr


def test_chat_takes_runs_limits_check_and_sandbox(tmp_path: Path, opened: list[ChatApp]) -> None:
    open_chat(
        tmp_path,
        lsp=False,
        mcp=False,
        max_iterations=7,
        max_budget_usd=1.5,
        max_total_tokens=1000,
        budget_mode=BudgetMode.ADVISORY,
        verify="make check",
        sandbox=SandboxKind.LOCAL,
    )
    config = opened[-1].agent.config
    assert (config.max_iterations, config.max_budget_usd, config.max_total_tokens) == (
        7,
        1.5,
        1000,
    )
    assert config.budget_mode is BudgetMode.ADVISORY
    assert config.verify_command == "make check" and config.verify
    assert config.sandbox is SandboxKind.LOCAL

    open_chat(tmp_path, lsp=False, mcp=False, no_verify=True)
    assert opened[-1].agent.config.verify is False


def test_chat_edit_tool_chooses_the_tool_the_model_edits_with(
    tmp_path: Path, opened: list[ChatApp]
) -> None:
    (tmp_path / "ws").mkdir()
    args = ["chat", "-w", str(tmp_path / "ws"), "--provider", "openai", "--model", "gpt-4.1-mini"]
    args += ["--session-dir", str(tmp_path / "sessions"), "--no-lsp", "--no-mcp"]
    for choice, offered, not_offered in (
        ("edit_file", "edit_file", "apply_patch"),
        ("apply_patch", "apply_patch", "edit_file"),
    ):
        done = CliRunner().invoke(app, [*args, "--edit-tool", choice])
        assert done.exit_code == 0, done.output
        agent = opened[-1].agent
        assert agent.config.edit_tool == choice
        assert agent.registry.get(offered) is not None and agent.registry.get(not_offered) is None
    refused = CliRunner().invoke(app, [*args, "--edit-tool", "sed"])
    assert refused.exit_code == 2 and "--edit-tool" in refused.output


def test_chat_parses_the_run_options_on_the_command_line(tmp_path: Path) -> None:
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"), OPENAI_API_KEY="sk-test")
    options = ["--max-iterations", "3", "--max-budget-usd", "0.5", "--max-total-tokens", "900"]
    options += ["--budget-mode", "soft", "--verify", "true", "--no-verify", "--sandbox", "local"]
    done = subprocess.run(
        [sys.executable, "-m", "journeyman", "chat", "--provider", "openai", *options],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "needs a terminal" in done.stderr  # parsed, then stopped
    refused = subprocess.run(
        [sys.executable, "-m", "journeyman", "chat", "--max-iterations", "0"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "--max-iterations" in refused.stderr


def test_chat_refuses_resume_together_with_last(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"))
    done = subprocess.run(
        [sys.executable, "-m", "journeyman", "chat", "--resume", "abc", "--last"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == "journeyman: give --resume SESSION or --last, not both\n"


def test_leaving_the_app_names_the_session_and_how_to_reopen_it(
    tmp_path: Path,
    opened: list[ChatApp],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    open_chat(tmp_path, lsp=False, mcp=False)  # quit before any message: nothing to reopen
    assert "saved" not in capsys.readouterr().out

    def talk_then_quit(app: ChatApp, **_: object) -> None:
        app.conversation.session_id = "20261127-101010-abcd1234"

    monkeypatch.setattr(ChatApp, "run", talk_then_quit)
    open_chat(tmp_path, lsp=False, mcp=False)
    out = capsys.readouterr().out
    assert "session 20261127-101010-abcd1234 saved" in out
    assert "`journeyman chat --last`" in out
    assert "`journeyman chat --resume 20261127-101010-abcd1234`" in out


async def test_a_mode_model_and_plan_switched_in_the_app_come_back_with_chat_resume(
    fake_openai: FakeOpenAIServer,
    tmp_path: Path,
    opened: list[ChatApp],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_openai.enqueue(reply(tool_calls=[("finish", {"summary": "first"})]))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    sessions = tmp_path / "sessions"
    chat(
        workspace=workspace,
        provider="openai",
        model="gpt-4.1-mini",
        base_url=fake_openai.base_url,
        session_dir=sessions,
        lsp=False,
        mcp=False,
        no_verify=True,
    )
    app = opened[-1]
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "hello")
        await finish_turn(pilot)
        for command in ("/mode plan", "/plan", "/model gpt-4.1"):
            await submit(pilot, command)
    assert app.agent.config.mode is ModeName.PLAN_SOLVE  # the switches took
    assert app.agent.lifecycle.state is AgentState.DISPOSED  # the app exited: disposed of

    chat(resume=app.results[0].session_id, session_dir=sessions, lsp=False, mcp=False)
    resumed = opened[-1].agent
    assert resumed is not app.agent
    assert resumed.config.mode is ModeName.PLAN_SOLVE
    assert resumed.config.permissions is not None
    assert resumed.config.permissions.mode is PermissionMode.PLAN
    assert (resumed.provider.name, resumed.provider.model) == ("openai", "gpt-4.1")
