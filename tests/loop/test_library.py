"""The library on its own: `Agent("provider:model")`, the edit tool per provider, and a model
call that cannot outlast `max_duration_s`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import journeyman
from journeyman import Agent, AgentConfig, ConfigurationError, FinishReason
from journeyman.core.messages import ToolCall
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.tools.sandbox import SandboxKind
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import hang, keep_alive, reply


def config(tmp_path: Path, **fields: object) -> AgentConfig:
    return AgentConfig(
        session_dir=tmp_path / "sessions", sandbox=SandboxKind.LOCAL, verify=False, **fields
    )


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    return root


async def test_an_agent_from_a_spec_string_talks_to_that_provider(
    fake_openai: FakeOpenAIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    fake_openai.enqueue(reply("the answer is 4"))
    agent = Agent(
        "openai:gpt-4.1-mini",
        base_url=fake_openai.base_url,
        api_key="sk-test-library",
        workspace=workspace(tmp_path),
        config=config(tmp_path),
    )
    result = await agent.run("what is 2 + 2?")
    assert result.success and result.final_text == "the answer is 4"
    assert fake_openai.requests[0].body["model"] == "gpt-4.1-mini"
    assert fake_openai.requests[0].headers["authorization"] == "Bearer sk-test-library"


def test_base_url_without_a_spec_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="spec"):
        Agent(ScriptedProvider([]), base_url="http://127.0.0.1:9", workspace=workspace(tmp_path))


def test_openai_compatible_models_edit_with_apply_patch_the_others_with_edit_file(
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path)
    openai = Agent("openai:gpt-5-mini", api_key="sk-x", base_url="http://127.0.0.1:9", workspace=ws)
    anthropic = Agent("anthropic:claude-sonnet-4-5", api_key="sk-ant-x", workspace=ws)
    assert "apply_patch" in openai.registry.names and "edit_file" not in openai.registry.names
    assert "edit_file" in anthropic.registry.names and "apply_patch" not in anthropic.registry.names
    both = Agent(
        ScriptedProvider([]),
        workspace=ws,
        config=AgentConfig(edit_tool="both"),  # type: ignore[arg-type]
    )
    assert {"edit_file", "apply_patch"} <= set(both.registry.names)


@pytest.mark.parametrize("stall", ["hang", "keep_alive"])
async def test_a_stalled_model_call_ends_at_max_duration(
    fake_openai: FakeOpenAIServer,  # noqa: F811
    tmp_path: Path,
    stall: str,
) -> None:
    fake_openai.enqueue(hang(60) if stall == "hang" else keep_alive(seconds=60))
    agent = Agent(
        "openai:gpt-4.1-mini",
        base_url=fake_openai.base_url,
        api_key="sk-test-library",
        workspace=workspace(tmp_path),
        config=config(tmp_path, max_duration_s=2, stream=stall == "keep_alive"),
    )
    started = time.monotonic()
    result = await agent.run("anything")
    assert result.finish_reason is FinishReason.MAX_DURATION, result.error
    assert time.monotonic() - started < 2 + 10  # a bound, not a timing benchmark


def test_the_public_surface() -> None:
    for name in ("ToolContext", "ToolResult", "ToolKind", "create_provider", "RunFinished"):
        assert name in journeyman.__all__ and hasattr(journeyman, name)


async def test_a_reused_agent_refuses_to_run_after_close(tmp_path: Path) -> None:
    finish = ModelResponse("", (ToolCall("f", "finish", {"summary": "ok"}),))
    agent = Agent(
        ScriptedProvider([finish]), workspace=workspace(tmp_path), config=config(tmp_path)
    )
    assert (await agent.run("x")).success
    agent.close()
    with pytest.raises(journeyman.AgentError):
        await agent.run("again")


@pytest.mark.parametrize("mode", ["react", "phased"])
async def test_every_call_of_a_malformed_reply_gets_a_result(tmp_path: Path, mode: str) -> None:
    valid = ToolCall("ok", "read_file", {"path": "a.txt"})
    broken = ToolCall("bad", "read_file", {}, invalid="the arguments were not valid JSON")
    malformed = ModelResponse("", (valid, broken), format_error="one call could not be read")
    finish = ModelResponse("", (ToolCall("f", "finish", {"summary": "ok"}),))
    provider = ScriptedProvider([malformed, finish, finish, finish])
    ws = workspace(tmp_path)
    (ws / "a.txt").write_text("a\n")
    agent = Agent(
        provider,
        workspace=ws,
        config=config(tmp_path, mode=mode, verify_command="true", max_iterations=6),
    )
    await agent.run("read a.txt")
    second = list(provider.requests[1].messages)
    answered = {m.tool_result.call_id for m in second if m.tool_result is not None}
    assert {"ok", "bad"} <= answered
    bad = next(m.tool_result for m in second if m.tool_result and m.tool_result.call_id == "bad")
    assert bad.is_error and "not valid JSON" in bad.content
