"""`create_provider` from "provider:model" specs, run against the fake servers."""

from __future__ import annotations

import pytest
from tests.fakes import FakeAnthropicServer, FakeOpenAIServer, reply

import journeyman
from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message
from journeyman.providers.anthropic import AnthropicProvider
from journeyman.providers.base import ModelRequest
from journeyman.providers.factory import create_provider, parse_spec
from journeyman.providers.openai import OpenAIProvider

REQUEST = ModelRequest(system="", messages=(Message.user("hi"),))


def test_it_is_part_of_the_public_api() -> None:
    assert journeyman.create_provider is create_provider
    assert "create_provider" in journeyman.__all__


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("anthropic:claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5")),
        ("openai:qwen2.5:7b", ("openai", "qwen2.5:7b")),
        (" OpenAI : gpt-5-mini ", ("openai", "gpt-5-mini")),
        ("anthropic", ("anthropic", None)),
        ("openai:", ("openai", None)),
    ],
)
def test_specs(spec: str, expected: tuple[str, str | None]) -> None:
    assert parse_spec(spec) == expected


async def test_openai_spec_with_base_url_and_key(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(reply("hello"))
    provider = create_provider(
        "openai:gpt-5-mini", base_url=fake_openai.base_url, api_key="sk-given", env={}
    )
    assert isinstance(provider, OpenAIProvider)
    assert (await provider.complete(REQUEST)).text == "hello"
    sent = fake_openai.last_request
    assert sent.json["model"] == "gpt-5-mini"
    assert sent.headers["authorization"] == "Bearer sk-given"


async def test_anthropic_spec_with_key_from_the_environment(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(reply("hello"))
    env = {"ANTHROPIC_API_KEY": "sk-ant-env", "ANTHROPIC_BASE_URL": fake_anthropic.base_url}
    provider = create_provider("anthropic:claude-test", env=env)
    assert isinstance(provider, AnthropicProvider)
    assert (await provider.complete(REQUEST)).text == "hello"
    sent = fake_anthropic.last_request
    assert sent.json["model"] == "claude-test"
    assert sent.headers["authorization"] == "Bearer sk-ant-env"


async def test_an_explicit_key_wins_over_the_environment(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(reply("hello"))
    provider = create_provider(
        "anthropic:claude-test",
        base_url=fake_anthropic.base_url,
        api_key="sk-ant-given",
        env={"ANTHROPIC_API_KEY": "sk-ant-env"},
    )
    await provider.complete(REQUEST)
    assert fake_anthropic.last_request.headers["authorization"] == "Bearer sk-ant-given"


def test_a_missing_key_says_what_to_set() -> None:
    with pytest.raises(ConfigurationError) as caught:
        create_provider("anthropic:claude-sonnet-4-5", env={})
    assert "ANTHROPIC_API_KEY" in caught.value.message and "api_key" in caught.value.message
    with pytest.raises(ConfigurationError) as caught:
        create_provider("openai:gpt-5-mini", env={})
    assert "OPENAI_API_KEY" in caught.value.message and "base_url" in caught.value.message


def test_an_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as caught:
        create_provider("gemini:pro", env={"OPENAI_API_KEY": "k"})
    message = caught.value.message
    assert "'gemini'" in message and "anthropic" in message and "openai" in message
    assert "provider:model" in message


def test_a_model_given_twice_must_agree() -> None:
    env = {"OPENAI_API_KEY": "k"}
    with pytest.raises(ConfigurationError, match="given twice"):
        create_provider("openai:gpt-5-mini", "gpt-4.1", env=env)
    assert create_provider("openai:gpt-5-mini", "gpt-5-mini", env=env).model == "gpt-5-mini"
