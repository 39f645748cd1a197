"""The scheduler over real runs (threads) against the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from journeyman.batch.events import (
    BatchEvent,
    TaskRequeued,
    batch_event_from_dict,
    batch_event_to_dict,
)
from journeyman.batch.executor import LocalExecutor
from journeyman.batch.results import read_results
from journeyman.batch.scheduler import Scheduler, opening_floor
from journeyman.session.store import SessionStore
from tests.batch.support import (
    RateLimitOnce,
    model,
    scheduler,
    settings_for,
    task_text,
    tasks_for,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, reply


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("JOURNEYMAN_EDIT_TOOL", "edit_file")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_every_task_runs_in_its_own_copy_as_a_session_of_the_batch(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(2), task_text(1), task_text(0)])
    events: list[BatchEvent] = []
    summary = asyncio.run(
        scheduler(
            tasks, settings_for(tmp_path, fake_openai, keep="all"), on_event=events.append
        ).run()
    )
    assert summary.all_succeeded and summary.count("succeeded") == 3
    assert not (tmp_path / "project" / "step1.txt").exists()  # never the original
    copy = tmp_path / "out" / "workspaces" / "task-1" / "attempt-1"
    assert (copy / "step2.txt").exists()
    rows = read_results(tmp_path / "out")
    assert [rows[t.id].status for t in tasks] == ["succeeded"] * 3
    assert rows["task-1"].iterations == 3 and rows["task-1"].tokens == 3 * 19
    store = SessionStore(tmp_path / "sessions")
    for row in rows.values():
        assert row.session_id is not None
        assert store.load_session(row.session_id).parent_id == "batch-test"
    store.close()
    kinds = [e.type for e in events]
    assert kinds[0] == "batch_started" and kinds[-1] == "batch_finished"
    assert kinds.count("task_started") == 3 and kinds.count("task_finished") == 3


def test_agent_failures_are_final_and_counted(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(1), task_text(1)])
    tasks[0] = tasks[0].model_copy(update={"verify": "true"})  # a check of the user's own
    tasks[1] = tasks[1].model_copy(update={"verify": "exit 1"})
    settings = settings_for(tmp_path, fake_openai, config={"verify": True, "max_verify_rounds": 1})
    summary = asyncio.run(scheduler(tasks, settings).run())
    assert summary.count("succeeded") == 1 and summary.count("failed") == 1
    failed = read_results(tmp_path / "out")["task-2"]
    assert failed.finish_reason == "verification_failed" and failed.verify_passed is False
    assert not summary.all_succeeded


def test_the_global_cap_stops_new_tasks_and_is_never_passed(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(3, out=50) for _ in range(6)])
    settings = settings_for(tmp_path, fake_openai, global_usd=0.5, per_task_usd=0.3)
    summary = asyncio.run(scheduler(tasks, settings).run())
    assert summary.budget_exhausted
    assert summary.spent.usd is not None and summary.spent.usd <= 0.5
    assert summary.overspend.usd == 0
    # each task costs $0.20 of its $0.30: two fit, the third's $0.30 does not
    assert summary.count("succeeded") == 2 and summary.count("not_run") == 4
    assert "budget exhausted after" in summary.line()


def test_tasks_the_budget_cannot_fund_one_call_for_are_not_run_and_run_later(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(1) for _ in range(4)])
    settings = settings_for(tmp_path, fake_openai, global_usd=0.05)
    floor = opening_floor(tasks[0], settings)
    assert floor.usd == pytest.approx(0.064)  # 64 reply tokens at $0.001; prompts cost nothing
    summary = asyncio.run(scheduler(tasks, settings).run())
    assert summary.count("not_run") == 4 and summary.count("failed") == 0
    assert "budget exhausted after 0 of 4 tasks" in summary.line()
    assert fake_openai.requests == []  # none was started to fail at its first call
    rows = read_results(tmp_path / "out")
    for row in rows.values():
        assert (row.status, row.finish_reason) == ("not_run", "budget_exhausted")
        assert row.error is not None and row.error.startswith("not run: budget exhausted")
        assert "$0.0500 left, its first call needs about $0.0640" in row.error
    # not an agent failure: the same batch with more budget runs them
    again = asyncio.run(scheduler(tasks, replace(settings, global_usd=1.0)).run())
    assert again.all_succeeded and again.count("succeeded") == 4


def test_a_429_pauses_the_calls_and_no_task_loses_its_place(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = RateLimitOnce(3)
    tasks = tasks_for(tmp_path, [task_text(1) for _ in range(4)])
    events: list[BatchEvent] = []
    run = scheduler(tasks, settings_for(tmp_path, fake_openai), parallel=3, on_event=events.append)
    summary = asyncio.run(run.run())
    assert summary.all_succeeded
    assert not [e for e in events if isinstance(e, TaskRequeued)]
    assert all(r.attempts == 1 for r in summary.results)
    assert len(fake_openai.requests) == 4 * 2 + 3  # each 429'd call was sent again, once


def test_a_call_that_gives_up_on_the_limit_requeues_its_task(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = RateLimitOnce(1, retry_after=1.5)  # longer than the call may wait
    tasks = tasks_for(tmp_path, [task_text(1)])
    events: list[BatchEvent] = []
    settings = settings_for(tmp_path, fake_openai, config={"model_call_timeout_s": 1.0})
    summary = asyncio.run(scheduler(tasks, settings, parallel=3, on_event=events.append).run())
    assert summary.all_succeeded and summary.results[0].attempts == 2
    requeued = [e for e in events if isinstance(e, TaskRequeued)]
    assert len(requeued) == 1 and requeued[0].reason == "rate_limited"
    assert requeued[0].concurrency == 1 and (requeued[0].pause_s or 0) >= 1.0
    lines = [json.dumps(batch_event_to_dict(e)) for e in events]  # every event is JSON-ready
    assert [batch_event_from_dict(json.loads(line)) for line in lines] == events


class KillsItsWorkerOnce:
    """The first task's second reply runs `kill -9 $PPID` (its worker process); then the
    ordinary model."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        messages = request.json.get("messages", [])
        answered = any(m.get("role") == "tool" for m in messages)
        if "victim" in request.raw_body.decode() and answered and not self.marker.exists():
            self.marker.write_text("killed")
            return reply(tool_calls=[("run_command", {"command": "kill -9 $PPID"})])
        return model(request)


def test_a_task_whose_worker_dies_is_retried_from_its_last_step(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = KillsItsWorkerOnce(tmp_path / "killed")
    tasks = tasks_for(tmp_path, [task_text(2, name="victim"), task_text(1), task_text(1)])
    settings = settings_for(tmp_path, fake_openai, infra_retry_delay_s=0.05)
    events: list[BatchEvent] = []
    run = Scheduler(tasks, settings, LocalExecutor(2), on_event=events.append)
    summary = asyncio.run(run.run())
    asyncio.run(run.executor.close())
    assert (tmp_path / "killed").exists()
    assert summary.all_succeeded, summary.line()
    retried = [e for e in events if isinstance(e, TaskRequeued)]
    # only the victim: the task that ran beside it goes on in its own worker
    assert [(e.task_id, e.reason) for e in retried] == [("task-1", "infra_error")]
    victim = read_results(tmp_path / "out")["task-1"]
    assert victim.attempts == 2 and victim.iterations == 3  # the same session, continued


def test_agent_failures_are_retried_only_when_asked(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    ok = tmp_path / "ok"
    tasks = tasks_for(tmp_path, [task_text(1)], verify=f"test -f {ok}")
    settings = settings_for(tmp_path, fake_openai, config={"verify": True, "max_verify_rounds": 1})
    first = asyncio.run(scheduler(tasks, settings).run())
    assert first.count("failed") == 1
    ok.write_text("")
    calls = len(fake_openai.requests)
    again = asyncio.run(scheduler(tasks, settings).run())  # a resume: the failure stands
    assert again.count("failed") == 1 and len(fake_openai.requests) == calls
    settings.retry_failed = True
    settings.keep = "all"
    retried = asyncio.run(scheduler(tasks, settings).run())
    assert retried.all_succeeded
    row = read_results(tmp_path / "out")["task-1"]
    assert row.attempts == 2 and row.workspace is not None
    assert Path(row.workspace) == tmp_path / "out" / "workspaces" / "task-1" / "attempt-2"
    assert row.cost_usd == pytest.approx(first.spent.usd + 2 * 0.007)  # both attempts count


def test_a_resumed_batch_charges_what_tasks_removed_from_its_file_spent(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(1, out=100), task_text(1, out=100)])
    settings = settings_for(tmp_path, fake_openai, global_usd=0.5)
    first = asyncio.run(scheduler(tasks[:1], settings).run())
    assert first.spent.usd == pytest.approx(0.2)
    again = asyncio.run(scheduler(tasks[1:], settings).run())  # the first task is gone
    assert again.spent.usd == pytest.approx(0.4)  # still counted against the cap
