"""The batch's rate limiter served from the batch process: workers share it over 127.0.0.1,
and only with the batch's secret."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from journeyman.batch.rate_limit_service import RateLimitService
from journeyman.core.errors import ProviderError
from journeyman.providers.rate_limit import RateLimits


@pytest.fixture
def service() -> RateLimitService:
    running = RateLimitService()
    yield running  # type: ignore[misc]
    running.close()


async def test_workers_share_one_window_and_one_pause(service: RateLimitService) -> None:
    first = pickle.loads(pickle.dumps(service.backend))  # as a TaskJob carries it to a worker
    second = pickle.loads(pickle.dumps(service.backend))
    limits = RateLimits(requests_per_minute=2)
    assert (await first.ask("k", 0, limits)).wait_s == 0
    assert (await second.ask("k", 0, limits)).wait_s == 0
    assert (await first.ask("k", 0, limits)).wait_s > 50  # the window is the batch's, not each's
    assert await second.throttled("other", 0.8) == pytest.approx(0.8, abs=0.05)
    assert 0.5 < (await first.ask("other", 0, RateLimits())).wait_s <= 0.8


async def test_a_request_without_the_batchs_secret_is_refused_and_counts_nothing(
    service: RateLimitService,
) -> None:
    stranger = dataclasses.replace(service.backend, token="guessed")
    with pytest.raises(ProviderError, match="wrong token"):
        await stranger.throttled("k", 30)
    assert service.windows.pause_left("k") == 0
    assert "token" not in repr(service.backend) and service.token not in repr(service.backend)


async def test_a_limiter_that_is_gone_is_a_clear_error() -> None:
    gone = RateLimitService()
    backend = gone.backend
    gone.close()
    with pytest.raises(ProviderError, match=r"did not answer.*batch process still running"):
        await backend.ask("k", 0, RateLimits())
