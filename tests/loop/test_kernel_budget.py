"""The budget driving a run: nudges, restricted tool calls, text only, extensions, stops."""

from __future__ import annotations

from pathlib import Path

from journeyman import Agent, AgentConfig, FinishReason, ToolArgs, tool
from journeyman.core.events import Event, NudgeInjected
from journeyman.core.messages import Role, ToolCall, Usage
from journeyman.economics.approval import AutoApprover
from journeyman.economics.budget import BudgetMode
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from tests.fakes.agents import budget_agent as make
from tests.fakes.agents import spend_turn


def nudges(events: list[Event], kind: str | None = None) -> list[NudgeInjected]:
    return [e for e in events if isinstance(e, NudgeInjected) and kind in (None, e.kind)]


async def test_budget_walks_from_nudge_to_text_only_to_capacity_stop(tmp_path: Path) -> None:
    events: list[Event] = []
    first = ModelResponse(
        text="", tool_calls=(ToolCall("a", "echo", {"text": "a"}),), usage=Usage(100, 0)
    )  # its prompt becomes the baseline
    script = [
        first,
        spend_turn(("echo", "b"), tokens=14_000),  # 70 % -> WARN
        spend_turn(("echo", "c"), tokens=4_000),  # 90 % -> RESTRICTED
        spend_turn(("echo", "d"), ("echo", "e"), tokens=1_000),  # 95 % -> HARD; 2nd refused
        ModelResponse(text="Closing report: echoed a-d, e was not run.", usage=Usage(0, 10)),
    ]
    # 1,000 tokens are left at HARD: the closing call fits (its prompt's bound and its reply)
    agent, provider = make(
        tmp_path, script, events, max_total_tokens=20_000, max_output_tokens=20_000
    )
    result = await agent.run("echo things")
    assert result.finish_reason is FinishReason.MAX_TOKENS
    assert result.final_text.startswith("Closing report")
    levels = [e.level for e in events if e.type == "budget"]
    assert levels == ["none", "none", "warn", "restricted", "hard"]
    # the turn at RESTRICTED ran one call and refused the other
    at_restricted = provider.requests[4].messages
    refused = [m.tool_result for m in at_restricted if m.tool_result and m.tool_result.is_error]
    assert len(refused) == 1 and refused[0].metadata["error"] == "budget_restricted"
    # text only: the last request carries no tools and tells the model why
    assert provider.requests[4].tools == ()
    assert provider.requests[3].tools != ()
    assert "no longer available" in provider.requests[4].messages[-1].content
    # the closing call was fitted to the 1,000 tokens left, and the cap held
    assert provider.requests[4].max_output_tokens < 1_000
    assert agent.economics.incremental_tokens <= 20_000
    budget_nudges = nudges(events, "budget")
    assert len(budget_nudges) >= 3
    assert provider.requests[2].messages[-1].content.startswith("[journeyman]")


async def test_a_closing_report_that_cannot_fit_is_not_made(tmp_path: Path) -> None:
    events: list[Event] = []
    script = [
        spend_turn(("echo", "a"), tokens=0),
        spend_turn(("echo", "b"), tokens=9_990),  # as long as it may be: no prompt fits after
        ModelResponse(text="a closing report that would pass the cap", usage=Usage(0, 10)),
    ]
    agent, provider = make(
        tmp_path, script, events, max_total_tokens=10_000, max_output_tokens=10_000
    )
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.MAX_TOKENS
    assert "was not made" in (result.error or "")
    assert len(provider.requests) == 2  # the closing call never reached the model
    assert agent.economics.incremental_tokens <= 10_000


async def test_jump_past_the_limit_stops_at_the_gate(tmp_path: Path) -> None:
    events: list[Event] = []
    past = Usage(3000, 0)  # a provider billing far more prompt than the request's bound
    script = [
        spend_turn(("echo", "a"), tokens=0),
        ModelResponse("", (ToolCall("b", "echo", {"text": "b"}),), usage=past),
        spend_turn(("echo", "c"), tokens=1),
    ]
    agent, _ = make(tmp_path, script, events, max_total_tokens=1000)
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.MAX_TOKENS
    assert result.iterations == 2
    assert "3,000 of 1,000 budgeted tokens" in (result.error or "")


async def test_extension_granted_lets_the_run_continue(tmp_path: Path) -> None:
    events: list[Event] = []
    script = [
        spend_turn(("echo", "a"), tokens=0),
        spend_turn(("echo", "b"), tokens=9_850),  # 98.5 %: text only unless extended
        spend_turn(("echo", "c"), tokens=10),
        ModelResponse(text="done", usage=Usage(0, 1)),
    ]
    agent, provider = make(
        tmp_path,
        script,
        events,
        max_total_tokens=10_000,
        max_output_tokens=10_000,
        approver=AutoApprover(1),
    )
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.ANSWERED
    assert [e.type for e in events if e.type.startswith("extension")] == [
        "extension_requested",
        "extension_decided",
    ]
    assert agent.economics.limits.max_total_tokens == 15_000
    assert agent.economics.extensions_granted == 1
    assert provider.requests[2].tools != ()


async def test_denied_extension_is_asked_once(tmp_path: Path) -> None:
    events: list[Event] = []
    script = [
        spend_turn(("echo", "a"), tokens=0),
        spend_turn(("echo", "b"), tokens=9_600),
        ModelResponse(text="wrapping up", usage=Usage(0, 1)),
    ]
    agent, _ = make(tmp_path, script, events, max_total_tokens=10_000, max_output_tokens=10_000)
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.MAX_TOKENS
    decided = [e for e in events if e.type == "extension_decided"]
    assert len(decided) == 1 and not decided[0].granted


async def test_advisory_mode_never_stops_for_tokens(tmp_path: Path) -> None:
    events: list[Event] = []
    script = [spend_turn(("echo", str(i)), tokens=600) for i in range(4)]
    script.append(ModelResponse(text="finished anyway", usage=Usage(0, 1)))
    agent, provider = make(
        tmp_path, script, events, max_total_tokens=1000, budget_mode=BudgetMode.ADVISORY
    )
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.ANSWERED
    assert all(r.tools for r in provider.requests)
    assert nudges(events, "budget")


async def test_soft_mode_only_tracks(tmp_path: Path) -> None:
    events: list[Event] = []
    script = [spend_turn(("echo", str(i)), tokens=900) for i in range(3)]
    script.append(ModelResponse(text="ok", usage=Usage(0, 1)))
    agent, _ = make(tmp_path, script, events, max_total_tokens=1000, budget_mode=BudgetMode.SOFT)
    result = await agent.run("x")
    assert result.success and not nudges(events)


async def test_duration_limit_stops_with_its_own_reason(tmp_path: Path) -> None:
    events: list[Event] = []
    now = [0.0]
    script = [spend_turn(("echo", str(i)), tokens=1) for i in range(5)]
    agent, _ = make(tmp_path, script, events, max_duration_s=10)
    agent.economics.clock = lambda: now[0]

    def tick(event: Event) -> None:
        events.append(event)
        if event.type == "tool_result":
            now[0] += 6

    agent.on_event = tick
    result = await agent.run("x")
    assert result.finish_reason is FinishReason.MAX_DURATION
    assert result.iterations == 2


async def test_loop_nudge_on_identical_calls_with_identical_results(tmp_path: Path) -> None:
    events: list[Event] = []
    same = spend_turn(("echo", "again"), tokens=1)
    agent, provider = make(tmp_path, [same, same, same, ModelResponse(text="ok")], events)
    result = await agent.run("x")
    assert result.success
    loop = nudges(events, "loop")
    assert len(loop) == 1 and "echo" in loop[0].message
    assert loop[0].message in provider.requests[3].messages[-1].content


async def test_rerunning_a_command_with_new_output_is_not_a_loop(tmp_path: Path) -> None:
    events: list[Event] = []
    outputs = iter(["1 failed", "1 failed, after edit", "all passed"])

    class NoArgs(ToolArgs):
        pass

    @tool(args=NoArgs, name="run_tests")
    def run_tests(args: NoArgs, ctx: object) -> str:
        """Different output each time, as after edits."""
        return next(outputs)

    call = ModelResponse(text="", tool_calls=(ToolCall("t", "run_tests", {}),), usage=Usage(0, 1))
    ws = tmp_path / "ws"
    ws.mkdir()
    agent = Agent(
        ScriptedProvider([call, call, call, ModelResponse(text="green")]),
        workspace=ws,
        tools=[run_tests],
        config=AgentConfig(session_dir=tmp_path / "s", verify=False),
        on_event=events.append,
    )
    result = await agent.run("x")
    assert result.success and not nudges(events, "loop")


async def test_exploration_saturation_nudge(tmp_path: Path) -> None:
    events: list[Event] = []
    reads = [spend_turn(("read_file", f"f{i}.py"), tokens=1) for i in range(10)]
    agent, provider = make(tmp_path, [*reads, ModelResponse(text="ok")], events)
    await agent.run("x")
    saturation = nudges(events, "exploration_saturation")
    assert len(saturation) == 1
    last = provider.requests[10].messages[-1]
    assert last.role is Role.USER and saturation[0].message in last.content


async def test_every_call_is_in_the_usage_log(tmp_path: Path) -> None:
    events: list[Event] = []
    script = [spend_turn(("echo", "a"), tokens=5), ModelResponse(text="ok", usage=Usage(3, 4))]
    agent, _ = make(tmp_path, script, events)
    result = await agent.run("x")
    store = SessionStore(tmp_path / "s")
    try:
        [row] = store.usage_summary(result.session_id)
    finally:
        store.close()
    assert (row.provider, row.model, row.calls) == ("scripted", "scripted", 2)
    assert row.usage == Usage(3, 9) and row.cost_usd is None


async def test_a_new_task_is_refused_on_a_nearly_spent_budget(tmp_path: Path) -> None:
    events: list[Event] = []
    script = [
        spend_turn(("echo", "a"), tokens=0),
        spend_turn(("echo", "b"), tokens=9_300),
        ModelResponse(text="first task done", usage=Usage(0, 1)),
        spend_turn(("echo", "c"), tokens=1),
    ]
    agent, provider = make(
        tmp_path, script, events, max_total_tokens=10_000, max_output_tokens=10_000
    )
    first = await agent.run("first task")
    assert first.finish_reason is FinishReason.ANSWERED  # finished at 93 % of the budget
    second = await agent.run("second task")
    assert second.finish_reason is FinishReason.MAX_TOKENS
    assert "not starting a new task" in (second.error or "")
    assert len(provider.requests) == 3  # the second task never reached the model
