"""What the batch tests share: a fake model that plays each task's part from the task text,
tasks files, and a scheduler on the fake OpenAI server."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from pathlib import Path
from typing import Any

from journeyman.batch.executor import LocalExecutor
from journeyman.batch.scheduler import BatchSettings, Scheduler
from journeyman.batch.task_file import BatchTask
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, Reply, ScriptItem, error, reply

PRICE = (0.0, 1000.0)
"""USD per million input and output tokens: only replies cost, $0.001 a token."""
PLAN = re.compile(r"\[steps=(\d+) out=(\d+)(?: fail=(\w+))?(?: r429=(\d+))?\]")


def task_text(steps: int = 1, out: int = 7, *, fail: bool = False, name: str = "") -> str:
    """A task the fake model works through: `steps` file writes then finish (or, with `fail`,
    a text answer while a failing check waits), each reply costing `out` output tokens."""
    flag = " fail=yes" if fail else ""
    return f"{name} do the thing [steps={steps} out={out}{flag}]".strip()


def model(request: RecordedRequest) -> ScriptItem:
    """Replies from the plan in the task text and the number of tool results so far."""
    body = request.json
    messages = body.get("messages", [])
    first_user = next((m for m in messages if m.get("role") == "user"), {})
    content = first_user.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    match = PLAN.search(text)
    steps, out = (int(match.group(1)), int(match.group(2))) if match else (0, 7)
    done = sum(1 for m in messages if m.get("role") == "tool")
    # like a real server, never more output than the request allows
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(limit, int):
        out = min(out, limit)
    if done < steps:
        call = ("write_file", {"path": f"step{done + 1}.txt", "content": f"step {done + 1}\n"})
        return reply(tool_calls=[call], output_tokens=out)
    return reply(tool_calls=[("finish", {"summary": "done"})], output_tokens=out)


class RateLimitOnce:
    """429 for the first `count` requests, then the model."""

    def __init__(self, count: int, retry_after: float = 0.05) -> None:
        self.left = count
        self.retry_after = retry_after
        self._lock = threading.Lock()  # the server answers each request in its own thread

    def __call__(self, request: RecordedRequest) -> Reply | Any:
        with self._lock:
            limited = self.left > 0
            self.left -= limited
        if limited:
            return error(429, retry_after=self.retry_after)
        return model(request)


class RateLimitEvery:
    """A 429 (Retry-After `retry_after` s) for every `every`-th request (9: 11 %), else the
    model; keeps when each request arrived and when each 429 went out."""

    def __init__(self, every: int, retry_after: float = 0.5) -> None:
        self.every = every
        self.retry_after = retry_after
        self.arrivals: list[float] = []
        self.limited_at: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply | Any:
        with self._lock:
            now = time.monotonic()
            self.arrivals.append(now)
            limited = len(self.arrivals) % self.every == 0
            if limited:
                self.limited_at.append(now)
        if limited:
            return error(429, retry_after=self.retry_after)
        return model(request)

    def sent_during_pauses(self, grace_s: float = 0.1) -> list[float]:
        """Requests that arrived inside a 429's Retry-After window, past `grace_s` after it
        (calls already on their way when the 429 went out may arrive in that grace)."""
        return [
            t
            for t in self.arrivals
            for limited in self.limited_at
            if limited + grace_s < t < limited + self.retry_after
        ]


def tasks_for(tmp_path: Path, texts: list[str], *, verify: str | None = None) -> list[BatchTask]:
    source = tmp_path / "project"
    source.mkdir(exist_ok=True)
    (source / "README.md").write_text("a project\n")
    return [
        BatchTask(id=f"task-{i}", task=text, workspace=str(source), verify=verify)
        for i, text in enumerate(texts, start=1)
    ]


def write_tasks_file(path: Path, tasks: list[BatchTask]) -> Path:
    path.write_text("".join(t.model_dump_json(exclude_defaults=True) + "\n" for t in tasks))
    return path


def settings_for(tmp_path: Path, server: FakeOpenAIServer, **fields: Any) -> BatchSettings:
    config = {"price_per_mtok": PRICE, "verify": False, "sandbox": "local"}
    config.update(fields.pop("config", {}))
    return BatchSettings(
        batch_id=fields.pop("batch_id", "batch-test"),
        out=tmp_path / "out",
        store_path=tmp_path / "sessions",
        model="gpt-4.1-mini",
        provider="openai",
        base_url=server.base_url,
        config=config,
        rate_limit_backoff_s=fields.pop("rate_limit_backoff_s", 0.05),
        **fields,
    )


def scheduler(
    tasks: list[BatchTask], settings: BatchSettings, parallel: int = 2, **kwargs: Any
) -> Scheduler:
    return Scheduler(tasks, settings, LocalExecutor(parallel, processes=False), **kwargs)


def random_batch(
    rng: random.Random, tmp_path: Path, server: FakeOpenAIServer, index: int
) -> tuple[list[BatchTask], BatchSettings, int]:
    """A random batch: 1-8 tasks of 0-5 steps at 5-120 output tokens a reply, a random global
    cap, per-task budgets or fair shares, 1-4 in parallel."""
    root = tmp_path / f"b{index}"
    root.mkdir()
    texts = [
        task_text(rng.randint(0, 5), rng.randint(5, 120), name=f"b{index}t{i}")
        for i in range(rng.randint(1, 8))
    ]
    tasks = tasks_for(root, texts)
    global_usd = round(rng.uniform(0.05, 1.5), 4)
    per_task = round(rng.uniform(0.08, 0.6), 4) if rng.random() < 0.5 else None
    settings = settings_for(
        root, server, batch_id=f"batch-r{index}", global_usd=global_usd, per_task_usd=per_task
    )
    return tasks, settings, rng.randint(1, 4)


def ledger_driver(url: str, name: str, seed: int, rounds: int, start_at: float) -> list[float]:
    """One driver process on a Redis ledger: from `start_at` (wall clock, so that several
    start together), reserve, spend part or all of each grant, settle; what it spent, and how
    many reservations were refused, as [usd, refused]."""
    import time as clock

    from journeyman.batch.ledgers import RedisLedger
    from journeyman.economics.ledger import AllocationRefused, Amount

    ledger = RedisLedger(url, name)
    rng = random.Random(seed)
    spent, refused = 0.0, 0
    clock.sleep(max(0.0, start_at - clock.time()))
    for turn in range(rounds):
        try:
            held = ledger.reserve(f"d{seed}", f"t{turn}", Amount(None, rng.uniform(0.01, 0.3)))
        except AllocationRefused:
            refused += 1
            continue
        granted = held.granted.usd or 0.0
        used = granted if rng.random() < 0.3 else rng.uniform(0.0, granted)
        if rng.random() < 0.5:
            ledger.report(held, Amount(None, used / 2))
        ledger.settle(held, Amount(None, used))
        spent += used
    return [spent, float(refused)]


def take_the_last_dollar(url: str, name: str, start_at: float) -> bool:
    """Try to reserve the whole of a $1 ledger at `start_at`; whether it was granted."""
    import time as clock

    from journeyman.batch.ledgers import RedisLedger
    from journeyman.economics.ledger import AllocationRefused, Amount

    ledger = RedisLedger(url, name)
    clock.sleep(max(0.0, start_at - clock.time()))
    try:
        ledger.reserve("racer", "last", Amount(None, 1.0))
    except AllocationRefused:
        return False
    return True
