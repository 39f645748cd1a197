"""One ledger for several drivers: the record every backend keeps (`LedgerBook`), the Redis
ledger against a real redis-server (processes racing for the last dollar), `--ledger` through
the CLI, and a worker's per-call reports."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from journeyman.batch import scheduler as scheduler_module
from journeyman.batch.executor import LocalExecutor
from journeyman.batch.job import TaskJob, run_job, session_id_for
from journeyman.batch.ledgers import (
    LedgerBook,
    LedgerCapMismatch,
    LocalLedger,
    RedisLedger,
    parse_ledger,
)
from journeyman.batch.scheduler import Scheduler
from journeyman.batch.task_file import BatchTask
from journeyman.core.errors import ConfigurationError
from journeyman.economics.ledger import AllocationRefused, Amount
from journeyman.session.store import SessionStore
from tests.batch.support import (
    ledger_driver,
    model,
    settings_for,
    take_the_last_dollar,
    task_text,
    tasks_for,
    write_tasks_file,
)
from tests.batch.test_batch_cli import batch_args, env_for
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem
from tests.support.cli import journeyman
from tests.support.shared_state import REDIS_MISSING, redis_server


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A real redis-server on 127.0.0.1 for this module, stopped at its end."""
    if shutil.which("redis-server") is None:
        pytest.skip(REDIS_MISSING)
    with redis_server() as url:
        yield url


# --- the book every backend keeps -------------------------------------------------------


def test_a_second_batch_with_another_cap_is_refused_naming_both() -> None:
    book = LedgerBook.open("team", "batch-a", Amount(None, 1.0))
    book.join("batch-a", Amount(None, 1.0), Amount(0, 0.0))
    book.join("batch-b", Amount(None, 1.0), Amount(0, 0.0))  # the same cap: shared
    with pytest.raises(LedgerCapMismatch) as refused:
        book.join("batch-c", Amount(None, 2.0), Amount(0, 0.0))
    message = refused.value.message
    assert "ledger 'team' holds a cap of $1.0000, set by batch batch-a" in message
    assert "batch batch-c asks for $2.0000" in message


def test_a_batch_that_joins_again_is_charged_once_and_its_stale_holds_are_closed() -> None:
    book = LedgerBook.open("team", "b1", Amount(None, 1.0))
    book.join("b1", Amount(None, 1.0), Amount(0, 0.0))
    done = book.reserve("b1", "t1", Amount(None, 0.25))
    book.settle(done, Amount(10, 0.125))
    stale = book.reserve("b1", "t2", Amount(None, 0.25))  # the batch is killed mid-task
    book.report(stale, Amount(5, 0.0625))
    other = book.reserve("b2", "t1", Amount(None, 0.25))
    # run again: the store holds the finished task's rows, not the dead call's
    book.join("b1", Amount(None, 1.0), Amount(10, 0.125))
    assert book.account("b1") == Amount(15, 0.1875)  # nothing twice, the report kept
    assert book.pool.stats().open_reservations == 1  # the other batch's hold stays
    # a new ledger (say, a fresh actor) learns from the store what the batch spent
    fresh = LedgerBook.open("team", "b1", Amount(None, 1.0))
    fresh.join("b1", Amount(None, 1.0), Amount(10, 0.125))
    assert fresh.pool.stats().spent == Amount(10, 0.125)
    assert other.id in {r.id for r in book.pool.open_reservations()}


def test_the_ledger_option_is_read_strictly() -> None:
    assert parse_ledger("redis://127.0.0.1:6379/2").name == "default"
    spec = parse_ledger("redis://127.0.0.1:6379/0#team-a")
    assert (spec.redis_url, spec.name) == ("redis://127.0.0.1:6379/0", "team-a")
    assert parse_ledger("team").redis_url is None and parse_ledger("team").name == "team"
    for bad in ("http://x", "redis:///0", "redis://h:1/x", "a b", "redis://h:1/0#a/b"):
        with pytest.raises(ConfigurationError):
            parse_ledger(bad)


def test_the_in_process_ledger_does_not_travel_to_workers() -> None:
    ledger = LocalLedger(Amount(None, 1.0))
    ledger.join("b", Amount(None, 1.0), Amount(0, 0.0))
    assert ledger.for_workers() is None


# --- Redis ------------------------------------------------------------------------------


@pytest.mark.slow
def test_processes_racing_for_the_last_dollar_get_it_once(redis_url: str) -> None:
    RedisLedger(redis_url, "race").join("racer", Amount(None, 1.0), Amount(0, 0.0))
    start_at = time.time() + 1.5
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(4, mp_context=context) as pool:
        won = list(pool.map(take_the_last_dollar, [redis_url] * 8, ["race"] * 8, [start_at] * 8))
    assert won.count(True) == 1
    assert RedisLedger(redis_url, "race").available() == Amount(None, 0.0)


@pytest.mark.slow
def test_drivers_in_several_processes_never_overspend_one_redis_ledger(redis_url: str) -> None:
    ledger = RedisLedger(redis_url, "drivers")
    ledger.join("setup", Amount(None, 2.0), Amount(0, 0.0))
    start_at = time.time() + 1.5
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(4, mp_context=context) as pool:
        runs = list(
            pool.map(
                ledger_driver, [redis_url] * 4, ["drivers"] * 4, range(4), [25] * 4, [start_at] * 4
            )
        )
    stats = ledger.stats()
    assert sum(r[1] for r in runs) > 0, "the pool should have run dry and refused some"
    assert stats.open_reservations == 0 and stats.overspend == Amount(0, 0.0)
    assert stats.spent.usd == pytest.approx(sum(r[0] for r in runs))
    assert (stats.spent.usd or 0.0) <= 2.0 + 1e-9


def test_a_redis_ledger_travels_as_its_url_and_refuses_what_is_not_a_ledger(
    redis_url: str,
) -> None:
    ledger = RedisLedger(redis_url, "travels")
    ledger.join("b", Amount(None, 1.0), Amount(0, 0.0))
    held = ledger.reserve("b", "t", Amount(None, 0.5))
    copy = pickle.loads(pickle.dumps(ledger))
    copy.report(held, Amount(3, 0.25))
    assert ledger.stats().in_flight == Amount(3, 0.25)
    import redis

    redis.Redis.from_url(redis_url).set("journeyman:ledger:junk", b"{not json")
    with pytest.raises(Exception, match="does not hold a journeyman ledger"):
        RedisLedger(redis_url, "junk").stats()
    with pytest.raises(AllocationRefused):
        ledger.reserve("b", "u", Amount(None, 0.75))


def test_a_worker_reports_each_model_call_to_the_ledger_as_it_happens(
    tmp_path: Path, fake_openai: FakeOpenAIServer, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("JOURNEYMAN_EDIT_TOOL", "edit_file")
    fake_openai.default = model
    ledger = RedisLedger(redis_url, "worker")
    ledger.join("b1", Amount(None, 1.0), Amount(0, 0.0))
    held = ledger.reserve("b1", "t1", Amount(None, 0.5))
    reports: list[Amount] = []
    real_report = RedisLedger.report

    def spy(self: RedisLedger, reservation: object, used: Amount, run: str = "") -> None:
        reports.append(used)
        real_report(self, reservation, used, run)  # type: ignore[arg-type]

    monkeypatch.setattr(RedisLedger, "report", spy)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    job = TaskJob(
        batch_id="b1",
        task=BatchTask(id="t1", task=task_text(2, out=10), workspace=str(workspace)),
        workspace_dir=str(workspace),
        store_path=str(tmp_path / "sessions"),
        session_id=session_id_for("b1", "t1", 1),
        model="gpt-4.1-mini",
        base_url=fake_openai.base_url,
        provider="openai",
        mode="react",
        verify=None,
        granted_tokens=None,
        granted_usd=0.5,
        attempt=1,
        resume=True,
        config={"price_per_mtok": (0.0, 1000.0), "verify": False, "sandbox": "local"},
        ledger=ledger,
        reservation=held,
    )
    outcome = run_job(job)
    assert outcome.status == "succeeded" and outcome.spend_reported
    assert [round(r.usd or 0.0, 6) for r in reports] == [0.01, 0.02, 0.03]  # one per call
    assert ledger.stats().in_flight.usd == pytest.approx(outcome.cost_usd)


# --- through the CLI ----------------------------------------------------------------------


@pytest.mark.slow
def test_two_batches_on_one_redis_ledger_share_one_cap(
    tmp_path: Path, fake_openai: FakeOpenAIServer, redis_url: str
) -> None:
    fake_openai.default = model
    ledger = redis_url + "#cli-shared"
    runs = []
    for name in ("one", "two"):
        root = tmp_path / name
        root.mkdir()
        tasks = tasks_for(root, [task_text(1, out=100, name=f"{name}{i}") for i in range(4)])
        tasks_file = write_tasks_file(root / "tasks.jsonl", tasks)
        args = batch_args(root, tasks_file, "--output-format", "json", "--max-parallel", "2")
        args[args.index("--price-per-mtok") + 1] = "0,100"
        runs.append([*args, "--ledger", ledger, "--global-budget-usd", "0.1"])
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "journeyman", *args],
            env=env_for(fake_openai),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in runs
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    summaries = [json.loads(out) for out, _ in outputs]
    # each task costs $0.02 (two replies of 100 tokens): the cap covers 5 of the 8
    assert sum(s["spent_usd"] for s in summaries) <= 0.1 + 1e-9
    assert sum(s["succeeded"] for s in summaries) >= 4, [s["summary"] for s in summaries]
    assert all("all batches on the ledger" in s["summary"] for s in summaries)
    stats = RedisLedger(redis_url, "cli-shared").stats()
    assert stats.spent.usd == pytest.approx(sum(s["spent_usd"] for s in summaries))
    assert stats.open_reservations == 0
    # a third batch naming the ledger with another cap is refused, naming both
    refused = journeyman(*runs[0][:-2], "--global-budget-usd", "0.5", env=env_for(fake_openai))
    assert refused.returncode == 2
    assert "ledger 'cli-shared' holds a cap of $0.1000, set by batch" in refused.stderr
    assert "asks for $0.5000" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.slow
def test_the_ledger_option_is_refused_where_it_cannot_work(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks_for(tmp_path, [task_text(0)]))
    args = batch_args(tmp_path, tasks_file)
    no_cap = journeyman(*args, "--ledger", "team", env=env_for(fake_openai))
    assert no_cap.returncode == 2 and "none is given" in no_cap.stderr
    no_ray = journeyman(
        *args, "--ledger", "team", "--global-budget-usd", "1", env=env_for(fake_openai)
    )
    assert no_ray.returncode == 2 and "needs --executor ray" in no_ray.stderr
    bad = journeyman(
        *args, "--ledger", "ftp://x", "--global-budget-usd", "1", env=env_for(fake_openai)
    )
    assert bad.returncode == 2 and "only redis:// urls" in bad.stderr
    assert fake_openai.requests == []


def test_a_redis_password_never_travels_with_a_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = RedisLedger("redis://jm:s3cret-pw@127.0.0.1:6379/0", "team")
    shipped = pickle.dumps(ledger)
    assert b"s3cret-pw" not in shipped
    assert "s3cret-pw" not in ledger.describe()
    monkeypatch.delenv("JOURNEYMAN_LEDGER_REDIS_PASSWORD", raising=False)
    assert pickle.loads(shipped).url == "redis://jm@127.0.0.1:6379/0"
    monkeypatch.setenv("JOURNEYMAN_LEDGER_REDIS_PASSWORD", "worker pw")
    assert pickle.loads(shipped).url == "redis://jm:worker%20pw@127.0.0.1:6379/0"
    with pytest.raises(ConfigurationError) as refused:
        parse_ledger("redis://jm:s3cret-pw@127.0.0.1:6379/x")
    assert "s3cret-pw" not in refused.value.message


def test_an_attempt_whose_worker_reports_is_not_counted_again_from_the_store(
    tmp_path: Path, fake_openai: FakeOpenAIServer, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker reports each call to a ledger that travels; the batch's own look at the store
    while the attempt runs sees the same calls, so it must not report them a second time."""
    monkeypatch.setattr(scheduler_module, "IN_FLIGHT_POLL_S", 0.05)

    def slow(request: RecordedRequest) -> ScriptItem:
        if any(m.get("role") == "tool" for m in request.json.get("messages", [])):
            time.sleep(0.4)
        return model(request)

    fake_openai.default = slow
    tasks = tasks_for(tmp_path, [task_text(3, out=10)])
    ledger = RedisLedger(redis_url, "reported-once")
    settings = settings_for(tmp_path, fake_openai, global_usd=1.0)
    run = Scheduler(tasks, settings, LocalExecutor(1, processes=False), ledger=ledger).run()
    summary = asyncio.run(run)
    assert summary.all_succeeded
    store = SessionStore(tmp_path / "sessions")
    try:
        stored = sum(row.cost_usd or 0.0 for row in store.usage_rows())
    finally:
        store.close()
    assert stored == pytest.approx(0.04)
    assert ledger.stats().spent.usd == pytest.approx(stored)
    assert summary.spent.usd == pytest.approx(stored)
