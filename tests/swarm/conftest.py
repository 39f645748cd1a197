from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.support.shared_state import REDIS_MISSING, redis_server


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The url of a real redis-server started for this test session (stopped at its end)."""
    if shutil.which("redis-server") is None:
        pytest.skip(REDIS_MISSING)
    with redis_server() as url:
        yield url
