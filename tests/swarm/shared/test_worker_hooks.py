"""attach_worker: a tracker watching a real Agent run on a scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path

from journeyman import ToolArgs, tool
from journeyman.core.events import Event
from journeyman.core.messages import Usage
from journeyman.core.result import FinishReason
from journeyman.swarm.shared import (
    SharedContextState,
    SharedEconomicsState,
    WorkerBudgetConfig,
    WorkerBudgetTracker,
    attach_worker,
    call_fingerprint,
)
from tests.fakes.agents import call, finish, make_agent, turn, user_texts


class PingArgs(ToolArgs):
    host: str
    """Where to ping."""


def ping_tool(ran: list[str], *, fail: bool = False) -> object:
    @tool(args=PingArgs, name="ping")
    def ping(args: PingArgs, ctx: object) -> str:
        """Pings a host."""
        ran.append(args.host)
        if fail:
            raise RuntimeError(f"{args.host} is unreachable")
        return "pong"

    return ping


def finish_tool() -> object:
    from journeyman.tools.builtin import default_tools

    return next(t for t in default_tools() if t.name == "finish")


async def test_a_local_doom_loop_halts_the_worker_before_the_third_call(tmp_path: Path) -> None:
    ran: list[str] = []
    same = call("ping", host="api")
    agent, _ = make_agent(
        tmp_path,
        [turn(same), turn(same), turn(same), finish()],
        tools=[ping_tool(ran), finish_tool()],
        loop_threshold=10,
    )
    context = SharedContextState()
    tracker = WorkerBudgetTracker("w1", None, SharedEconomicsState())
    attach_worker(agent, tracker, context)
    result = await agent.run("ping the api")
    assert result.finish_reason is FinishReason.HALTED
    assert ran == ["api", "api"]
    assert tracker.stop_reason is not None and "local doom loop" in tracker.stop_reason
    assert any(f.error == tracker.stop_reason for f in context.failures("w1"))


async def test_over_budget_stops_the_worker_and_keeps_the_previous_handler(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    events: list[Event] = []
    expensive = Usage(0, 600)
    agent, _ = make_agent(
        tmp_path,
        [
            turn(call("ping", host="a"), usage=expensive),
            turn(call("ping", host="b"), usage=expensive),
            finish(),
        ],
        tools=[ping_tool(ran), finish_tool()],
        events=events,
    )
    tracker = WorkerBudgetTracker("w1", WorkerBudgetConfig(max_tokens=1_000))
    attachment = attach_worker(agent, tracker)
    result = await agent.run("ping twice")
    assert result.finish_reason is FinishReason.HALTED
    assert ran == ["a"]
    assert tracker.over_budget() == "tokens"
    assert any(e.type == "run_finished" for e in events)  # the agent's own handler still runs
    attachment.detach()
    assert agent.on_event == events.append


async def test_a_worker_over_budget_may_still_finish(tmp_path: Path) -> None:
    agent, _ = make_agent(
        tmp_path,
        [turn(call("finish", summary="all done"), usage=Usage(0, 2_000))],
        tools=[ping_tool([]), finish_tool()],
    )
    tracker = WorkerBudgetTracker("w1", WorkerBudgetConfig(max_tokens=1_000))
    attach_worker(agent, tracker)
    result = await agent.run("finish")
    assert tracker.over_budget() == "tokens"
    assert result.finish_reason is FinishReason.COMPLETED
    assert "all done" in result.final_text


async def test_a_global_doom_loop_call_is_refused_and_the_model_is_told(tmp_path: Path) -> None:
    ran: list[str] = []
    economics = SharedEconomicsState(global_doom_threshold=2)
    fingerprint = call_fingerprint("ping", {"host": "down"})
    for worker in ("w2", "w3", "w2"):
        economics.record(worker, fingerprint, label='ping {"host": "down"}')
    agent, provider = make_agent(
        tmp_path,
        [turn(call("ping", host="down")), finish()],
        tools=[ping_tool(ran), finish_tool()],
    )
    attach_worker(agent, WorkerBudgetTracker("w1", None, economics))
    result = await agent.run("ping")
    assert ran == []
    assert result.finish_reason is FinishReason.COMPLETED
    told = provider.requests[1].messages[-1].tool_result
    assert told is not None and told.is_error and "global doom loop" in told.content


async def test_a_loop_flagged_elsewhere_reaches_a_running_worker(tmp_path: Path) -> None:
    ran: list[str] = []
    economics = SharedEconomicsState(global_doom_threshold=2)

    def others_fail(_request: object) -> object:
        for worker in ("w2", "w3", "w2"):
            economics.record(worker, "elsewhere", label="curl http://down")
        return turn(call("ping", host="a"))

    agent, provider = make_agent(
        tmp_path,
        [others_fail, finish()],
        tools=[ping_tool(ran), finish_tool()],
    )
    attach_worker(agent, WorkerBudgetTracker("w1", None, economics))
    await agent.run("ping")
    assert any("curl http://down" in text for text in user_texts(provider.requests[1]))


async def test_failed_calls_are_recorded_for_the_other_workers(tmp_path: Path) -> None:
    ran: list[str] = []
    agent, _ = make_agent(
        tmp_path,
        [turn(call("ping", host="gone")), finish()],
        tools=[ping_tool(ran, fail=True), finish_tool()],
    )
    context = SharedContextState()
    attach_worker(agent, WorkerBudgetTracker("w1"), context)
    await agent.run("ping")
    (failure,) = context.failures()
    assert failure.worker_id == "w1"
    assert failure.input == 'ping {"host": "gone"}'
    assert "gone is unreachable" in failure.error


async def test_four_workers_repeating_one_call_trip_the_global_doom_loop(tmp_path: Path) -> None:
    ran: list[str] = []
    context, economics = SharedContextState(), SharedEconomicsState()
    agents = []
    for n in range(4):
        (tmp_path / f"w{n}").mkdir()
        agent, _ = make_agent(
            tmp_path / f"w{n}",
            [turn(call("ping", host="down")) for _ in range(10)],
            tools=[ping_tool(ran), finish_tool()],
            loop_threshold=10,
        )
        tracker = WorkerBudgetTracker(f"w{n}", None, economics, task=f"subtask {n}")
        attach_worker(agent, tracker, context)
        agents.append(agent)
    results = await asyncio.gather(*(agent.run("ping until it works") for agent in agents))
    assert {r.finish_reason for r in results} == {FinishReason.HALTED}
    assert len(ran) <= 4 * 2  # no worker ran the call a third time
    fingerprint = call_fingerprint("ping", {"host": "down"})
    assert economics.is_global_doom_loop(fingerprint)
    assert all(economics.should_skip(f"subtask {n}") for n in range(4))
    assert "ping" in economics.notice()
    stopped = [f for f in context.failures() if f.input == "the worker's run"]
    assert len(stopped) == 4
