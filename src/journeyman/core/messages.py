"""Provider-neutral conversation records: messages, tool calls, tool results and token usage."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
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
    invalid: str | None = None
    """Why the call could not be used (e.g. its arguments were not a JSON object); such a call
    is never run and gets an error result saying this."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.invalid is not None:
            data["invalid"] = self.invalid
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        invalid = data.get("invalid")
        return cls(
            id=data["id"],
            name=data["name"],
            arguments=dict(data.get("arguments") or {}),
            invalid=None if invalid is None else str(invalid),
        )


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

    @cached_property
    def token_ceiling(self) -> int:
        """The most tokens this definition can take in a prompt: its name and description at
        one token a UTF-8 byte, its schema as JSON (ASCII, one token a byte) and the framing.
        Computed once (specs are not changed after they are made): every call is bounded."""
        schema = json.dumps(self.parameters, default=str)
        return text_token_ceiling(self.name + self.description) + len(schema) + FRAMING_TOKENS


FRAMING_TOKENS = 32
"""Tokens a chat format may add around one message, tool call or tool definition (roles,
separators, the adapters' own words such as "The tool reported an error:")."""


def text_token_ceiling(text: str) -> int:
    """The most tokens `text` can become: its UTF-8 bytes (every token of a byte-level
    tokenizer covers at least one byte)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", errors="surrogatepass"))


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

    @cached_property
    def token_ceiling(self) -> int:
        """The most tokens any tokenizer can make of this message in a prompt: one a byte of
        its UTF-8 text (a byte-level tokenizer never does worse; CJK and emoji take 3-4 bytes a
        character), its tool calls as JSON, their ids, and the framing a chat format adds.

        Unlike `approx_chars` (an estimate), this is a bound: what a model call may be
        charged for before the provider reports the real count."""
        tokens = text_token_ceiling(self.content) + FRAMING_TOKENS
        for call in self.tool_calls:
            arguments = json.dumps(call.arguments, default=str)  # ASCII: escapes cost more
            tokens += len(arguments) + text_token_ceiling(call.id + call.name) + FRAMING_TOKENS
        if self.tool_result is not None:
            result = self.tool_result
            tokens += text_token_ceiling(result.call_id + result.name) + FRAMING_TOKENS
        return tokens

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


NOT_RUN = (
    "This call was not run: another call in the same reply could not be read. "
    "Make it again if it is still needed."
)
"""The result text of a call that has no result of its own (see `pair_tool_results`)."""


def unanswered_result(call: ToolCall, reason: str = NOT_RUN) -> ToolResult:
    """The error result of a call that was not run: its own `invalid` reason, else `reason`."""
    if call.invalid is not None:
        reason = f"This call was not run: {call.invalid}"
    return ToolResult(call.id, call.name, reason, is_error=True, metadata={"error": "not_run"})


def pair_tool_results(
    assistant: Message, results: Iterable[ToolResult], *, missing: str = NOT_RUN
) -> list[ToolResult]:
    """Exactly one result per tool call of `assistant`, in call order.

    Model APIs reject a conversation in which a tool call has no result (or a result answers
    no call), so this is applied wherever results are added: the given result for each call id
    (the first, if there are several), an error result for a call without one (saying why: the
    call's `invalid` reason, else `missing`); results for ids the message did not call are left
    out.
    """
    by_id: dict[str, ToolResult] = {}
    for result in results:
        by_id.setdefault(result.call_id, result)
    return [by_id.get(call.id) or unanswered_result(call, missing) for call in assistant.tool_calls]


def with_paired_results(
    messages: Sequence[Message], *, keep_pending: bool = False
) -> tuple[list[Message], int]:
    """The conversation with every tool call answered, and how many results were added or
    dropped to get there.

    With `keep_pending`, the calls of the last assistant message, when nothing but tool results
    follows it, are left as they are: that turn is still running (a resume runs its calls).
    Histories stored by earlier versions (a crash, or a malformed call beside valid ones) are
    repaired this way when they are loaded.

    The results of an assistant message are the tool messages before the next assistant
    message; they are put right after it in call order (other messages of that stretch follow
    them), a missing one is an error result (`unanswered_result`), and a tool message that
    answers no call of the assistant message before it is dropped. A conversation that
    already pairs every call in order is returned unchanged (as a new list) with 0.
    """
    out: list[Message] = []
    fixes = 0
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.role is Role.TOOL:
            fixes += 1  # a result before any assistant call
            continue
        out.append(message)
        if message.role is not Role.ASSISTANT or not message.tool_calls:
            continue
        stretch: list[Message] = []
        while index < len(messages) and messages[index].role is not Role.ASSISTANT:
            stretch.append(messages[index])
            index += 1
        answers = [m for m in stretch if m.role is Role.TOOL]
        if keep_pending and index == len(messages) and len(answers) == len(stretch):
            out.extend(stretch)
            break
        results = [m.tool_result for m in answers if m.tool_result is not None]
        paired = pair_tool_results(message, results)
        in_order = [m.tool_result for m in stretch[: len(paired)]] == paired
        if in_order and len(answers) == len(paired):
            out.extend(stretch)  # already paired and in order: keep the very same messages
            continue
        answered = {r.call_id for r in results}
        added = sum(1 for call in message.tool_calls if call.id not in answered)
        fixes += added + len(answers) - (len(paired) - added)
        out.extend(Message.tool(result) for result in paired)
        out.extend(m for m in stretch if m.role is not Role.TOOL)
    return out, fixes


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

    def clamped(self) -> tuple[Usage, list[str]]:
        """These counts with negative ones (a provider's nonsense) made 0, and the fields that
        were, as `name=value`: a usage report cannot give tokens back or lower a cost."""
        fields = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }
        negative = [f"{name}={value}" for name, value in fields.items() if value < 0]
        if not negative:
            return self, []
        return Usage(*(max(0, value) for value in fields.values())), negative

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
