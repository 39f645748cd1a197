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


def test_cpus_per_task_reaches_the_ray_executor_and_is_refused_where_it_means_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from journeyman.batch import executor, ray_executor

    made: list[tuple[object, ...]] = []

    class Recorder:
        def __init__(self, address: str | None, max_parallel: int, **options: object) -> None:
            made.append((address, max_parallel, options))

    monkeypatch.setattr(ray_executor, "RayExecutor", Recorder)
    executor.make_executor("ray", max_parallel=3, cpus_per_task=0.5)
    executor.make_executor("ray", max_parallel=3)
    assert made == [(None, 3, {"cpus_per_task": 0.5}), (None, 3, {"cpus_per_task": 1.0})]
    with pytest.raises(ConfigurationError, match="--cpus-per-task goes with --executor ray"):
        executor.make_executor("local", max_parallel=2, cpus_per_task=2)
    with pytest.raises(ConfigurationError, match="--cpus-per-task must be more than 0"):
        executor.make_executor("ray", max_parallel=2, cpus_per_task=0)
    assert len(made) == 2


def test_cpus_per_task_is_an_option_of_batch_and_eval() -> None:
    from tests.support.cli import clean_env, journeyman

    for command in ("batch", "eval"):
        shown = journeyman(command, "--help", env=clean_env(COLUMNS="200"))
        assert "--cpus-per-task" in shown.stdout and "--executor ray" in shown.stdout
