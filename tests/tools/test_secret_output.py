"""The agent's own secrets never reach the model through a tool result, whatever the sandbox
and the tool: `journeyman run` as a user runs it, against the fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journeyman.core.messages import ToolCall
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm

API_KEY = "sk-test-own-provider-key-0123456789"
ODD_SECRET = 'pa"ss\\wörd-9876543210'


def tool_messages(server: FakeOpenAIServer) -> str:
    """Everything the model was sent as tool results."""
    last = server.requests[-1].json["messages"]
    return "\n".join(str(m["content"]) for m in last if m["role"] == "tool")


@pytest.mark.parametrize("sandbox", ["local", "auto"])
def test_environ_env_and_files_come_back_redacted(
    fake_openai: FakeOpenAIServer, tmp_path: Path, sandbox: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "leak.txt").write_text(f"key={API_KEY}\n{json.dumps({'p': ODD_SECRET})}\n")
    fake_openai.enqueue(
        reply(
            tool_calls=[
                (
                    "run_command",
                    {"command": "tr '\\0' '\\n' < /proc/$PPID/environ; echo ---; env; echo ---"},
                ),
                ("run_command", {"command": 'cat leak.txt; printf %s "$SERVICE_PASSWORD"'}),
                ("read_file", {"path": "leak.txt"}),
            ]
        ),
        reply(tool_calls=[("finish", {"summary": "looked around"})]),
    )
    env = clean_env(
        OPENAI_API_KEY=API_KEY,
        OPENAI_BASE_URL=fake_openai.base_url,
        SERVICE_PASSWORD=ODD_SECRET,
    )
    done = jm(
        *("run", "--yes", "look", "-w", str(workspace), "--sandbox", sandbox),
        *("--session-dir", str(tmp_path / "sessions")),
        env=env,
        timeout=90,
    )
    sent = tool_messages(fake_openai)
    assert "---" in sent and "key=" in sent, done.stderr
    assert API_KEY not in sent and "0123456789" not in sent
    assert "9876543210" not in sent and "wörd" not in sent
    assert "[REDACTED]" in sent


async def test_every_tool_result_is_scrubbed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    (workspace / "k.txt").write_text(API_KEY)
    registry = ToolRegistry(default_tools())
    ctx = ToolContext(workspace=workspace)
    for call in (
        ToolCall("1", "read_file", {"path": "k.txt"}),
        ToolCall("2", "grep", {"pattern": "sk-test"}),
        ToolCall("3", "run_command", {"command": "cat k.txt"}),
        ToolCall("4", "edit_file", {"path": "k.txt", "old_string": "nope", "new_string": "x"}),
    ):
        result = await registry.execute(call, ctx, 30)
        assert API_KEY not in result.content, result.content


async def test_commands_do_not_get_the_agents_secrets(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("DEPLOY_TOKEN", "deploy-token-value-1234")
    registry = ToolRegistry(default_tools())
    ctx = ToolContext(workspace=workspace)
    result = await registry.execute(
        ToolCall("1", "run_command", {"command": "env | cut -d= -f1 | sort"}), ctx, 30
    )
    names = result.content.split()
    assert "ANTHROPIC_API_KEY" not in names and "DEPLOY_TOKEN" not in names
    assert "PATH" in names
