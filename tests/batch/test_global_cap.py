"""The global cap over many random batches: real runs (threads) on the fake OpenAI server,
whose replies cost what their output tokens say and never exceed the request's limit."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from journeyman.batch.job import session_spending
from journeyman.session.store import SessionStore
from tests.batch.support import model, random_batch, scheduler
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("JOURNEYMAN_EDIT_TOOL", "edit_file")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def run_random_batches(tmp_path: Path, server: FakeOpenAIServer, count: int, seed: int) -> None:
    server.default = model
    rng = random.Random(seed)
    for index in range(count):
        tasks, settings, parallel = random_batch(rng, tmp_path, server, index)
        summary = asyncio.run(scheduler(tasks, settings, parallel).run())
        cap = settings.global_usd
        assert cap is not None and summary.spent.usd is not None
        assert summary.spent.usd <= cap + 1e-9, (index, summary.line())
        assert summary.overspend.usd == 0, (index, summary.line())
        store = SessionStore(settings.store_path)
        stored = sum(
            session_spending(store, r.session_id).usd for r in summary.results if r.session_id
        )
        store.close()
        assert stored == pytest.approx(summary.spent.usd), index  # the ledger saw every call
        assert len(summary.results) == len(tasks)


def test_spend_stays_under_the_cap_in_random_batches(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    run_random_batches(tmp_path, fake_openai, count=6, seed=14)


@pytest.mark.slow
def test_spend_stays_under_the_cap_in_100_random_batches(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    run_random_batches(tmp_path, fake_openai, count=100, seed=1400)
