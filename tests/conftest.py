"""Shared fixtures: the fake model servers live in tests/fakes/."""

import os
from collections.abc import Iterator

import pytest

from tests.fakes.fixtures import fake_anthropic, fake_openai

__all__ = ["fake_anthropic", "fake_openai"]


@pytest.fixture(autouse=True, scope="session")
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Shadow repositories of command snapshots go to a temporary folder, not the user's cache
    (set in the environment, so `journeyman` subprocesses started by tests use it too)."""
    previous = os.environ.get("JOURNEYMAN_CACHE_DIR")
    os.environ["JOURNEYMAN_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        os.environ.pop("JOURNEYMAN_CACHE_DIR", None)
    else:
        os.environ["JOURNEYMAN_CACHE_DIR"] = previous
