"""A reply that carries no usage (or no prompt count) is marked, on both adapters and both
transports, so the loop charges it the worst case instead of nothing."""

from __future__ import annotations

from typing import Any

import pytest
from tests.fakes import FakeAnthropicServer, FakeOpenAIServer, reply

from journeyman.core.messages import Message
from journeyman.providers.anthropic import AnthropicProvider
from journeyman.providers.base import ModelRequest, Provider
from journeyman.providers.openai import OpenAIProvider

REQUEST = ModelRequest(system="Be brief.", messages=(Message.user("hi"),))


async def answer(provider: Provider, stream: bool) -> Any:
    on_text = (lambda _text: None) if stream else None
    return await provider.complete(REQUEST, on_text)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("omit", [False, True], ids=["usage", "no-usage"])
async def test_openai_marks_a_reply_without_usage(
    fake_openai: FakeOpenAIServer, stream: bool, omit: bool
) -> None:
    fake_openai.enqueue(reply("hello", omit_usage=omit))
    provider = OpenAIProvider("gpt-test", api_key="sk-test", base_url=fake_openai.base_url)
    response = await answer(provider, stream)
    assert response.text == "hello"
    assert response.usage_missing is omit
    assert (response.usage.input_tokens == 12) is not omit


async def test_openai_marks_a_reply_that_counts_no_prompt(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(reply("hello", input_tokens=0, output_tokens=0))  # a proxy's zeros
    provider = OpenAIProvider("gpt-test", api_key="sk-test", base_url=fake_openai.base_url)
    assert (await answer(provider, False)).usage_missing


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("omit", [False, True], ids=["usage", "no-usage"])
async def test_anthropic_marks_a_reply_without_usage(
    fake_anthropic: FakeAnthropicServer, stream: bool, omit: bool
) -> None:
    fake_anthropic.enqueue(reply("hello", omit_usage=omit))
    provider = AnthropicProvider(
        "claude-test", api_key="sk-ant-test", base_url=fake_anthropic.base_url, timeout=5
    )
    response = await answer(provider, stream)
    assert response.text == "hello"
    assert response.usage_missing is omit
    assert (response.usage.input_tokens == 12) is not omit
