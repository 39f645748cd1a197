"""The Ray executor refuses what cannot work before it starts anything."""

from __future__ import annotations

import socket

import pytest

from journeyman.batch.ray_executor import RayExecutor
from journeyman.core.errors import ConfigurationError


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_address_nothing_listens_on_is_refused_at_once_with_what_to_check() -> None:
    address = f"127.0.0.1:{closed_port()}"
    with pytest.raises(ConfigurationError) as refused:
        RayExecutor(address, max_parallel=2)
    assert address in refused.value.message and "--ray-address" in refused.value.message


def test_a_parallelism_below_one_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="--max-parallel must be at least 1"):
        RayExecutor(None, max_parallel=0)
