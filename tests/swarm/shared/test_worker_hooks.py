"""attach_worker: the swarm's view of a real Agent run on a scripted model. The worker's own
limits are its loop's; the attachment only counts repeats for the swarm and enforces global
doom loops."""

from __future__ import annotations

import asyncio
from pathlib import Path

from journeyman import ToolArgs, tool
from journeyman.core.events import Event
from journeyman.core.result import FinishReason
from journeyman.swarm.shared import (
    SharedContextState,
    SharedEconomicsState,
    attach_worker,
    call_fingerprint,
)
from tests.fakes.agents import call, finish, make_agent, turn, user_texts


class PingArgs(ToolArgs):
    host: str
    """Where to ping."""


def ping_tool(ran: list[str], *, fail: bool = False, changing: bool = False) -> object:
    @tool(args=PingArgs, name="ping")
    def ping(args: PingArgs, ctx: object) -> str:
        """Pings a host."""
        ran.append(args.host)
        if fail:
            raise RuntimeError(f"{args.host} is unreachable")
        return f"pong {len(ran)}" if changing else "pong"

    return ping


def finish_tool() -> object:
    from journeyman.tools.builtin import default_tools

    return next(t for t in default_tools() if t.name == "finish")


async def test_repeats_in_a_row_are_counted_and_the_loop_keeps_its_own_limits(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    events: list[Event] = []
    same = call("ping", host="api")
    agent, _ = make_agent(
        tmp_path,
        [turn(same), turn(same), turn(same), finish()],
        tools=[ping_tool(ran), finish_tool()],
        events=events,
        loop_threshold=10,
    )
    economics = SharedEconomicsState()
    attachment = attach_worker(agent, "w1", economics, SharedContextState())
    result = await agent.run("ping the api")
    assert result.finish_reason is FinishReason.COMPLETED  # nothing halts it from outside
    assert ran == ["api"] * 3
    assert attachment.repeats == 2
    assert economics.counts_by_worker(call_fingerprint("ping", {"host": "api"})) == {"w1": 2}
    assert any(e.type == "run_finished" for e in events)  # the agent's own handler still runs
    attachment.detach()
    assert agent.on_event == events.append


async def test_rereads_spread_over_a_task_and_changed_results_are_no_repeats(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    a, b = call("ping", host="a"), call("ping", host="b")
    agent, _ = make_agent(
        tmp_path,
        [turn(a), turn(b), turn(a), turn(b), turn(a), finish()],
        tools=[ping_tool(ran), finish_tool()],
        loop_threshold=10,
    )
    economics = SharedEconomicsState()
    spread = attach_worker(agent, "w1", economics)
    await agent.run("ping both")
    (tmp_path / "two").mkdir()
    polled, _ = make_agent(
        tmp_path / "two",
        [turn(a), turn(a), turn(a), finish()],
        tools=[ping_tool([], changing=True), finish_tool()],
        loop_threshold=10,
    )
    polling = attach_worker(polled, "w2", economics)
    await polled.run("poll a")
    assert len(ran) == 5 and (spread.repeats, polling.repeats) == (0, 0)
    assert economics.count(call_fingerprint("ping", {"host": "a"})) == 0


async def test_a_global_doom_loop_call_is_refused_then_halts_the_worker(tmp_path: Path) -> None:
    ran: list[str] = []
    economics = SharedEconomicsState(global_doom_threshold=2)
    fingerprint = call_fingerprint("ping", {"host": "down"})
    for worker in ("w2", "w3", "w2"):
        economics.record(worker, fingerprint, label='ping {"host": "down"}')
    down = call("ping", host="down")
    agent, provider = make_agent(
        tmp_path,
        [turn(down), turn(down), finish()],
        tools=[ping_tool(ran), finish_tool()],
    )
    attach_worker(agent, "w1", economics)
    result = await agent.run("ping")
    assert ran == []
    told = provider.requests[1].messages[-1].tool_result
    assert told is not None and told.is_error and "global doom loop" in told.content
    assert result.finish_reason is FinishReason.HALTED
    assert "again after it was refused" in (result.error or "")


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
    attach_worker(agent, "w1", economics)
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
    attach_worker(agent, "w1", None, context)
    await agent.run("ping")
    (failure,) = context.failures()
    assert failure.worker_id == "w1"
    assert failure.input == 'ping {"host": "gone"}'
    assert "gone is unreachable" in failure.error


async def test_four_workers_repeating_one_call_trip_the_global_doom_loop(tmp_path: Path) -> None:
    ran: list[str] = []
    economics = SharedEconomicsState()
    agents = []
    for n in range(4):
        (tmp_path / f"w{n}").mkdir()
        agent, _ = make_agent(
            tmp_path / f"w{n}",
            [turn(call("ping", host="down")) for _ in range(10)],
            tools=[ping_tool(ran, fail=True), finish_tool()],
            loop_threshold=10,
            max_unproductive_iterations=10,
            max_consecutive_mistakes=10,
        )
        attach_worker(agent, f"w{n}", economics, task=f"subtask {n}")
        agents.append(agent)
    results = await asyncio.gather(*(agent.run("ping until it works") for agent in agents))
    fingerprint = call_fingerprint("ping", {"host": "down"})
    assert economics.is_global_doom_loop(fingerprint)
    assert all(economics.should_skip(f"subtask {n}") for n in range(4))
    assert "ping" in economics.notice()
    # once flagged, each worker is refused the call once, then stopped when it repeats it
    assert {r.finish_reason for r in results} == {FinishReason.HALTED}
    assert len(ran) < 4 * 10
