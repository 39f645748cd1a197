"""A provider that plays back a fixed list of responses (tests, demos, replays)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable

from journeyman.core.errors import AgentError, LLMError
from journeyman.providers.base import (
    Capabilities,
    ModelRequest,
    ModelResponse,
    TextCallback,
)

ScriptStep = ModelResponse | AgentError | Callable[[ModelRequest], ModelResponse]
"""A canned response, an error to raise, or a function computing the response from the request."""


PROVIDER_CHARS_PER_TOKEN = 3.0
"""Characters per token of a real tokenizer on code and prose mixed: more tokens than the
harness's own 4-characters-a-token estimate."""
MESSAGE_FRAMING_TOKENS = 6
"""Tokens a chat format adds around each message."""


def billed_prompt_tokens(request: ModelRequest) -> int:
    """The prompt tokens a hosted provider would bill for `request`, roughly and on the high
    side: for scripted replies whose usage should follow what they were sent."""
    chars = len(request.system)
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
    for message in request.messages:
        chars += len(message.content)
        for call in message.tool_calls:
            chars += len(call.name) + len(json.dumps(call.arguments, default=str))
    framing = MESSAGE_FRAMING_TOKENS * (len(request.messages) + 1)
    return math.ceil(chars / PROVIDER_CHARS_PER_TOKEN) + framing


class ScriptedProvider:
    """Returns the scripted steps in order; raises `LLMError` once the script is used up.

    `requests` keeps every request received, for assertions.
    """

    def __init__(
        self,
        script: Iterable[ScriptStep],
        *,
        model: str = "scripted",
        name: str = "scripted",
        capabilities: Capabilities | None = None,
    ) -> None:
        self.script = list(script)
        self.model_name = model
        self.provider_name = name
        self.caps = capabilities or Capabilities(context_window=1_000_000)
        self.requests: list[ModelRequest] = []
        self._position = 0

    @property
    def name(self) -> str:
        return self.provider_name

    @property
    def model(self) -> str:
        return self.model_name

    @property
    def capabilities(self) -> Capabilities:
        return self.caps

    @property
    def remaining(self) -> int:
        return len(self.script) - self._position

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        self.requests.append(request)
        if self._position >= len(self.script):
            raise LLMError(
                f"scripted provider ran out of responses after {len(self.script)}",
                retryable=False,
            )
        step = self.script[self._position]
        self._position += 1
        if isinstance(step, AgentError):
            raise step
        response = step if isinstance(step, ModelResponse) else step(request)
        if response.usage.output_tokens > request.max_output_tokens:
            # a real model stops at the reply limit it was sent, and bills no more than that
            usage = dataclasses.replace(response.usage, output_tokens=request.max_output_tokens)
            response = dataclasses.replace(response, usage=usage)
        if on_text is not None and response.text:
            on_text(response.text)
        return response
