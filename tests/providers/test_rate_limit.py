"""The shared rate limiter: its windows and pauses, and calls through it to the fake OpenAI
server (the real adapter and SDK), where a 429 pauses every call of the key."""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, error, reply

from journeyman.core.errors import ProviderError
from journeyman.core.messages import Message
from journeyman.providers.base import ModelRequest
from journeyman.providers.openai import OpenAIProvider
from journeyman.providers.rate_limit import (
    InProcessBackend,
    RateLimiter,
    RateLimits,
    RateWindows,
    limit_key,
    request_tokens,
)
from journeyman.providers.resilient import ResilientProvider, RetryPolicy

REQUEST = ModelRequest(system="be brief", messages=(Message.user("hi"),), max_output_tokens=100)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_key_names_provider_and_url_and_never_holds_the_api_key() -> None:
    key = limit_key("openai", "https://api.example.com/v1/", "sk-secret-123")
    assert key.startswith("openai|https://api.example.com/v1|key:")
    assert "sk-secret" not in key
    assert key != limit_key("openai", "https://api.example.com/v1", "sk-other")
    assert key != limit_key("openai", "https://other.example.com/v1", "sk-secret-123")


def test_requests_per_minute_hold_over_any_sixty_seconds() -> None:
    clock = Clock()
    windows = RateWindows(clock)
    limits = RateLimits(requests_per_minute=2)
    assert windows.ask("k", 0, limits).wait_s == 0
    clock.now += 10
    assert windows.ask("k", 0, limits).wait_s == 0
    assert windows.ask("k", 0, limits).wait_s == pytest.approx(50)  # the first leaves at 60
    assert windows.ask("other", 0, limits).wait_s == 0  # another key has its own window
    clock.now += 50
    assert windows.ask("k", 0, limits).wait_s == 0
    assert windows.ask("k", 0, limits).wait_s == pytest.approx(10)


def test_tokens_per_minute_count_the_estimate_until_the_reply_settles_it() -> None:
    clock = Clock()
    windows = RateWindows(clock)
    limits = RateLimits(tokens_per_minute=1000)
    first = windows.ask("k", 800, limits)
    assert first.wait_s == 0
    assert windows.ask("k", 300, limits).wait_s == pytest.approx(60)
    windows.settle("k", first.permit, 200)  # the reply used less than its bound
    assert windows.ask("k", 300, limits).wait_s == 0
    clock.now += 61
    assert windows.ask("k", 5000, limits).wait_s == 0  # larger than the limit: alone


def test_a_retry_after_pauses_the_key_exactly_that_long() -> None:
    clock = Clock()
    windows = RateWindows(clock)
    assert windows.throttled("k", 0.5) == pytest.approx(0.5)
    assert windows.ask("k", 0, RateLimits()).wait_s == pytest.approx(0.5)
    clock.now += 0.5
    assert windows.ask("k", 0, RateLimits()).wait_s == 0


def test_without_retry_after_the_pause_doubles_once_per_429_burst_then_calms() -> None:
    clock = Clock()
    windows = RateWindows(clock)
    assert windows.throttled("k", None) == 1.0
    assert windows.throttled("k", None) == 1.0  # sent before the pause: the same burst
    clock.now += 1.0
    assert windows.throttled("k", None) == 2.0
    clock.now += 2.0 + 61
    assert windows.throttled("k", None) == 1.0  # a quiet minute: from the start again


def test_the_token_estimate_covers_prompt_and_output_limit() -> None:
    assert request_tokens(REQUEST) > 100
    longer = ModelRequest(system="x" * 4000, messages=REQUEST.messages, max_output_tokens=100)
    assert request_tokens(longer) >= request_tokens(REQUEST) + 990


class Served:
    """The fake's model: a 429 (with `retry_after`) for the requests `limit` picks, else a
    reply; records when each request arrived and when each 429 went out."""

    def __init__(self, limit: Callable[[int], bool], **retry: object) -> None:
        self.limit = limit
        self.retry = retry
        self.arrivals: list[float] = []
        self.limited_at: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        with self._lock:
            now = time.monotonic()
            self.arrivals.append(now)
            if self.limit(len(self.arrivals)):
                self.limited_at.append(now)
                return error(429, **self.retry)  # type: ignore[arg-type]
        return reply(text="ok")


def _provider(server: FakeOpenAIServer, key: str = "sk-test") -> OpenAIProvider:
    return OpenAIProvider("gpt-4.1-mini", api_key=key, base_url=server.base_url)


def _quiet(arrivals: list[float], start: float, end: float) -> list[float]:
    return [t for t in arrivals if start < t < end]


async def test_a_429_pauses_every_call_of_the_key_for_its_retry_after(
    fake_openai: FakeOpenAIServer,
) -> None:
    served = Served(lambda n: n == 3, retry_after=0.6)
    fake_openai.default = served
    limiter = RateLimiter(InProcessBackend())
    callers = [
        ResilientProvider([_provider(fake_openai)], RetryPolicy(rate_limiter=limiter))
        for _ in range(4)
    ]

    async def calls(provider: ResilientProvider) -> None:
        for _ in range(4):
            await provider.complete(REQUEST)

    await asyncio.gather(*(calls(p) for p in callers))  # 16 calls, none fails
    assert len(served.limited_at) == 1 and len(served.arrivals) == 17
    limited = served.limited_at[0]
    # calls already on their way may arrive just after the 429; none is sent during the pause
    assert not _quiet(served.arrivals, limited + 0.2, limited + 0.6)
    assert max(served.arrivals) >= limited + 0.6


async def test_retry_after_ms_and_an_http_date_are_honoured(fake_openai: FakeOpenAIServer) -> None:
    served = Served(lambda n: n == 1, retry_after_ms=400)
    fake_openai.default = served
    policy = RetryPolicy(rate_limiter=RateLimiter(InProcessBackend()))
    await ResilientProvider([_provider(fake_openai)], policy).complete(REQUEST)
    assert served.arrivals[1] - served.arrivals[0] >= 0.4

    date = email.utils.formatdate(time.time() + 2, usegmt=True)  # whole seconds: 1-2 s away
    dated = Served(lambda n: n == 1, retry_after=date)
    fake_openai.default = dated
    policy = RetryPolicy(rate_limiter=RateLimiter(InProcessBackend()))
    await ResilientProvider([_provider(fake_openai)], policy).complete(REQUEST)
    assert 0.9 <= dated.arrivals[1] - dated.arrivals[0] < 2.5


async def test_429_waits_do_not_use_up_the_retries(fake_openai: FakeOpenAIServer) -> None:
    served = Served(lambda n: n <= 6, retry_after=0.01)
    fake_openai.default = served
    policy = RetryPolicy(max_retries=1, rate_limiter=RateLimiter(InProcessBackend()))
    response = await ResilientProvider([_provider(fake_openai)], policy).complete(REQUEST)
    assert response.text == "ok" and len(served.arrivals) == 7


async def test_a_pause_past_the_calls_deadline_ends_it_marked_rate_limited(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.default = Served(lambda n: True, retry_after=30)
    policy = RetryPolicy(call_timeout_s=2, rate_limiter=RateLimiter(InProcessBackend()))
    started = time.monotonic()
    with pytest.raises(ProviderError) as raised:
        await ResilientProvider([_provider(fake_openai)], policy).complete(REQUEST)
    assert time.monotonic() - started < 1.5  # it did not sit out the pause
    assert raised.value.details["rate_limited"] and raised.value.details["retry_after"] > 25
    assert "not waiting" in raised.value.message


async def test_requests_per_minute_hold_calls_back_across_providers(
    fake_openai: FakeOpenAIServer,
) -> None:
    served = Served(lambda n: False)
    fake_openai.default = served
    backend = InProcessBackend()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        raise asyncio.CancelledError  # the third call would wait: stop there

    limiter = RateLimiter(backend, RateLimits(requests_per_minute=2), sleep=sleep)
    policy = RetryPolicy(rate_limiter=limiter)
    await ResilientProvider([_provider(fake_openai)], policy).complete(REQUEST)
    await ResilientProvider([_provider(fake_openai)], policy).complete(REQUEST)
    with pytest.raises(asyncio.CancelledError):
        await ResilientProvider([_provider(fake_openai)], policy).complete(REQUEST)
    assert len(served.arrivals) == 2 and slept and 59 < slept[0] <= 60
    # another API key is another account: its calls are not held
    other = ResilientProvider([_provider(fake_openai, key="sk-other")], policy)
    await other.complete(REQUEST)
    assert len(served.arrivals) == 3


def test_an_agent_whose_config_sets_a_limit_calls_through_the_process_limiter(
    tmp_path: Path,
) -> None:
    from journeyman.loop.agent import Agent
    from journeyman.loop.config import AgentConfig
    from journeyman.providers.scripted import ScriptedProvider

    config = AgentConfig(requests_per_minute=30, session_dir=tmp_path / "sessions")
    limited = Agent(ScriptedProvider([]), workspace=tmp_path, config=config)
    limiter = limited.provider.policy.rate_limiter
    assert limiter is not None and limiter.limits == RateLimits(30, None)
    unlimited = AgentConfig(session_dir=tmp_path / "sessions")
    plain = Agent(ScriptedProvider([]), workspace=tmp_path, config=unlimited)
    assert plain.provider.policy.rate_limiter is None
