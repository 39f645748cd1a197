"""Pytest fixtures that start a fake model server for one test and stop it afterwards.

Import them into a conftest.py to make them available:

    from tests.fakes.fixtures import fake_anthropic, fake_openai  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .anthropic_server import FakeAnthropicServer
from .openai_server import FakeOpenAIServer


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    """A running `FakeAnthropicServer` with an empty script."""
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A running `FakeOpenAIServer` with an empty script."""
    with FakeOpenAIServer() as server:
        yield server
