"""Budgets that finish tasks: grants follow what finished tasks cost, a task the budget cannot
fund is "not run" (and runs when the batch is run again with more), spend is reported while
attempts run, and what a worker reports is checked against the store."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from journeyman.batch import scheduler as scheduler_module
from journeyman.batch.allocation import CostModel, GrantRequest, needed_for, plan_grant
from journeyman.batch.events import (
    BatchEvent,
    SpendMismatch,
    SpendUpdated,
    TaskFinished,
    TaskStarted,
)
from journeyman.batch.executor import LocalExecutor
from journeyman.batch.job import TaskJob, TaskOutcome
from journeyman.batch.results import read_results
from journeyman.economics.ledger import Amount
from tests.batch.support import (
    model,
    scheduler,
    settings_for,
    task_text,
    tasks_for,
    write_tasks_file,
)
from tests.batch.test_batch_cli import batch_args, env_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem
from tests.support.cli import journeyman

CHEAP = (0.0, 100.0)
"""USD per million tokens: $0.0001 an output token, so a first call needs about $0.0064."""
TASK_USD = 0.012
"""What each task below costs: three replies of 40 output tokens."""


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("JOURNEYMAN_EDIT_TOOL", "edit_file")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def same_cost_tasks(tmp_path: Path, count: int) -> list:
    return tasks_for(tmp_path, [task_text(2, out=40, name=f"t{i}") for i in range(count)])


# --- the plan, alone ---------------------------------------------------------------------


def test_the_expected_need_is_a_high_quantile_of_finished_needs_with_a_margin() -> None:
    costs = CostModel()
    assert costs.expected() is None
    for usd in (0.01, 0.012, 0.011, 0.02, 0.009, 0.01, 0.01, 0.011, 0.012, 0.013):
        costs.record(Amount(100, usd), Amount(120, usd + 0.002))
    expected = costs.expected()
    assert expected is not None and expected.usd == pytest.approx(0.015 + 0.25 * 0.013)
    assert expected.tokens == 120 + 25


def test_a_task_needed_room_for_the_worst_case_of_its_costliest_call() -> None:
    floor = Amount(70, 0.0064)
    # three replies of $0.004: the last one went out needing $0.008 + $0.0064
    calls = [Amount(40, 0.004)] * 3
    assert needed_for(calls, floor) == Amount(150, pytest.approx(0.0144))
    # a call dearer than the floor needs itself; earlier attempts' spend comes first
    needed = needed_for([Amount(500, 0.05)], floor, before=Amount(10, 0.01))
    assert needed == Amount(510, pytest.approx(0.06))


def test_before_any_task_finished_one_runs_alone_allowed_what_is_left() -> None:
    plan = GrantRequest(
        left=Amount(None, 0.03), limit=Amount(), floor=Amount(0, 0.0064), expected=None,
        running=0, startable=4,
    )  # fmt: skip
    assert plan_grant(plan) == Amount(None, 0.03)
    assert plan_grant(replace(plan, running=1)) is None  # the next waits for what it costs
    assert plan_grant(replace(plan, limit=Amount(None, 0.01))) == Amount(None, 0.01)


def test_without_a_cap_tasks_start_at_once_with_their_own_limits() -> None:
    plan = GrantRequest(
        left=Amount(None, None), limit=Amount(None, 0.2), floor=Amount(0, 0.0064),
        expected=None, running=3, startable=1,
    )  # fmt: skip
    assert plan_grant(plan) == Amount(None, 0.2)
    assert plan_grant(replace(plan, limit=Amount())) == Amount(None, None)


def test_a_task_starts_only_when_what_is_left_covers_its_expected_cost() -> None:
    plan = GrantRequest(
        left=Amount(None, 0.018), limit=Amount(), floor=Amount(0, 0.0064),
        expected=Amount(0, 0.015), running=0, startable=3,
    )  # fmt: skip
    assert plan_grant(plan) == Amount(None, 0.015)  # never less than expected
    assert plan_grant(replace(plan, left=Amount(None, 0.9))) == Amount(None, 0.3)  # a share
    assert plan_grant(replace(plan, left=Amount(None, 0.014))) is None
    # a task whose own limit is lower needs only that
    assert plan_grant(replace(plan, left=Amount(None, 0.01), limit=Amount(None, 0.008))) == (
        Amount(None, 0.008)
    )


def test_a_per_task_budget_is_granted_whole_or_not_at_all() -> None:
    plan = GrantRequest(
        left=Amount(None, 0.5), limit=Amount(None, 0.3), floor=Amount(0, 0.0064),
        expected=None, running=1, startable=2, fixed=True,
    )  # fmt: skip
    assert plan_grant(plan) == Amount(None, 0.3)
    assert plan_grant(replace(plan, left=Amount(None, 0.29))) is None


# --- through the scheduler ----------------------------------------------------------------


@pytest.mark.parametrize(("covered", "parallel"), [(1, 4), (2, 4), (2, 1), (3, 4), (5, 2), (8, 4)])
def test_a_cap_that_covers_k_tasks_finishes_at_least_k_minus_one(
    tmp_path: Path, fake_openai: FakeOpenAIServer, covered: int, parallel: int
) -> None:
    fake_openai.default = model
    tasks = same_cost_tasks(tmp_path, 8)
    cap = covered * TASK_USD + 0.001
    settings = settings_for(tmp_path, fake_openai, global_usd=cap, config={"price_per_mtok": CHEAP})
    summary = asyncio.run(scheduler(tasks, settings, parallel).run())
    assert summary.count("succeeded") >= covered - 1, summary.line()
    assert summary.spent.usd is not None and summary.spent.usd <= cap + 1e-12
    assert summary.overspend.usd == 0
    # what could not be paid for was never started to fail
    assert summary.count("not_run") == 8 - summary.count("succeeded") - summary.count("failed")
    # a cap for one task's cost may not leave its last call the room the loop asks for
    assert summary.count("failed") == 0 or covered == 1, summary.line()


class Unpaid:
    """An executor whose attempts all end as a loop ends when its grant cannot pay for the
    first call: `max_budget_usd`, nothing spent."""

    max_parallel = 2

    async def run(self, job: TaskJob) -> TaskOutcome:
        return TaskOutcome(
            task_id=job.task.id, session_id=job.session_id, status="failed",
            finish_reason="max_budget_usd", cost_usd=0.0, tokens=0, duration_s=0.0,
            iterations=1, verify_passed=None, error="no call fits", spend_reported=True,
        )  # fmt: skip

    async def close(self) -> None:
        return None


def test_a_started_task_whose_first_call_cannot_be_paid_is_not_run(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    tasks = same_cost_tasks(tmp_path, 2)
    settings = settings_for(tmp_path, fake_openai, global_usd=1.0)
    summary = asyncio.run(scheduler_module.Scheduler(tasks, settings, Unpaid()).run())
    assert summary.count("not_run") == 2 and summary.count("failed") == 0
    row = read_results(tmp_path / "out")["task-1"]
    assert (row.status, row.finish_reason) == ("not_run", "budget_exhausted")
    assert row.error is not None and "could not pay for its first model call" in row.error


class Misreports:
    """Threads running the real attempt, whose outcome then claims twice what it spent."""

    def __init__(self) -> None:
        self.inner = LocalExecutor(2, processes=False)
        self.max_parallel = 2

    async def run(self, job: TaskJob) -> TaskOutcome:
        outcome = await self.inner.run(job)
        return replace(outcome, cost_usd=outcome.cost_usd * 2)

    async def close(self) -> None:
        await self.inner.close()


def test_a_worker_report_that_differs_from_the_store_is_an_error_never_silence(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(1, out=10)])
    settings = settings_for(tmp_path, fake_openai, global_usd=1.0)
    events: list[BatchEvent] = []
    run = scheduler_module.Scheduler(tasks, settings, Misreports(), on_event=events.append)
    summary = asyncio.run(run.run())
    mismatches = [e for e in events if isinstance(e, SpendMismatch)]
    assert len(mismatches) == 1
    assert "reported $0.040000" in mismatches[0].message
    assert "the session store holds $0.020000" in mismatches[0].message
    row = read_results(tmp_path / "out")["task-1"]
    assert row.status == "succeeded" and row.spend_mismatch == mismatches[0].message
    assert row.cost_usd == pytest.approx(0.04)  # the larger counts against the cap
    assert summary.spent.usd == pytest.approx(0.04)
    assert not summary.all_succeeded and "SPEND MISMATCH on 1 task" in summary.line()


class Slow:
    """The model, each reply after the first held back `delay_s`."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        if any(m.get("role") == "tool" for m in request.json.get("messages", [])):
            time.sleep(self.delay_s)
        return model(request)


def test_spend_moves_in_the_progress_while_a_task_runs(
    tmp_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler_module, "IN_FLIGHT_POLL_S", 0.1)
    fake_openai.default = Slow(0.6)
    tasks = tasks_for(tmp_path, [task_text(3, out=10)])
    events: list[BatchEvent] = []
    settings = settings_for(tmp_path, fake_openai, global_usd=1.0)
    asyncio.run(scheduler(tasks, settings, on_event=events.append).run())
    finished = next(i for i, e in enumerate(events) if isinstance(e, TaskFinished))
    live = [e for e in events[:finished] if isinstance(e, SpendUpdated)]
    moving = sorted({e.spend.in_flight_usd or 0.0 for e in live})
    assert len(moving) >= 2 and moving[-1] >= 0.02, moving  # each call shows as it lands
    assert all((e.spend.spent_usd or 0.0) == 0.0 for e in live)  # settled only at the end
    last = events[-1]
    assert last.type == "batch_finished"
    assert last.spend.spent_usd == pytest.approx(0.04) and not last.spend.in_flight_usd


def test_without_a_global_cap_tasks_run_side_by_side_from_the_start(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = Slow(0.3)
    tasks = tasks_for(tmp_path, [task_text(1, name=f"t{i}") for i in range(3)])
    events: list[BatchEvent] = []
    run = scheduler(tasks, settings_for(tmp_path, fake_openai), 3, on_event=events.append)
    asyncio.run(run.run())
    started = [e for e in events if isinstance(e, TaskStarted)]
    assert max(e.counts.running for e in started) == 3


# --- through the CLI ------------------------------------------------------------------------


@pytest.mark.slow
def test_eight_tasks_under_a_cap_for_two_finish_two_and_leave_six_to_run_later(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    """The issue's case: 8 tasks needing about $0.012 each under a $0.03 cap. Equal shares
    ($0.00375 each) finished none and spent $0.024; now 2 finish and 6 wait, unspent."""
    fake_openai.default = model
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", same_cost_tasks(tmp_path, 8))
    args = batch_args(tmp_path, tasks_file, "--max-parallel", "4", "--output-format", "json")
    args[args.index("--price-per-mtok") + 1] = "0,100"
    done = journeyman(*args, "--global-budget-usd", "0.03", env=env_for(fake_openai))
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["succeeded"], summary["failed"], summary["not_run"]) == (2, 0, 6)
    assert summary["spent_usd"] <= 0.03 and summary["overspend_usd"] == 0
    assert "budget exhausted after 2 of 8 tasks" in summary["summary"]
    rows = [
        json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    ]
    unfunded = [r for r in rows if r["status"] == "not_run"]
    assert all("a task is expected to need about $0.0174" in r["error"] for r in unfunded)
    # with more budget, the same command runs the six it left
    again = journeyman(*args, "--global-budget-usd", "0.12", env=env_for(fake_openai))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["succeeded"] == 8
