"""Backoff arithmetic of the retry policy (the retry loop itself is covered in
tests/loop/test_kernel.py)."""

from __future__ import annotations

import random

from journeyman.core.errors import LLMError, ProviderError
from journeyman.providers.resilient import RetryPolicy


def test_backoff_doubles_with_bounded_jitter_and_cap() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0, jitter=0.25)
    rng = random.Random(7)
    error = LLMError("empty")
    for attempt, base in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (6, 4.0)]:
        delay = policy.delay(attempt, error, rng)
        assert base <= delay <= base * 1.25


def test_retry_after_is_honoured_and_capped() -> None:
    policy = RetryPolicy(max_retry_after_s=10.0)
    rng = random.Random(0)
    asked = ProviderError("429", provider="p", status_code=429, details={"retry_after": 3})
    assert policy.delay(1, asked, rng) == 3.0
    greedy = ProviderError("429", provider="p", status_code=429, details={"retry_after": 900})
    assert policy.delay(1, greedy, rng) == 10.0
