"""Running again on an existing --out: only the same tasks resume it, under a cap it has not
already passed, and the time earlier runs took stays in the results."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from journeyman.batch.results import read_results, write_results
from journeyman.batch.scheduler import resume_state
from journeyman.session.store import SessionStore
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
from tests.fakes.script import RecordedRequest, ScriptItem, error
from tests.support.cli import journeyman


def test_other_tasks_on_the_same_out_are_refused_with_what_to_do(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    first = write_tasks_file(tmp_path / "t1.jsonl", tasks_for(tmp_path, [task_text(0)]))
    done = journeyman(*batch_args(tmp_path, first), env=env_for(fake_openai))
    assert done.returncode == 0, done.stderr
    calls = len(fake_openai.requests)
    second = write_tasks_file(
        tmp_path / "t2.jsonl", tasks_for(tmp_path, [task_text(0), task_text(1)])
    )
    refused = journeyman(*batch_args(tmp_path, second), env=env_for(fake_openai))
    assert refused.returncode == 2, refused.stdout
    assert "other tasks" in refused.stderr and "another --out" in refused.stderr
    assert "delete" in refused.stderr and "Traceback" not in refused.stderr
    assert len(fake_openai.requests) == calls
    # the same tasks, written differently (a comment, a blank line), still resume
    first.write_text("# the same task\n\n" + first.read_text())
    again = journeyman(*batch_args(tmp_path, first), env=env_for(fake_openai))
    assert again.returncode == 0, again.stderr
    assert len(fake_openai.requests) == calls


def test_resuming_under_a_cap_below_what_was_spent_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks_file = write_tasks_file(
        tmp_path / "tasks.jsonl", tasks_for(tmp_path, [task_text(1, out=100)] * 1)
    )
    done = journeyman(*batch_args(tmp_path, tasks_file), env=env_for(fake_openai))
    assert done.returncode == 0, done.stderr  # spent $0.2
    refused = journeyman(
        *batch_args(tmp_path, tasks_file, "--global-budget-usd", "0.1"), env=env_for(fake_openai)
    )
    assert refused.returncode == 2, refused.stdout
    assert "already spent $0.2000" in refused.stderr
    assert "more than --global-budget-usd 0.1" in refused.stderr
    assert "Traceback" not in refused.stderr


class DownThenUp:
    """The provider is unavailable until `up` is set."""

    def __init__(self) -> None:
        self.up = False

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        return model(request) if self.up else error(503, retry_after=0)


def test_a_resumed_task_keeps_the_time_its_earlier_runs_took(
    tmp_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    provider = DownThenUp()
    fake_openai.default = provider
    tasks = tasks_for(tmp_path, [task_text(1)])
    settings = settings_for(tmp_path, fake_openai, max_infra_retries=0)
    first = asyncio.run(scheduler(tasks, settings).run())
    assert first.count("infra_error") == 1, first.line()
    row = read_results(settings.out)["task-1"]
    row.duration_s = 1234.5  # as if the earlier run had taken that long
    write_results(settings.out, [row])
    store = SessionStore(settings.store_path)
    try:
        states = resume_state(tasks, settings, store, read_results(settings.out))
    finally:
        store.close()
    assert states[0].resumed and states[0].duration_s == 1234.5
    provider.up = True
    again = asyncio.run(scheduler(tasks, settings).run())
    assert again.all_succeeded, again.line()
    assert read_results(settings.out)["task-1"].duration_s >= 1234.5
