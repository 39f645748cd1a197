"""Provider-neutral conversation records: messages, tool calls, tool results and token usage."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True)
class ToolCall:
    """A request by the model to run one tool with JSON arguments."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=data["id"], name=data["name"], arguments=dict(data.get("arguments") or {}))


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned for one call; `is_error` results are shown to the model as failures."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    terminate: bool = False
    """True when this result ends the run (the `finish` tool)."""
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "content": self.content,
            "is_error": self.is_error,
            "terminate": self.terminate,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        return cls(
            call_id=data["call_id"],
            name=data["name"],
            content=data["content"],
            is_error=bool(data.get("is_error", False)),
            terminate=bool(data.get("terminate", False)),
            metadata=dict(data.get("metadata") or {}),
        )


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description and the JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One entry of the conversation as the model sees it.

    Assistant messages may carry tool calls; tool messages carry exactly one tool result.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_result: ToolResult | None = None

    @cached_property
    def approx_chars(self) -> int:
        """Characters this message adds to a prompt: text, tool calls and a little framing.

        Computed once per message (messages are immutable), so sizing a long history each
        turn costs a sum, not a serialisation of every tool call's arguments.
        """
        chars = len(self.content) + 16
        for call in self.tool_calls:
            chars += len(call.name) + len(json.dumps(call.arguments, default=str)) + 16
        return chars

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(Role.USER, text)

    @classmethod
    def assistant(
        cls, text: str, tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()
    ) -> Message:
        return cls(Role.ASSISTANT, text, tuple(tool_calls))

    @classmethod
    def tool(cls, result: ToolResult) -> Message:
        return cls(Role.TOOL, result.content, tool_result=result)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_result is not None:
            data["tool_result"] = self.tool_result.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        result = data.get("tool_result")
        return cls(
            role=Role(data["role"]),
            content=data.get("content", ""),
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls", ())),
            tool_result=ToolResult.from_dict(result) if result else None,
        )


def repair_missing_tool_results(messages: Sequence[Message]) -> list[Message]:
    """`messages` with an error result added for every abandoned tool call.

    Providers reject a history in which an assistant's tool call is not answered by a tool
    message with its id before the next non-tool message; histories stored by earlier versions
    (a crash, or a malformed call beside valid ones) can hold such calls. The added results go
    right after the results that call's assistant message already has, in call order. The calls
    of the history's last assistant message, when only tool results follow it, are left as
    they are: they are pending, and a resume runs them."""
    repaired: list[Message] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        repaired.append(message)
        index += 1
        if message.role is not Role.ASSISTANT or not message.tool_calls:
            continue
        answered: set[str] = set()
        while index < len(messages) and messages[index].role is Role.TOOL:
            result = messages[index].tool_result
            if result is not None:
                answered.add(result.call_id)
            repaired.append(messages[index])
            index += 1
        if index == len(messages):
            break  # the pending turn
        for call in message.tool_calls:
            if call.id not in answered:
                repaired.append(Message.tool(_not_run(call)))
    return repaired


def _not_run(call: ToolCall) -> ToolResult:
    return ToolResult(
        call.id,
        call.name,
        f"not run: no result was recorded for this {call.name} call (the run stopped before "
        "it, or another call of the same turn was malformed); call it again if it is still "
        "needed",
        is_error=True,
    )


@dataclass(frozen=True)
class Usage:
    """Token counts of one or more model calls."""

    input_tokens: int = 0
    """Prompt tokens that were neither read from nor written to the prompt cache."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        return self.total_input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(**{k: int(data.get(k, 0)) for k in cls().to_dict()})
