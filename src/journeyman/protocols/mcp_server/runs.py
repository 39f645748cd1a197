"""The runs a server has going: each in a task of its own, with its latest progress.

A run belongs to the server, not to the request that started it: a client that stops waiting
(it cancelled its call or timed out) leaves the run going, and may ask for its status later or
stop it with `cancel_run`. Requests that wait subscribe to the run's progress lines, which are
made from the agent's events: the step, the tool being called, the cost so far.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.core.events import (
    BudgetUpdated,
    Event,
    ModelRequestSent,
    ModelResponseReceived,
    RunFinished,
    ToolCallStarted,
)
from journeyman.core.result import RunResult
from journeyman.core.text import clip
from journeyman.loop.agent import Agent

Report = Callable[[float, float | None, str | None], Awaitable[None]]
"""Sends one progress notification: (progress, total, message)."""


@dataclass
class Progress:
    """Where a run stands, from its events."""

    step: int = 0
    """The model turn being worked on (1 for the first)."""
    tool: str | None = None
    """The tool called most recently, with its path or command when it has one."""
    cost_usd: float | None = 0.0
    """Cost of the session so far; None once a call could not be priced."""
    total_tokens: int = 0
    """Tokens the session used so far."""
    notes: int = 0
    """How many progress lines were made (the progress counter of notifications)."""

    def line(self) -> str:
        cost = "cost unknown" if self.cost_usd is None else f"${self.cost_usd:.4f} so far"
        doing = f"calling {self.tool}" if self.tool else "waiting for the model"
        return f"step {self.step}: {doing} ({cost}, {self.total_tokens} tokens)"

    def to_dict(self) -> dict[str, object]:
        return {
            "step": self.step,
            "tool": self.tool,
            "cost_usd": self.cost_usd,
            "total_tokens": self.total_tokens,
        }


@dataclass
class ActiveRun:
    """One run of the server: its agent, its task and its progress."""

    session_id: str
    workspace: Path
    task: str
    agent: Agent
    notes: list[str] = field(default_factory=list)
    """Things the client should know about how the run was set up (clamped limits, ignored
    settings of the workspace's file)."""
    cannot_ask: bool = False
    """Calls that need approval are refused: nobody can be asked in this run."""
    progress: Progress = field(default_factory=Progress)
    job: asyncio.Task[RunResult] | None = None
    error: str | None = None
    """Why the run could not run at all (it raised instead of ending with a result)."""
    _listeners: list[asyncio.Queue[str | None]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.job is not None and self.job.done()

    @property
    def result(self) -> RunResult | None:
        if self.job is None or not self.job.done() or self.job.cancelled():
            return None
        if self.job.exception() is not None:
            return None
        return self.job.result()

    def on_event(self, event: Event) -> None:
        """Fold an agent event into the progress and tell whoever waits."""
        progress = self.progress
        line_due = False
        if isinstance(event, ModelRequestSent):
            progress.step = event.iteration
            progress.tool = None
            line_due = True
        elif isinstance(event, ToolCallStarted):
            progress.step = event.iteration
            progress.tool = _call_label(event.call.name, event.call.arguments)
            line_due = True
        elif isinstance(event, BudgetUpdated):
            progress.cost_usd = event.cost_usd
            progress.total_tokens = event.total_tokens
        elif isinstance(event, ModelResponseReceived):
            if event.cost_usd is None:
                progress.cost_usd = None
            elif progress.cost_usd is not None:
                progress.cost_usd += event.cost_usd
            progress.total_tokens += event.usage.total_tokens
        elif isinstance(event, RunFinished):
            result = event.result
            progress.cost_usd = result.cost_usd
            progress.total_tokens = result.usage.total_tokens
        if line_due:
            progress.notes += 1
            self._tell(progress.line())

    def subscribe(self) -> asyncio.Queue[str | None]:
        """A queue of progress lines, ending with None when the run is over."""
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        if self.done:
            queue.put_nowait(None)
        else:
            self._listeners.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str | None]) -> None:
        if queue in self._listeners:
            self._listeners.remove(queue)

    def finished(self) -> None:
        """Called once the run's task ended: every listener stops waiting, and the agent is
        disposed of (a later request on the session builds a new one)."""
        self.agent.close()
        for queue in self._listeners:
            queue.put_nowait(None)
        self._listeners.clear()

    def _tell(self, line: str) -> None:
        for queue in self._listeners:
            queue.put_nowait(line)

    async def wait(
        self, report: Report | None, timeout_s: float | None, *, preface: str | None = None
    ) -> None:
        """Wait until the run is over or `timeout_s` passed, sending `preface` then each
        progress line to `report` (a no-op for a client that asked for no progress)."""
        queue = self.subscribe()
        counter = self.progress.notes
        try:
            if preface is not None and report is not None:
                await report(float(counter), None, preface)
            async with asyncio.timeout(timeout_s):
                while (line := await queue.get()) is not None:
                    counter += 1
                    if report is not None:
                        await report(float(counter), None, line)
        except TimeoutError:
            pass
        finally:
            self.unsubscribe(queue)


def _call_label(name: str, arguments: dict[str, object]) -> str:
    for key in ("path", "command", "pattern"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return f"{name} {clip(' '.join(value.split()), 60)}"
    return name


KEPT_FINISHED_RUNS = 50
"""Finished runs whose full result stays in memory; older ones are answered from the store."""


class RunRegistry:
    """The runs started by this server, by session id (the latest finished ones stay, for their
    full results)."""

    def __init__(self, keep_finished: int = KEPT_FINISHED_RUNS) -> None:
        self.runs: dict[str, ActiveRun] = {}
        self.keep_finished = keep_finished

    def get(self, session_id: str) -> ActiveRun | None:
        return self.runs.get(session_id)

    def busy_workspace(self, workspace: Path) -> ActiveRun | None:
        """The run still going in `workspace`, if any (two runs must not edit one tree)."""
        for run in self.runs.values():
            if run.workspace == workspace and not run.done:
                return run
        return None

    def start(self, run: ActiveRun, work: Awaitable[RunResult]) -> None:
        """Run `work` in a task of its own (it outlives the request that started it)."""

        async def job() -> RunResult:
            try:
                return await work
            except Exception as error:
                run.error = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
                raise
            finally:
                run.finished()

        self._forget_old()
        run.job = asyncio.create_task(job(), name=f"journeyman-run:{run.session_id}")
        run.job.add_done_callback(_retrieve)
        self.runs.pop(run.session_id, None)  # a follow-up: the session's newest run counts
        self.runs[run.session_id] = run

    def _forget_old(self) -> None:
        finished = [sid for sid, run in self.runs.items() if run.done]
        for session_id in finished[: max(0, len(finished) - self.keep_finished)]:
            del self.runs[session_id]

    async def aclose(self) -> None:
        """Cancel the runs still going (the server is shutting down) and wait for them."""
        jobs = [run.job for run in self.runs.values() if run.job is not None and not run.done]
        for run in self.runs.values():
            if not run.done:
                run.agent.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=10)
        for job in jobs:
            if not job.done():
                job.cancel()


def _retrieve(job: asyncio.Task[RunResult]) -> None:
    """Mark a failed run's exception as seen (it is reported through `ActiveRun.error`)."""
    if not job.cancelled():
        job.exception()
