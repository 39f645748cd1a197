"""Resume restores the model-visible history and counters exactly: the first request after a
crash equals the one the uninterrupted run sent at that point."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.core.messages import ToolCall, Usage
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.providers.scripted import ScriptedProvider, billed_prompt_tokens
from journeyman.session.store import SessionStore
from tests.fakes.agents import Crash, crash

STEPS = 8


def billed(response: ModelResponse) -> Any:
    """`response`, reporting the prompt tokens a provider would bill for what it was sent."""

    def respond(request: ModelRequest) -> ModelResponse:
        usage = Usage(billed_prompt_tokens(request), response.usage.output_tokens)
        return dataclasses.replace(response, usage=usage)

    return respond


def script() -> list[Any]:
    steps: list[Any] = [
        billed(
            ModelResponse(
                text=f"writing file {i}",
                tool_calls=(
                    ToolCall(f"w{i}", "write_file", {"path": f"f{i}.txt", "content": f"{i}\n"}),
                ),
                usage=Usage(0, 2_000),
            )
        )
        for i in range(STEPS)
    ]
    steps.append(
        ModelResponse(
            text="",
            tool_calls=(ToolCall("fin", "finish", {"summary": "wrote all"}),),
            usage=Usage(50, 10),
        )
    )
    return steps


def agent(provider: ScriptedProvider, ws: Path, root: Path) -> Agent:
    # a token budget that crosses the warning level at the last write, so nudges are part of
    # the history, and leaves room for the resumed call's bound (the whole prompt, one token
    # a byte: a new process has no report of what the prompt cost)
    config = AgentConfig(session_dir=root, max_total_tokens=48_000, verify=False)
    return Agent(provider, workspace=ws, config=config)


@pytest.mark.parametrize("crash_at", [1, 4, 7])
async def test_resume_sends_the_request_the_crashed_run_would_have_sent(
    tmp_path: Path, crash_at: int
) -> None:
    reference_ws, ws = tmp_path / "ref", tmp_path / "ws"
    reference_ws.mkdir()
    ws.mkdir()
    reference = ScriptedProvider(script())
    done = await agent(reference, reference_ws, tmp_path / "ref-sessions").run("write files")
    assert done.finish_reason is FinishReason.COMPLETED
    assert any("[journeyman]" in m.content for m in reference.requests[-1].messages)

    # same workspace path as the reference would be ideal; the system prompt names it, so
    # compare requests with the workspace path normalised
    crashed = ScriptedProvider([*script()[:crash_at], crash])
    first = agent(crashed, ws, tmp_path / "s")
    with pytest.raises(Crash):
        await first.run("write files")
    store = SessionStore(tmp_path / "s")
    [summary] = store.list_sessions()
    store.close()
    assert summary.finish_reason is None and summary.steps == crash_at

    resumed = ScriptedProvider(script()[crash_at:])
    result = await agent(resumed, ws, tmp_path / "s").resume(summary.record.id)
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.iterations == done.iterations

    expected = reference.requests[crash_at]
    actual = resumed.requests[0]
    assert actual.messages == expected.messages
    assert actual.tools == expected.tools
    assert actual.system == expected.system.replace(str(reference_ws), str(ws))
    for later_ref, later in zip(reference.requests[crash_at:], resumed.requests, strict=True):
        assert later.messages == later_ref.messages
    assert sorted(p.name for p in ws.iterdir()) == sorted(p.name for p in reference_ws.iterdir())


async def test_resume_of_a_session_that_never_took_a_step(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(Crash):
        await agent(ScriptedProvider([crash]), ws, tmp_path / "s").run("write files")
    store = SessionStore(tmp_path / "s")
    [summary] = store.list_sessions()
    store.close()
    resumed = ScriptedProvider([ModelResponse(text="nothing to do")])
    result = await agent(resumed, ws, tmp_path / "s").resume(summary.record.id)
    assert result.finish_reason is FinishReason.ANSWERED
    assert [m.content for m in resumed.requests[0].messages] == ["write files"]
