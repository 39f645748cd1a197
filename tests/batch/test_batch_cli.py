"""`journeyman batch` as a user runs it: a subprocess against the fake OpenAI server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from journeyman.batch.job import session_spending
from journeyman.session.store import SessionStore
from tests.batch.support import RateLimitEvery, model, task_text, tasks_for, write_tasks_file
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem
from tests.support.cli import clean_env, journeyman
from tests.support.waiting import children, running, wait_until


def env_for(server: FakeOpenAIServer) -> dict[str, str]:
    return clean_env(OPENAI_API_KEY="sk-test-batch", OPENAI_BASE_URL=server.base_url)


def batch_args(tmp_path: Path, tasks_file: Path, *extra: str) -> list[str]:
    return [
        "batch",
        str(tasks_file),
        "--out",
        str(tmp_path / "out"),
        "--session-dir",
        str(tmp_path / "sessions"),
        "--model",
        "gpt-4.1-mini",
        "--price-per-mtok",
        "0,1000",
        "--no-verify",
        "--sandbox",
        "local",
        *extra,
    ]


def rows(tmp_path: Path) -> list[dict]:
    text = (tmp_path / "out" / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_batch_runs_every_task_and_writes_results_and_reports(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    texts = [task_text(1), task_text(2, name="<script>alert(1)</script>"), task_text(0)]
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks_for(tmp_path, texts))
    done = journeyman(*batch_args(tmp_path, tasks_file), env=env_for(fake_openai))
    assert done.returncode == 0, done.stderr
    assert "3 succeeded, 0 failed" in done.stdout and "Traceback" not in done.stderr
    results = rows(tmp_path)
    assert [r["id"] for r in results] == ["task-1", "task-2", "task-3"]
    assert all(r["status"] == "succeeded" and r["session_id"] for r in results)
    assert results[1]["iterations"] == 3 and results[1]["cost_usd"] == pytest.approx(0.021)
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<svg" in page and "<script>" not in page and "&lt;script&gt;" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Pass rate: 100.0%" in report and "Most expensive tasks" in report
    shown = journeyman(
        "sessions",
        "show",
        results[0]["session_id"],
        "--session-dir",
        str(tmp_path / "sessions"),
        env=env_for(fake_openai),
    )
    assert shown.returncode == 0, shown.stderr
    store = SessionStore(tmp_path / "sessions")
    batch_id = store.load_session(results[0]["session_id"]).parent_id
    assert batch_id is not None and store.summary(batch_id).finish_reason == "completed"
    store.close()
    for command in (["resume", batch_id], ["fork", batch_id, "--at-step", "0"]):
        refused = journeyman(
            *command, "--session-dir", str(tmp_path / "sessions"), env=env_for(fake_openai)
        )
        assert refused.returncode == 2 and "is a batch, not a run" in refused.stderr


def test_a_bad_tasks_line_exits_2_naming_the_line(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(
        json.dumps({"id": "a", "task": "x", "workspace": str(tmp_path)}) + "\n{not json\n"
    )
    done = journeyman(*batch_args(tmp_path, tasks_file), env=env_for(fake_openai))
    assert done.returncode == 2
    assert f"{tasks_file}:2" in done.stderr and "Traceback" not in done.stderr
    tasks_file.write_text(json.dumps({"id": "a", "task": "x"}) + "\n")
    missing = journeyman(*batch_args(tmp_path, tasks_file), env=env_for(fake_openai))
    assert missing.returncode == 2 and "workspace: missing" in missing.stderr
    workspace = tmp_path / "ws"  # not the folder --out is in: that is refused first
    workspace.mkdir()
    tasks_file.write_text(json.dumps({"id": "a", "task": "x", "workspace": str(workspace)}) + "\n")
    unknown = journeyman(
        *batch_args(tmp_path, tasks_file, "--executor", "spark"), env=env_for(fake_openai)
    )
    assert unknown.returncode == 2 and "unknown executor 'spark'" in unknown.stderr
    nothing = journeyman(*batch_args(tmp_path, tasks_file, "--resume"), env=env_for(fake_openai))
    assert nothing.returncode == 2 and "nothing to resume" in nothing.stderr
    for flag in ("--per-task-budget-usd", "--global-budget-usd"):
        empty = journeyman(*batch_args(tmp_path, tasks_file, flag, "0"), env=env_for(fake_openai))
        assert empty.returncode == 2 and f"{flag} must be more than 0" in empty.stderr
    assert not (tmp_path / "out").exists() and not fake_openai.requests


def test_budget_exhaustion_ends_the_batch_with_exit_1_and_says_so(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(3, out=50) for _ in range(5)])
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks)
    args = batch_args(
        tmp_path,
        tasks_file,
        "--global-budget-usd",
        "0.5",
        "--per-task-budget-usd",
        "0.3",
        "--output-format",
        "json",
    )
    done = journeyman(*args, env=env_for(fake_openai))
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert summary["budget_exhausted"] and summary["spent_usd"] <= 0.5
    assert summary["overspend_usd"] == 0 and summary["not_run"] == 3
    assert "budget exhausted after 2 of 5 tasks" in summary["summary"]


def test_at_11_percent_429s_every_task_succeeds_without_losing_its_place(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    served = RateLimitEvery(9, retry_after=1.0)  # 11 % of requests
    fake_openai.default = served
    texts = [task_text(3, name=f"t{i}") for i in range(6)]
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks_for(tmp_path, texts))
    args = batch_args(tmp_path, tasks_file, "--max-parallel", "3", "-o", "stream-json")
    done = journeyman(*args, env=env_for(fake_openai))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert not [e for e in events if e["type"] == "task_requeued"]  # no attempt ended by a 429
    assert [e["type"] for e in events].count("task_started") == 6
    assert len(served.limited_at) >= 2
    # every task held back while the service asked (calls admitted just before a 429 may
    # arrive within the first 0.3 s of its pause on a loaded machine)
    assert not served.sent_during_pauses(grace_s=0.3)
    assert all(row["status"] == "succeeded" and row["attempts"] == 1 for row in rows(tmp_path))


def test_rpm_and_tpm_are_refused_below_one(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks_for(tmp_path, [task_text(0)]))
    for flag in ("--rpm", "--tpm"):
        refused = journeyman(*batch_args(tmp_path, tasks_file, flag, "0"), env=env_for(fake_openai))
        assert refused.returncode == 2 and flag in refused.stderr
    assert not fake_openai.requests


def slow_model(request: RecordedRequest) -> ScriptItem:
    time.sleep(0.25)
    return model(request)


def test_kill_9_mid_batch_then_resume_loses_nothing_and_charges_nothing_twice(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = slow_model
    texts = [task_text(3, out=20, name=f"job{i}") for i in range(6)]
    tasks = tasks_for(tmp_path, texts)
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks)
    args = batch_args(
        tmp_path,
        tasks_file,
        "--max-parallel",
        "2",
        "--global-budget-usd",
        "5",
        "--per-task-budget-usd",
        "0.5",
        "-o",
        "stream-json",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "journeyman", *args],
        env=env_for(fake_openai),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    finished_before: list[str] = []
    workers: list[int] = []
    assert process.stdout is not None
    for line in process.stdout:
        event = json.loads(line)
        if event["type"] == "task_finished":
            finished_before.append(event["task_id"])
            if len(finished_before) == 2:
                workers = children(process.pid, mentioning="multiprocessing")
                os.kill(process.pid, signal.SIGKILL)
                break
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    wait_until(  # its workers notice and stop
        lambda: not any(running(pid) for pid in workers), what="the killed batch's workers ending"
    )
    requests_at_kill = len(fake_openai.requests)
    again = journeyman(*args[:-2], "--resume", env=env_for(fake_openai))
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    results = rows(tmp_path)
    assert sorted(r["id"] for r in results) == [t.id for t in tasks]  # each exactly once
    assert all(r["status"] == "succeeded" for r in results)
    # the tasks finished before the kill were not run again
    resumed_requests = fake_openai.requests[requests_at_kill:]
    texts = {t.id: t.task for t in tasks}
    for task_id in finished_before:
        assert not any(texts[task_id] in r.raw_body.decode() for r in resumed_requests)
    # interrupted tasks went on from their last saved step: 4 replies each, plus at most the
    # one call the kill cut off
    for task in tasks:
        calls = sum(1 for r in fake_openai.requests if task.task in r.raw_body.decode())
        assert 4 <= calls <= 5, (task.id, calls)
    # what the batch says it spent is what the store holds, once
    store = SessionStore(tmp_path / "sessions")
    stored = sum(session_spending(store, r["session_id"]).usd for r in results)
    store.close()
    assert sum(r["cost_usd"] for r in results) == pytest.approx(stored)
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"${stored:.4f} of a $5.0000 cap" in report


def test_without_model_a_server_with_several_models_is_refused_before_any_task(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    """As for `run`: the server at the base URL is asked for its models; with several, the
    batch lists them and exits 2 before any task starts."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps({"id": "a", "task": "x", "workspace": str(workspace)}) + "\n")
    fake_openai.models = ("small", "large")
    args = [
        arg for arg in batch_args(tmp_path, tasks_file) if arg not in ("--model", "gpt-4.1-mini")
    ]
    done = journeyman(*args, env=env_for(fake_openai))
    assert done.returncode == 2, done.stderr
    assert "has several models; pass one with --model NAME:\n  - small\n  - large" in done.stderr
    assert not (tmp_path / "out").exists() and not fake_openai.requests
