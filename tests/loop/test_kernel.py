"""Each kernel gate and finish reason, tool scheduling, and the trajectory, via scripted runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from journeyman import Agent, AgentConfig, FinishReason, ToolArgs, tool
from journeyman.core.errors import LLMError, ProviderError
from journeyman.core.events import Event, ModelResponseReceived
from journeyman.core.messages import Role, Usage
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from tests.fakes.agents import NO_WAIT, Probe, call, make_agent, turn


def probe_agent(
    tmp_path: Path,
    script: list[Any],
    probe: Probe | None = None,
    events: list[Event] | None = None,
    **config: Any,
) -> tuple[Agent, ScriptedProvider]:
    """An agent with the probe's tools that retries without waiting."""
    tools = (probe or Probe()).tools()
    return make_agent(tmp_path, script, tools=tools, events=events, retry_policy=NO_WAIT, **config)


async def test_text_answer_ends_successfully(tmp_path: Path) -> None:
    agent, _ = probe_agent(tmp_path, [turn(text="All done.")])
    result = await agent.run("say done")
    assert result.finish_reason is FinishReason.ANSWERED
    assert result.success and result.final_text == "All done."
    assert result.iterations == 1 and result.tool_calls_made == 0


async def test_finish_tool_completes_and_trajectory_is_complete(tmp_path: Path) -> None:
    events: list[Event] = []
    script = [
        turn(call("echo", text="one")),
        turn(call("finish", summary="echoed one")),
    ]
    agent, provider = probe_agent(tmp_path, script, events=events)
    result = await agent.run("echo then finish")
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.final_text == "echoed one"
    assert result.iterations == 2 and result.tool_calls_made == 2
    assert result.usage == Usage(20, 10)
    # the second request carries the first tool result back to the model
    second = provider.requests[1].messages
    assert [m.role for m in second] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert second[-1].tool_result is not None and second[-1].tool_result.content == "one"
    store = SessionStore(tmp_path / "sessions")
    lines = list(store.events(result.session_id))
    kinds = [line["type"] for line in lines]
    assert kinds[0] == "state_change" and "run_started" in kinds
    assert kinds[-1] == "run_finished"
    assert lines[-1]["result"]["finish_reason"] == "completed"
    assert kinds.count("tool_result") == 2 and kinds.count("model_response") == 2
    assert store.summary(result.session_id).finish_reason == "completed"
    assert [m.role for m in store.messages(result.session_id)] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
    ]
    store.close()
    assert [e.type for e in events if e.type != "text_delta"] == kinds


async def test_max_iterations(tmp_path: Path) -> None:
    script = [turn(call("echo", text=str(i))) for i in range(10)]
    agent, _ = probe_agent(tmp_path, script, max_iterations=4)
    result = await agent.run("loop")
    assert result.finish_reason is FinishReason.MAX_ITERATIONS
    assert result.iterations == 4 and not result.success
    assert "4 iterations" in (result.error or "")


async def test_consecutive_mistakes_stop_the_run_and_reset_on_success(tmp_path: Path) -> None:
    script = [
        turn(call("nope", "a")),
        turn(call("echo", "b", wrong_field=1)),
        turn(call("echo", text="fine")),  # resets the streak
        turn(call("nope", "c")),
        turn(call("nope", "d", x=1)),
        turn(call("nope", "e", x=2)),
        turn(text="unreached"),
    ]
    agent, provider = probe_agent(tmp_path, script)
    result = await agent.run("make mistakes")
    assert result.finish_reason is FinishReason.MAX_CONSECUTIVE_MISTAKES
    assert result.iterations == 6
    errors = [m.tool_result for m in provider.requests[1].messages if m.tool_result]
    assert errors and "unknown tool 'nope'" in errors[0].content


async def test_invalid_args_are_reported_to_the_model(tmp_path: Path) -> None:
    script = [turn(call("echo", "x", wrong=1)), turn(text="ok")]
    agent, provider = probe_agent(tmp_path, script)
    await agent.run("x")
    shown = provider.requests[1].messages[-1].tool_result
    assert shown is not None and shown.is_error
    assert "invalid arguments" in shown.content and "text" in shown.content


async def test_format_error_is_told_and_counted(tmp_path: Path) -> None:
    bad = ModelResponse(text="```json\n{oops", format_error="the JSON block is not valid JSON")
    script = [bad, bad, bad, turn(text="unreached")]
    agent, provider = probe_agent(tmp_path, script)
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.MAX_CONSECUTIVE_MISTAKES
    told = provider.requests[1].messages[-1]
    assert told.role is Role.USER and "not valid JSON" in told.content


async def test_budget_limit_stops_with_capacity_reason(tmp_path: Path) -> None:
    pricey = Usage(input_tokens=100_000, output_tokens=10_000)  # $0.45 a call
    script = [turn(call("echo", text=str(i)), usage=pricey) for i in range(5)]
    provider = ScriptedProvider(script, name="anthropic", model="claude-sonnet-4-5")
    (tmp_path / "ws").mkdir()
    agent = Agent(
        provider,
        workspace=tmp_path / "ws",
        tools=Probe().tools(),
        config=AgentConfig(session_dir=tmp_path / "s", max_budget_usd=1.0),
    )
    result = await agent.run("spend")
    assert result.finish_reason is FinishReason.MAX_BUDGET_USD
    # two calls: the third, priced before it is sent, could pass the cap
    assert result.cost_usd is not None and 0.5 < result.cost_usd <= 1.0
    assert result.iterations == 2


async def test_unknown_price_is_none_not_zero(tmp_path: Path) -> None:
    events: list[Event] = []
    agent, _ = probe_agent(tmp_path, [turn(text="hi")], events=events)
    result = await agent.run("x")
    assert result.cost_usd is None
    assert result.to_dict()["cost_usd"] is None


async def test_no_progress_ends_with_snapshot(tmp_path: Path) -> None:
    same = turn(call("echo", "same", text="again"))
    agent, _ = probe_agent(tmp_path, [same] * 10)
    result = await agent.run("repeat yourself")
    assert result.finish_reason is FinishReason.NO_PROGRESS
    assert result.iterations == 4  # one new turn, then three that add nothing
    assert result.no_progress_snapshot
    assert result.no_progress_snapshot[-1].role is Role.TOOL


async def test_repeated_call_with_new_result_is_progress(tmp_path: Path) -> None:
    counter = iter(range(100))

    class Args(ToolArgs):
        pass

    @tool(args=Args)
    def tick(args: Args, ctx: object) -> str:
        """Returns a new number each time."""
        return str(next(counter))

    script = [turn(call("tick", "t")) for _ in range(6)] + [turn(text="done")]
    (tmp_path / "ws").mkdir()
    agent = Agent(
        ScriptedProvider(script),
        workspace=tmp_path / "ws",
        tools=[tick],
        config=AgentConfig(session_dir=tmp_path / "s", verify=False),
    )
    result = await agent.run("tick")
    assert result.finish_reason is FinishReason.ANSWERED


async def test_parallel_safe_calls_run_concurrently(tmp_path: Path) -> None:
    probe = Probe()
    script = [turn(call("look", text="a"), call("look", text="b")), turn(text="ok")]
    agent, provider = probe_agent(tmp_path, script, probe=probe)
    result = await agent.run("look twice")
    assert result.success
    contents = [m.tool_result.content for m in provider.requests[1].messages if m.tool_result]
    assert contents == ["saw a", "saw b"]  # both got past the two-party barrier, in order


async def test_mutating_calls_run_one_at_a_time_in_order(tmp_path: Path) -> None:
    probe = Probe()
    calls = [call("change", text=str(i)) for i in range(4)]
    agent, provider = probe_agent(tmp_path, [turn(*calls), turn(text="ok")], probe=probe)
    await agent.run("change things")
    assert probe.max_running == 1
    contents = [m.tool_result.content for m in provider.requests[1].messages if m.tool_result]
    assert contents == [f"changed {i}" for i in range(4)]


async def test_parallel_batches_respect_max_concurrency(tmp_path: Path) -> None:
    probe = Probe()
    script = [turn(call("look", text="a"), call("look", text="b")), turn(text="ok")]
    agent, provider = probe_agent(tmp_path, script, probe=probe, max_concurrency=1)
    await agent.run("look twice, one at a time")
    results = [m.tool_result for m in provider.requests[1].messages if m.tool_result]
    # with one slot the barrier cannot be met: the first call times out inside the tool
    assert results[0] is not None and results[0].is_error


async def test_tool_timeout_becomes_an_error_result(tmp_path: Path) -> None:
    script = [turn(call("slow", text="x")), turn(text="gave up")]
    agent, provider = probe_agent(tmp_path, script, tool_timeout_s=0.2)
    result = await agent.run("be slow")
    assert result.success
    shown = provider.requests[1].messages[-1].tool_result
    assert shown is not None and shown.is_error and "timed out after 0.2 s" in shown.content


async def test_cancel_during_a_tool_ends_cleanly(tmp_path: Path) -> None:
    events: list[Event] = []
    agent, _ = probe_agent(tmp_path, [turn(call("slow", text="x"))], events=events)
    task = asyncio.create_task(agent.run("hang"))
    while not any(e.type == "tool_call" for e in events):
        await asyncio.sleep(0.01)
    task.cancel()
    result = await task
    assert result.finish_reason is FinishReason.CANCELLED
    assert events[-1].type == "run_finished"


async def test_cancel_method_stops_before_next_turn(tmp_path: Path) -> None:
    agent, _ = probe_agent(tmp_path, [turn(call("echo", text=str(i))) for i in range(5)])

    def stop_after_first(event: Event) -> None:
        if event.type == "tool_result":
            agent.cancel()

    agent.on_event = stop_after_first
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.CANCELLED
    assert result.iterations == 1


async def test_retryable_provider_errors_are_retried(tmp_path: Path) -> None:
    script: list[Any] = [
        ProviderError("overloaded", provider="x", status_code=529),
        LLMError("empty reply"),
        turn(text="finally"),
    ]
    events: list[Event] = []
    agent, _ = probe_agent(tmp_path, script, events=events)
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.ANSWERED
    assert sum(1 for e in events if e.type == "model_response") == 1


async def test_retries_are_bounded(tmp_path: Path) -> None:
    fault = ProviderError("busy", provider="x", status_code=503)
    agent, provider = probe_agent(tmp_path, [fault] * 10)
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.PROVIDER_UNAVAILABLE
    assert len(provider.requests) == NO_WAIT.max_retries + 1


async def test_auth_error_fails_at_once(tmp_path: Path) -> None:
    auth = ProviderError("set OPENAI_API_KEY", provider="openai", status_code=401, retryable=False)
    agent, provider = probe_agent(tmp_path, [auth, turn(text="unreached")])
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.PROVIDER_ERROR
    assert len(provider.requests) == 1
    assert "OPENAI_API_KEY" in (result.error or "")


async def test_fallback_chain_moves_to_next_provider(tmp_path: Path) -> None:
    down = ScriptedProvider([ProviderError("down", provider="a", status_code=500)] * 5)
    backup = ScriptedProvider([turn(text="from backup")], name="backup")
    (tmp_path / "ws").mkdir()
    agent = Agent(
        [down, backup],
        workspace=tmp_path / "ws",
        tools=[],
        config=AgentConfig(session_dir=tmp_path / "s"),
        retry_policy=NO_WAIT,
    )
    result = await agent.run("x")
    assert result.final_text == "from backup"
    assert len(down.requests) == NO_WAIT.max_retries + 1


async def test_broken_event_callback_does_not_break_the_run(tmp_path: Path) -> None:
    agent, _ = probe_agent(tmp_path, [turn(text="fine")])

    def explode(_event: Event) -> None:
        raise RuntimeError("ui bug")

    agent.on_event = explode
    result = await agent.run("x")
    assert result.success


async def test_internal_error_still_returns_a_result(tmp_path: Path) -> None:
    def crash(_request: object) -> ModelResponse:
        raise ZeroDivisionError("bug")

    agent, _ = probe_agent(tmp_path, [crash])
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.INTERNAL_ERROR
    assert "ZeroDivisionError" in (result.error or "")


@pytest.mark.parametrize("empty", [ModelResponse(text="   ")])
async def test_empty_reply_is_a_mistake_and_the_model_is_told(
    tmp_path: Path, empty: ModelResponse
) -> None:
    agent, provider = probe_agent(tmp_path, [empty, turn(text="sorry, done")])
    result = await agent.run("x")
    assert result.success and result.iterations == 2
    assert "empty" in provider.requests[1].messages[-1].content


async def test_the_response_event_names_the_model_and_provider_that_answered(
    tmp_path: Path,
) -> None:
    down = ScriptedProvider([ProviderError("down", provider="a", status_code=500)] * 5)
    backup = ScriptedProvider(
        [ModelResponse(text="from backup", model="backup-model-2026")],
        name="backup",
        model="backup-model",
    )
    (tmp_path / "ws").mkdir()
    seen: list[Event] = []
    agent = Agent(
        [down, backup],
        workspace=tmp_path / "ws",
        tools=[],
        config=AgentConfig(session_dir=tmp_path / "s"),
        retry_policy=NO_WAIT,
        on_event=seen.append,
    )
    result = await agent.run("x")
    (response,) = [e for e in seen if isinstance(e, ModelResponseReceived)]
    assert (response.provider, response.model) == ("backup", "backup-model-2026")
    store = SessionStore(tmp_path / "s")
    try:
        stored = [e for e in store.events(result.session_id) if e["type"] == "model_response"]
    finally:
        store.close()
    assert [(e["provider"], e["model"]) for e in stored] == [("backup", "backup-model-2026")]
