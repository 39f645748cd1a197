"""How a batch counts and names things: attempts after a retry, infrastructure errors apart
from failures, one task in the singular, and a batch's tasks shown as tasks."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from journeyman.batch.events import BatchEvent, Spend, TaskFinished, TaskRequeued
from journeyman.batch.executor import LocalExecutor
from journeyman.batch.results import TaskResult, read_results
from journeyman.batch.runner import run_batch
from journeyman.batch.scheduler import BatchSummary
from journeyman.cli.batch_cmd import Progress
from journeyman.cli.options import OutputFormat
from journeyman.economics.ledger import Amount
from tests.batch.support import model, scheduler, settings_for, task_text, tasks_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, error
from tests.support.cli import clean_env, journeyman

CALLS_PER_ATTEMPT = 5
"""A model call is tried this many times (first try and retries) before the run gives up."""


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class DownFor:
    """503 for the first `count` requests whose task text holds `marker`, then the model."""

    def __init__(self, count: int, marker: str = "") -> None:
        self.left = count
        self.marker = marker
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        with self._lock:
            down = self.left > 0 and self.marker in request.raw_body.decode()
            self.left -= down
        return error(503, retry_after=0) if down else model(request)


def test_a_task_retried_after_an_infrastructure_error_counts_two_attempts(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = DownFor(CALLS_PER_ATTEMPT)
    tasks = tasks_for(tmp_path, [task_text(1)])
    events: list[BatchEvent] = []
    settings = settings_for(tmp_path, fake_openai, infra_retry_delay_s=0.01)
    summary = asyncio.run(scheduler(tasks, settings, on_event=events.append).run())
    assert summary.all_succeeded, summary.line()
    assert read_results(settings.out)["task-1"].attempts == 2
    [requeued] = [e for e in events if isinstance(e, TaskRequeued)]
    assert requeued.counts.failed == 0 and requeued.counts.infra_error == 0


def test_infrastructure_errors_are_not_counted_as_failures(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = DownFor(10 * CALLS_PER_ATTEMPT, marker="broken")
    tasks = tasks_for(tmp_path, [task_text(0, name="broken"), task_text(0)])
    events: list[BatchEvent] = []
    settings = settings_for(tmp_path, fake_openai, max_infra_retries=0)
    summary = asyncio.run(scheduler(tasks, settings, on_event=events.append).run())
    assert summary.count("infra_error") == 1, summary.line()
    last = events[-1]
    counts = last.counts
    assert (counts.succeeded, counts.failed, counts.infra_error) == (1, 0, 1)
    shown = Progress(OutputFormat.TEXT, live=False)._describe(
        TaskFinished("b", "x", "s", "r", 0.0, 0, None, Spend(), counts)
    )
    assert shown.startswith("[2/2 done, 0 running, 0 failed, 1 infrastructure error")


def test_one_task_is_said_in_the_singular() -> None:
    row = TaskResult("t", "not_run", None, 0.0, 0, 0.0, 0, None, None)
    summary = BatchSummary("b", [row], True, Amount(0, 0.0), Amount(None, 1.0), Amount(0, 0.0), 0)
    text = summary.line()
    assert "b: 1 task: " in text and "budget exhausted after 0 of 1 task;" in text


def test_sessions_show_names_a_batchs_model_and_tasks(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(0)])
    settings = settings_for(tmp_path, fake_openai)
    settings.provider = None  # as when --provider is not given
    summary = asyncio.run(
        run_batch(tasks, settings, LocalExecutor(1, processes=False), tasks_file="t.jsonl")
    )
    assert summary.all_succeeded, summary.line()
    env = clean_env()
    shown = journeyman(
        "sessions", "show", "batch-test", "--session-dir", str(settings.store_path), env=env
    )
    assert shown.returncode == 0, shown.stderr
    assert "model gpt-4.1-mini" in shown.stdout and "None:" not in shown.stdout
    assert "tasks (tree cost" in shown.stdout and "subagents" not in shown.stdout
    assert "batch of 1 task from t.jsonl" in shown.stdout
    task_session = summary.results[0].session_id
    assert task_session is not None
    child = journeyman(
        "sessions", "show", task_session, "--session-dir", str(settings.store_path), env=env
    )
    assert child.returncode == 0, child.stderr
    assert "(task of batch batch-test)" in child.stdout and "subagent" not in child.stdout
