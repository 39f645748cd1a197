"""The scripted swarm team of `swarm.py`, answering through `FakeAnthropicServer`."""

from __future__ import annotations

from collections.abc import Callable

from .script import RecordedRequest, Reply, reply
from .swarm import SwarmModel


def anthropic_system_of(request: RecordedRequest) -> str:
    """The system prompt of a Messages API request, its text blocks joined."""
    system = request.json.get("system") or ""
    if isinstance(system, str):
        return system
    return "".join(str(block.get("text") or "") for block in system)


def anthropic_reply(model: SwarmModel) -> Callable[[RecordedRequest], Reply]:
    """A script item for `FakeAnthropicServer.default` answering every request from `model`."""

    def answer(request: RecordedRequest) -> Reply:
        messages = request.json.get("messages", [])
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        step = model.step(anthropic_system_of(request), turns)
        return reply(step.text, tool_calls=step.calls)

    return answer
