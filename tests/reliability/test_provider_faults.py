"""Reliability scenario 1: provider faults during whole runs (tests/support/fault_trials.py).

Through the real OpenAI SDK adapter and the resilient wrapper against the fake server: every
run completes, retries stay within the policy, and no tool runs twice after a retried call.
Stalled providers (a body dripped byte by byte, a stream of keep-alive comments, no answer, a
`Retry-After` of a day) end every call by its deadline, through both official SDKs.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from journeyman.core.errors import ProviderError
from journeyman.core.messages import Message
from journeyman.providers.anthropic import AnthropicProvider
from journeyman.providers.base import ModelRequest, Provider
from journeyman.providers.openai import OpenAIProvider
from journeyman.providers.resilient import ResilientProvider, RetryPolicy
from tests.fakes import (
    FakeAnthropicServer,
    FakeOpenAIServer,
    FakeServer,
    ScriptItem,
    drip,
    error,
    hang,
    keep_alive,
    reply,
)
from tests.support.fault_trials import FAULTS, POLICY, STEPS, fault_trial, run_fault_trials

SEED = 20261123


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("kind", sorted(FAULTS))
async def test_each_fault_on_every_step_is_survived(
    kind: str, streaming: bool, tmp_path: Path
) -> None:
    outcome = await fault_trial(tmp_path, 0, SEED, only=kind, streaming=streaming)
    assert outcome.problems == []
    assert outcome.completed
    assert outcome.injected[kind] == STEPS + 1  # the first request of every step failed
    assert outcome.retries == STEPS + 1
    assert outcome.duplicated == 0


@pytest.mark.slow
def test_random_faults_at_20_percent(tmp_path: Path) -> None:
    outcomes = run_fault_trials(tmp_path, 6, SEED)
    assert [o.problems for o in outcomes] == [[]] * 6
    assert all(o.completed and not o.crashed and not o.data_lost for o in outcomes)
    assert sum(o.duplicated for o in outcomes) == 0
    assert sum(sum(o.injected.values()) for o in outcomes) > 0
    assert max(o.max_requests_per_step for o in outcomes) <= POLICY.max_retries + 1


# --------------------------------------------------------------------------- stalled providers

STALL_DEADLINE_S = 1.0
"""How long a stalled call may take in these tests; the reads themselves allow 5 s each."""


def _stalled_provider(kind: str, server: FakeServer) -> Provider:
    if kind == "openai":
        return OpenAIProvider("gpt-test", api_key="sk-test", base_url=server.base_url, timeout=5.0)
    return AnthropicProvider(
        "claude-test", api_key="sk-ant-test", base_url=server.base_url, timeout=5.0
    )


STALLS: dict[str, tuple[ScriptItem, bool]] = {
    "drip-json": (drip(reply("a reply that takes a minute to drip"), interval_s=0.2), False),
    "drip-stream": (drip(reply("dripped stream"), interval_s=0.2), True),
    "keep-alive-stream": (keep_alive(interval_s=0.2, seconds=60), True),
    "no-answer": (hang(60), False),
}


@pytest.mark.parametrize("stall", sorted(STALLS))
@pytest.mark.parametrize("provider_kind", ["openai", "anthropic"])
async def test_a_stalled_call_ends_at_its_deadline(provider_kind: str, stall: str) -> None:
    item, streaming = STALLS[stall]
    server_class = FakeOpenAIServer if provider_kind == "openai" else FakeAnthropicServer
    with server_class(default=item) as server:
        resilient = ResilientProvider(
            [_stalled_provider(provider_kind, server)], RetryPolicy(base_delay_s=0.01)
        )
        started = time.monotonic()
        with pytest.raises(ProviderError) as caught:
            await resilient.complete(
                ModelRequest(system="", messages=(Message.user("hi"),)),
                (lambda text: None) if streaming else None,
                deadline=started + STALL_DEADLINE_S,
            )
        elapsed = time.monotonic() - started
    assert elapsed < STALL_DEADLINE_S + 10  # a bound, not a benchmark
    assert caught.value.retryable is False
    assert caught.value.details["timeout"] is True
    assert caught.value.details["deadline"] == "run"
    assert "--max-duration" in caught.value.message


async def test_the_per_call_limit_applies_without_a_run_deadline(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.default = keep_alive(interval_s=0.2, seconds=60)
    resilient = ResilientProvider(
        [_stalled_provider("openai", fake_openai)], RetryPolicy(call_timeout_s=STALL_DEADLINE_S)
    )
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        await resilient.complete(
            ModelRequest(system="", messages=(Message.user("hi"),)), lambda text: None
        )
    assert time.monotonic() - started < STALL_DEADLINE_S + 10
    assert caught.value.details["deadline"] == "call"
    assert "model_call_timeout_s" in caught.value.message


@pytest.mark.parametrize("provider_kind", ["openai", "anthropic"])
async def test_a_retry_after_past_the_deadline_ends_the_call_at_once(provider_kind: str) -> None:
    server_class = FakeOpenAIServer if provider_kind == "openai" else FakeAnthropicServer
    with server_class([error(429, retry_after=86400), reply("too late")]) as server:
        resilient = ResilientProvider([_stalled_provider(provider_kind, server)])
        started = time.monotonic()
        with pytest.raises(ProviderError) as caught:
            await resilient.complete(ModelRequest(system="", messages=(Message.user("hi"),)))
        assert time.monotonic() - started < 10
        assert len(server.requests) == 1
    assert caught.value.retryable is False
    assert caught.value.details["wait_too_long"] is True
    assert "86400 s" in caught.value.message
