"""The shared rate limiter on a Ray cluster: the windows and pauses of every provider key in
one named actor (`journeyman-rate-limits` in the `journeyman` namespace), which every batch
and eval on the cluster finds by its name, so two batches on one key share one limit.

The actor is detached: it outlives the batch that started it (the next batch finds it, with
the pauses still in force) and holds no secret, only keys' fingerprints (`limit_key`). Remove
it with `ray.kill(ray.get_actor("journeyman-rate-limits", namespace="journeyman"))`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray

from journeyman.core.errors import ProviderError
from journeyman.providers.rate_limit import Admission, RateLimits, RateWindows

ACTOR_NAME = "journeyman-rate-limits"
NAMESPACE = "journeyman"


class _RateLimitActor:
    """`RateWindows` hosted by a Ray actor (its clock is its node's; waits travel as seconds)."""

    def __init__(self) -> None:
        self._windows = RateWindows()

    def ask(self, key: str, tokens: int, rpm: int | None, tpm: int | None) -> tuple[float, int]:
        admission = self._windows.ask(key, tokens, RateLimits(rpm, tpm))
        return admission.wait_s, admission.permit

    def settle(self, key: str, permit: int, tokens: int) -> None:
        self._windows.settle(key, permit, tokens)

    def throttled(self, key: str, retry_after_s: float | None) -> float:
        return self._windows.throttled(key, retry_after_s)


@dataclass(frozen=True)
class RayBackend:
    """A worker's way to the cluster's rate-limit actor (it pickles with its handle)."""

    actor: Any

    async def ask(self, key: str, tokens: int, limits: RateLimits) -> Admission:
        ref = self.actor.ask.remote(
            key, tokens, limits.requests_per_minute, limits.tokens_per_minute
        )
        wait, permit = await _answer(ref)
        return Admission(float(wait), int(permit))

    async def settle(self, key: str, permit: int, tokens: int) -> None:
        await _answer(self.actor.settle.remote(key, permit, tokens))

    async def throttled(self, key: str, retry_after_s: float | None) -> float:
        return float(await _answer(self.actor.throttled.remote(key, retry_after_s)))


async def _answer(ref: Any) -> Any:
    try:
        return await ref
    except ray.exceptions.RayError as error:
        raise ProviderError(
            f"the cluster's rate limiter (Ray actor {ACTOR_NAME}) did not answer: {error}",
            provider="rate-limiter",
            retryable=True,  # an infrastructure fault: the task resumes, never "failed"
        ) from None


def shared_backend() -> RayBackend:
    """The cluster's rate-limit actor, started when no batch has started it yet."""
    actor = (
        ray.remote(_RateLimitActor)
        .options(
            name=ACTOR_NAME,
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,  # never takes a task's slot
            max_restarts=-1,  # a restarted one has forgotten the windows: a fresh minute
        )
        .remote()
    )
    return RayBackend(actor)


__all__ = ["ACTOR_NAME", "NAMESPACE", "RayBackend", "shared_backend"]
