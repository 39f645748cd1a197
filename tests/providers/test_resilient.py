"""The resilient wrapper's deadline: one limit around all attempts and waits of a call."""

from __future__ import annotations

import asyncio
import time

import pytest

from journeyman.core.errors import ProviderError
from journeyman.core.messages import Message
from journeyman.providers.base import Capabilities, ModelRequest, ModelResponse, TextCallback
from journeyman.providers.resilient import ResilientProvider, RetryPolicy, complete_within

REQUEST = ModelRequest(system="", messages=(Message.user("hi"),))


class Failing:
    """Fails every call with a retryable error (optionally asking for a wait), or answers."""

    def __init__(
        self,
        name: str,
        *,
        retry_after: float | None = None,
        answer: bool = False,
        status_code: int = 529,
    ):
        self.name = name
        self.status_code = status_code
        self.model = "m"
        self.capabilities = Capabilities()
        self.calls = 0
        self._retry_after = retry_after
        self._answer = answer

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        self.calls += 1
        if self._answer:
            return ModelResponse(text=f"{self.name} answered")
        details = {} if self._retry_after is None else {"retry_after": self._retry_after}
        raise ProviderError(
            "overloaded", provider=self.name, status_code=self.status_code, details=details
        )


async def test_a_backoff_past_the_deadline_ends_the_call_without_waiting() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    primary = Failing("primary")
    resilient = ResilientProvider(
        [primary], RetryPolicy(max_retries=10, base_delay_s=2.0, jitter=0), sleep=sleep
    )
    with pytest.raises(ProviderError) as caught:
        await resilient.complete(REQUEST, deadline=time.monotonic() + 3.0)
    assert slept == [2.0]  # the fake sleep takes no time; the next wait, 4 s, would pass 3 s
    assert primary.calls == 2
    assert caught.value.details["deadline"] == "run"
    assert caught.value.retryable is False


async def test_a_past_deadline_fails_before_any_request() -> None:
    primary = Failing("primary", answer=True)
    resilient = ResilientProvider([primary])
    with pytest.raises(ProviderError):
        await resilient.complete(REQUEST, deadline=time.monotonic() - 1)
    assert primary.calls == 0


async def test_the_per_call_limit_wins_when_it_is_earlier() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    resilient = ResilientProvider(
        [Failing("p")],
        RetryPolicy(max_retries=5, base_delay_s=2.0, jitter=0, call_timeout_s=3.0),
        sleep=sleep,
    )
    with pytest.raises(ProviderError) as caught:
        await resilient.complete(REQUEST, deadline=time.monotonic() + 1000)
    assert caught.value.details["deadline"] == "call"


async def test_a_long_retry_after_moves_on_to_the_fallback() -> None:
    primary = Failing("primary", retry_after=86400)
    fallback = Failing("fallback", answer=True)
    resilient = ResilientProvider([primary, fallback])
    response = await resilient.complete(REQUEST)
    assert response.text == "fallback answered"
    assert primary.calls == 1


async def test_a_short_retry_after_is_waited_for() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    resilient = ResilientProvider(
        [Failing("p", retry_after=2)], RetryPolicy(max_retries=1), sleep=sleep
    )
    with pytest.raises(ProviderError) as caught:
        await resilient.complete(REQUEST)
    assert slept == [2.0]
    assert caught.value.details["exhausted"] is True


class Slow:
    """Answers after `seconds`."""

    name = "slow"
    model = "m"
    capabilities = Capabilities()

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        await asyncio.sleep(self.seconds)
        return ModelResponse(text="late")


async def test_complete_within_bounds_any_provider() -> None:
    with pytest.raises(ProviderError) as caught:
        await complete_within(Slow(30), REQUEST, deadline=time.monotonic() + 0.05)
    assert caught.value.details == {"timeout": True, "deadline": "run", "exhausted": True}
    assert (await complete_within(Slow(0), REQUEST, deadline=None)).text == "late"


async def test_complete_within_passes_the_deadline_to_the_resilient_wrapper() -> None:
    resilient = ResilientProvider([Slow(30)], RetryPolicy(call_timeout_s=None))
    with pytest.raises(ProviderError) as caught:
        await complete_within(resilient, REQUEST, deadline=time.monotonic() + 0.05)
    assert caught.value.details["deadline"] == "run"


async def test_a_rate_limit_is_retried_unless_the_policy_says_not() -> None:
    async def sleep(_: float) -> None:
        return None

    retried = Failing("p", retry_after=3, status_code=429)
    with pytest.raises(ProviderError) as gave_up:
        await ResilientProvider([retried], RetryPolicy(max_retries=2), sleep=sleep).complete(
            REQUEST
        )
    assert retried.calls == 3 and not gave_up.value.details.get("rate_limited")

    primary = Failing("p", retry_after=3, status_code=429)
    fallback = Failing("f", answer=True)
    policy = RetryPolicy(max_retries=2, retry_rate_limits=False)
    resilient = ResilientProvider([primary, fallback], policy, sleep=sleep)
    with pytest.raises(ProviderError) as stopped:
        await resilient.complete(REQUEST)
    assert primary.calls == 1 and fallback.calls == 0  # ended at once: no retry, no fallback
    error = stopped.value
    assert error.status_code == 429 and not error.retryable and error.retry_after == 3
    assert error.details["rate_limited"] and error.details["exhausted"]

    overloaded = Failing("p")  # any other transient fault is still retried
    with pytest.raises(ProviderError):
        await ResilientProvider([overloaded], policy, sleep=sleep).complete(REQUEST)
    assert overloaded.calls == 3
