"""The runs of a server: progress lines from the agent's events, waiting, and how many finished
runs stay in memory."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from journeyman.core.events import BudgetUpdated, ModelRequestSent, ToolCallStarted
from journeyman.core.messages import ToolCall, Usage
from journeyman.core.result import FinishReason, RunResult
from journeyman.loop.agent import Agent
from journeyman.protocols.mcp_server.runs import ActiveRun, RunRegistry


class RunningAgent:
    """Stands in for the agent of a run: the registry only cancels it and disposes of it."""

    def __init__(self) -> None:
        self.closed = False

    def cancel(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def active(session_id: str = "s1") -> ActiveRun:
    return ActiveRun(session_id, Path("/ws"), "task", cast(Agent, RunningAgent()))


def result(session_id: str) -> RunResult:
    return RunResult("done", FinishReason.COMPLETED, 1, 1, Usage(), 0.0, 0.1, session_id)


async def test_progress_lines_name_the_step_the_tool_and_the_cost() -> None:
    run = active()
    registry = RunRegistry()
    gate = asyncio.Event()

    async def work() -> RunResult:
        await gate.wait()
        run.on_event(ModelRequestSent(iteration=1, message_count=2, tool_count=5))
        run.on_event(BudgetUpdated("normal", "normal", 0.1, None, 10, 1234, 0.0123))
        run.on_event(
            ToolCallStarted(
                iteration=1, call=ToolCall("c1", "run_command", {"command": "pytest  -q\n-x"})
            )
        )
        return result("s1")

    registry.start(run, work())
    reports: list[tuple[float, str | None]] = []

    async def report(value: float, total: float | None, message: str | None) -> None:
        reports.append((value, message))
        gate.set()

    await run.wait(report, 30, preface="started")
    assert reports == [
        (0.0, "started"),
        (1.0, "step 1: waiting for the model ($0.0000 so far, 0 tokens)"),
        (2.0, "step 1: calling run_command pytest -q -x ($0.0123 so far, 1234 tokens)"),
    ]
    assert run.done and run.result is not None
    assert cast(RunningAgent, run.agent).closed  # its work is over: disposed of


async def test_a_wait_ends_at_its_time_limit_and_the_run_goes_on() -> None:
    run = active()
    registry = RunRegistry()
    release = asyncio.Event()

    async def work() -> RunResult:
        await release.wait()
        return result("s1")

    registry.start(run, work())
    await run.wait(None, 0.01)
    assert not run.done
    release.set()
    await run.wait(None, 30)
    assert run.done


async def test_only_the_latest_finished_runs_stay_in_memory() -> None:
    registry = RunRegistry(keep_finished=1)
    runs: list[ActiveRun] = []
    for name in ("a", "b", "c"):
        run = active(name)

        async def work(sid: str = name) -> RunResult:
            return result(sid)

        registry.start(run, work())
        runs.append(run)
        await run.wait(None, 30)
    assert list(registry.runs) == ["b", "c"]  # "a" is answered from the store from now on


async def test_a_run_that_raises_says_why() -> None:
    run = active()
    registry = RunRegistry()

    async def work() -> Any:
        raise OSError("disk gone")

    registry.start(run, work())
    await run.wait(None, 30)
    assert run.result is None and run.error == "OSError: disk gone"
