"""What a batch says of its pace (elapsed, ETA, throughput; running against queued) while it
runs, and what its report says at the end (wall time, throughput, the pass rate of the tasks
that ran)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from journeyman.batch.events import BatchEvent, TaskCounts, TaskFinished, TaskStarted
from journeyman.batch.executor import LocalExecutor
from journeyman.batch.job import TaskJob, TaskOutcome
from journeyman.batch.report import ReportInput, render_html, render_markdown
from journeyman.batch.results import TaskResult
from journeyman.batch.scheduler import Scheduler
from journeyman.economics.ledger import Amount
from tests.batch.support import model, settings_for, task_text, tasks_for
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("JOURNEYMAN_EDIT_TOOL", "edit_file")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class WaitsForAWorker:
    """Two slots, but one worker: the second attempt waits until the first ends (as a Ray
    task waits for a CPU), and says when it starts. Records the scheduler's counts as each
    attempt starts."""

    max_parallel = 2

    def __init__(self) -> None:
        self.inner = LocalExecutor(1, processes=False)
        self.worker = asyncio.Lock()
        self.scheduler: Scheduler | None = None
        self.seen: list[TaskCounts] = []

    async def run(self, job: TaskJob, on_running: Callable[[], None]) -> TaskOutcome:
        async with self.worker:
            assert self.scheduler is not None
            self.seen.append(self.scheduler.counts())
            on_running()
            return await self.inner.run(job)

    async def close(self) -> None:
        await self.inner.close()


def test_queued_attempts_are_not_counted_running_and_the_pace_is_told(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(1), task_text(1), task_text(1), task_text(1)])
    executor = WaitsForAWorker()
    events: list[BatchEvent] = []
    run = Scheduler(tasks, settings_for(tmp_path, fake_openai), executor, on_event=events.append)
    executor.scheduler = run
    summary = asyncio.run(run.run())
    assert summary.all_succeeded
    # when the second and later attempts start, one ran before them and one waited
    assert all(c.running <= 1 for c in executor.seen)
    assert any(c.queued >= 1 for c in executor.seen[1:])
    started = [e for e in events if isinstance(e, TaskStarted)]
    assert len(started) == 4 and all(e.counts.running == 1 for e in started)
    finished = [e for e in events if isinstance(e, TaskFinished)]
    elapsed = [e.pace.elapsed_s or 0.0 for e in events if hasattr(e, "pace")]
    assert elapsed == sorted(elapsed) and elapsed[-1] > 0
    assert finished[0].pace.eta_s is not None and finished[0].pace.eta_s > 0
    assert finished[-1].pace.eta_s == 0.0  # nothing left
    assert all((e.pace.tasks_per_min or 0) > 0 for e in finished)
    assert summary.wall_s >= elapsed[-2] - 0.001 and summary.finished_in_run == 4
    assert summary.tasks_per_min is not None and "tasks/min" in summary.line()


def result(task_id: str, status: str, cost: float = 0.1, **fields: object) -> TaskResult:
    return TaskResult(
        task_id,
        status,
        None,
        cost,
        10,
        2.0,
        1,
        None,
        None,
        1,
        **fields,  # type: ignore[arg-type]
    )


def test_the_report_leaves_tasks_never_started_out_of_the_pass_rate() -> None:
    rows = [
        result("a", "succeeded"),
        result("b", "succeeded"),
        result("c", "failed", workspace="out/workspaces/c/attempt-1"),
        result("d", "not_run", cost=0.0),
        result("e", "not_run", cost=0.0),
    ]
    info = ReportInput(
        batch_id="b1",
        model="m",
        spent=Amount(30, 0.3),
        cap=Amount(None, 0.3),
        budget_exhausted=True,
        started_tasks=3,
        wall_s=90.0,
        finished_in_run=3,
        workspaces=Path("out/workspaces"),
        keep="failed",
    )
    text = render_markdown(rows, info)
    assert "- Pass rate: 66.7% (2 of 3 that ran; 2 not run, left out)" in text
    assert "- Wall time: 1m30s for 3 tasks, 2.0 tasks/min" in text
    assert "- Workspaces kept: 1 task in out/workspaces (--keep failed)" in text
    assert "| c | failed | out/workspaces/c/attempt-1 |" in text
    page = render_html(rows, info)
    assert "66.7% (2 of 3 that ran; 2 not run, left out)" in page and "1m30s" in page
    nothing = render_markdown([result("d", "not_run")], info)
    assert "- Pass rate: — (no task ran)" in nothing
