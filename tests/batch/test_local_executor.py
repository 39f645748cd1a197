"""The local executor's worker processes: one killed with kill -9 fails only its own task."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from journeyman.batch.events import BatchEvent, TaskRequeued
from journeyman.batch.executor import LocalExecutor
from journeyman.batch.results import read_results
from journeyman.batch.scheduler import BatchSummary, Scheduler
from journeyman.core.errors import ProviderError
from journeyman.providers.rate_limit import RateLimits
from tests.batch.support import model, settings_for, task_text, tasks_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("JOURNEYMAN_EDIT_TOOL", "edit_file")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def slow_model(request: RecordedRequest) -> ScriptItem:
    time.sleep(0.4)
    return model(request)


async def run_and_kill_one(
    run: Scheduler, executor: LocalExecutor, server: FakeOpenAIServer
) -> tuple[BatchSummary, str]:
    """Run the batch; once its 3 tasks are in flight (each has called the model), kill -9
    one of their workers. Returns the summary and the killed worker's task."""
    batch = asyncio.create_task(run.run())
    killed = ""
    deadline = time.monotonic() + 120
    while not killed and time.monotonic() < deadline and not batch.done():
        busy = executor.worker_pids()
        if len(busy) == 3 and len(server.requests) >= 3:
            pid, killed = sorted(busy.items())[0]
            os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.05)
    summary = await batch
    await executor.close()
    return summary, killed


def test_a_killed_worker_fails_only_its_task_and_it_is_retried(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = slow_model
    tasks = tasks_for(tmp_path, [task_text(4, name=f"job{i}") for i in range(3)])

    # no retries: the killed one is an infrastructure error, the two others finish normally
    settings = settings_for(tmp_path / "a", fake_openai, max_infra_retries=0)
    (tmp_path / "a").mkdir()
    executor = LocalExecutor(3)
    summary, killed = asyncio.run(
        run_and_kill_one(Scheduler(tasks, settings, executor), executor, fake_openai)
    )
    assert killed
    by_id = {r.id: r for r in summary.results}
    assert by_id[killed].status == "infra_error"
    assert "its worker process died" in (by_id[killed].error or "")
    others = [r for r in summary.results if r.id != killed]
    assert [r.status for r in others] == ["succeeded", "succeeded"]
    assert all(r.attempts == 1 for r in others)

    # with --max-retries 1: the killed task continues from its last step and succeeds
    settings = settings_for(
        tmp_path / "b", fake_openai, max_infra_retries=1, infra_retry_delay_s=0.05
    )
    (tmp_path / "b").mkdir()
    executor = LocalExecutor(3)
    events: list[BatchEvent] = []
    run = Scheduler(tasks, settings, executor, on_event=events.append)
    summary, killed = asyncio.run(run_and_kill_one(run, executor, fake_openai))
    assert summary.all_succeeded, summary.line()
    requeued = [(e.task_id, e.reason) for e in events if isinstance(e, TaskRequeued)]
    assert requeued == [(killed, "infra_error")]
    rows = read_results(tmp_path / "b" / "out")
    assert rows[killed].attempts == 2
    assert all(rows[t.id].attempts == 1 for t in tasks if t.id != killed)


async def test_closing_the_executor_stops_its_rate_limiter_service() -> None:
    executor = LocalExecutor(2)
    backend = executor.rate_limiter()
    assert (await backend.ask("k", 0, RateLimits())).wait_s == 0
    await executor.close()
    assert executor.worker_pids() == {}
    with pytest.raises(ProviderError, match="did not answer"):
        await backend.ask("k", 0, RateLimits())
