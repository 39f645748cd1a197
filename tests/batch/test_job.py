"""`run_job`: one attempt of one task against the fake OpenAI server, in this process."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from journeyman.batch.job import TaskJob, run_job, session_id_for
from journeyman.batch.task_file import BatchTask, TaskLimits
from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import error, reply

PRICE = (0.0, 1000.0)
"""USD per million input and output tokens: a call of the fake's 12 + 7 tokens costs $0.007."""


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("JOURNEYMAN_EDIT_TOOL", "edit_file")
    for name in ("ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def make_job(
    tmp_path: Path,
    server: FakeOpenAIServer,
    *,
    task_id: str = "t1",
    usd: float | None = None,
    tokens: int | None = None,
    limits: TaskLimits | None = None,
    resume: bool = True,
    mode: str = "react",
    verify: str | None = None,
) -> TaskJob:
    workspace = tmp_path / "ws" / task_id
    workspace.mkdir(parents=True, exist_ok=True)
    task = BatchTask(
        id=task_id, task="say done", workspace=str(workspace), limits=limits or TaskLimits()
    )
    return TaskJob(
        batch_id="b1",
        task=task,
        workspace_dir=str(workspace),
        store_path=str(tmp_path / "sessions"),
        session_id=session_id_for("b1", task_id, 1),
        model="gpt-4.1-mini",
        base_url=server.base_url,
        provider="openai",
        mode=mode,
        verify=verify,
        granted_tokens=tokens,
        granted_usd=usd,
        attempt=1,
        resume=resume,
        config={"price_per_mtok": PRICE, "verify": False, "sandbox": "local"},
    )


def finish() -> object:
    return reply(tool_calls=[("finish", {"summary": "done"})])


def test_a_job_runs_its_task_and_reports_what_it_spent(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.enqueue(reply(tool_calls=[("list_files", {"path": "."})]), finish())
    outcome = run_job(make_job(tmp_path, fake_openai))
    assert outcome.status == "succeeded", outcome
    assert outcome.finish_reason == "completed" and outcome.iterations == 2
    assert outcome.tokens == 2 * 19
    assert outcome.cost_usd == pytest.approx(2 * 0.007)
    store = SessionStore(tmp_path / "sessions")
    assert store.summary(outcome.session_id).finish_reason == "completed"
    store.close()


def test_the_grant_stops_the_task_before_a_call_that_could_overshoot_it(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    written = itertools.count(1)
    fake_openai.default = lambda _: reply(
        tool_calls=[("write_file", {"path": f"f{next(written)}.txt", "content": "x"})]
    )
    outcome = run_job(make_job(tmp_path, fake_openai, usd=0.2))
    assert outcome.status == "failed"
    assert outcome.finish_reason == "max_budget_usd"
    # it stopped when a short reply no longer fitted, never past its grant
    assert 0.2 - 0.07 < outcome.cost_usd <= 0.2


def test_the_grant_holds_when_the_server_reports_no_usage(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    written = itertools.count(1)
    fake_openai.default = lambda _: reply(
        tool_calls=[("write_file", {"path": f"f{next(written)}.txt", "content": "x"})],
        omit_usage=True,
    )
    outcome = run_job(make_job(tmp_path, fake_openai, usd=0.2))
    assert outcome.finish_reason == "max_budget_usd"
    # each reply was charged the longest reply it was allowed: never free, never past the grant
    assert 0 < outcome.cost_usd <= 0.2
    assert len(fake_openai.requests) <= 3


def test_a_rate_limit_ends_the_attempt_as_rate_limited(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.enqueue(error(429, retry_after=3))
    outcome = run_job(make_job(tmp_path, fake_openai))
    assert outcome.status == "rate_limited" and outcome.retry_after_s == 3
    assert len(fake_openai.requests) == 1  # no retry inside the task: the batch requeues it
    fake_openai.enqueue(finish())
    again = run_job(make_job(tmp_path, fake_openai))
    assert again.status == "succeeded" and again.session_id == outcome.session_id


def test_a_resumed_attempt_holds_its_own_grant(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    written = itertools.count(1)

    def write() -> object:
        return reply(tool_calls=[("write_file", {"path": f"f{next(written)}.txt", "content": "x"})])

    fake_openai.enqueue(*(write() for _ in range(12)), error(429))
    first = run_job(make_job(tmp_path, fake_openai))
    assert first.status == "rate_limited" and first.cost_usd == pytest.approx(12 * 0.007)
    fake_openai.default = lambda _: write()
    again = run_job(make_job(tmp_path, fake_openai, usd=0.2, tokens=60_000))
    assert again.session_id == first.session_id and again.finish_reason == "max_budget_usd"
    # counted from where the session stood, not from 0: never past this attempt's grant
    assert 0.2 - 0.07 < again.cost_usd <= 0.2
    assert again.tokens <= 60_000


def test_a_token_grant_holds_when_the_server_reports_no_usage(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    written = itertools.count(1)
    fake_openai.default = lambda _: reply(
        tool_calls=[("write_file", {"path": f"f{next(written)}.txt", "content": "x"})],
        omit_usage=True,
    )
    outcome = run_job(make_job(tmp_path, fake_openai, tokens=30_000))
    assert outcome.status == "failed" and outcome.finish_reason == "max_tokens"
    # each call was charged its prompt's bound and its longest reply, all inside the grant
    assert 0 < outcome.tokens <= 30_000
    assert len(fake_openai.requests) <= 3


@pytest.mark.parametrize("mode", ["phased", "plan-solve"])
def test_a_rate_limit_ends_the_attempt_in_every_mode(
    tmp_path: Path, fake_openai: FakeOpenAIServer, mode: str
) -> None:
    fake_openai.enqueue(error(429, retry_after=5))
    outcome = run_job(make_job(tmp_path, fake_openai, mode=mode, verify="true"))
    assert outcome.status == "rate_limited" and outcome.retry_after_s == 5, outcome.error
    assert len(fake_openai.requests) == 1


def test_a_server_fault_is_retried_inside_the_attempt(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.enqueue(error(500), finish())
    outcome = run_job(make_job(tmp_path, fake_openai))
    assert outcome.status == "succeeded" and len(fake_openai.requests) == 2


def test_a_grade_only_job_never_runs_an_agent_on_a_session_that_has_not_ended(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    from dataclasses import replace

    from journeyman.batch.grading import GradingSpec

    job = make_job(tmp_path, fake_openai)
    graded = job.task.model_copy(update={"grading": GradingSpec(test_cmd="true")})
    outcome = run_job(replace(job, task=graded, grade_only=True))
    assert outcome.status == "infra_error" and "nothing to grade" in (outcome.error or "")
    assert not fake_openai.requests and outcome.grade is None
