"""Shared fixtures: the fake model servers live in tests/fakes/."""

from tests.fakes.fixtures import fake_anthropic, fake_openai

__all__ = ["fake_anthropic", "fake_openai"]
