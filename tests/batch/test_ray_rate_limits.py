"""The rate limiter on a Ray cluster: one named actor that every batch on the cluster shares."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from journeyman.batch.ray_rate_limits import ACTOR_NAME, NAMESPACE, shared_backend
from journeyman.providers.rate_limit import RateLimits
from tests.support.cli import clean_env
from tests.support.ray_cluster import RAY_ENV, LocalRayCluster, ray_environment

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    with LocalRayCluster(clean_env()) as running, ray_environment():
        ray.init(address=running.address, log_to_driver=False, include_dashboard=False)
        try:
            yield running
        finally:
            ray.kill(ray.get_actor(ACTOR_NAME, namespace=NAMESPACE))
            ray.shutdown()


async def test_two_drivers_on_one_cluster_share_one_limiter(cluster: LocalRayCluster) -> None:
    # another batch process on the same cluster: its own Ray job, the same named actor
    other_batch = textwrap.dedent(
        f"""
        import asyncio, ray
        from journeyman.batch.ray_rate_limits import shared_backend
        from journeyman.providers.rate_limit import RateLimits
        ray.init(address={cluster.address!r}, log_to_driver=False, include_dashboard=False)
        backend = shared_backend()
        limits = RateLimits(requests_per_minute=3)
        admitted = [asyncio.run(backend.ask("openai|u|key:x", 0, limits)).wait_s for _ in range(2)]
        print(admitted, asyncio.run(backend.throttled("openai|u|key:y", 30.0)))
        """
    )
    env = clean_env(**RAY_ENV, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", other_batch], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("[0.0, 0.0]")
    ours = shared_backend()
    limits = RateLimits(requests_per_minute=3)
    assert (await ours.ask("openai|u|key:x", 0, limits)).wait_s == 0  # its third of three
    assert (await ours.ask("openai|u|key:x", 0, limits)).wait_s > 50  # the window is shared
    assert 20 < (await ours.ask("openai|u|key:y", 0, RateLimits())).wait_s <= 30  # so is its pause
