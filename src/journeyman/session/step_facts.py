"""Each fact of a step stored once: its tool calls' arguments and its tool results' text live in
its messages; its events refer to them.

A step used to store a tool call three times (the assistant message, the `model_response`
event, the `tool_call` event) and a tool result three times (the tool message's content, the
same text inside its `tool_result`, the `tool_result` event). Now the message row keeps the
text once, and an event whose call arguments or result text equal those of a message of the
same step keeps a marker instead (`ARGUMENTS_REF`, `CONTENT_REF`). Reading puts the text back,
so every reader (resume, fork, inspect, export, the verdict) gets the events as they were
emitted, previews capped as before.

Only the store writes and reads rows, so only it uses this module. Rows written before it
(schema 3) have no markers and are read unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from journeyman.core.messages import Message

CONTENT_REF = "content_in_message"
"""Marker in a `tool_result` event's result: its text is the tool message's of the same step."""
ARGUMENTS_REF = "arguments_in_message"
"""Marker in a call of a `tool_call` or `model_response` event: its arguments are those of the
same call in an assistant message of the same step."""
MISSING_TEXT = "[not found among the session's stored messages]"
"""What a marker reads as when its message is not there (a store damaged or edited by hand)."""


def message_from_row(data: dict[str, Any]) -> Message:
    """A stored message row read back (a tool result's text is the message's content)."""
    result = data.get("tool_result")
    if isinstance(result, dict) and "content" not in result:
        data = {**data, "tool_result": {**result, "content": data.get("content", "")}}
    return Message.from_dict(data)


@dataclass
class _Said:
    """What a step's messages say: each call's arguments and each result's text, by call id;
    ids said twice in one step are not referred to (a reader could not tell them apart)."""

    arguments: dict[str, Any] = field(default_factory=dict)
    results: dict[str, str] = field(default_factory=dict)
    twice: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, messages: Sequence[Message]) -> _Said:
        said = cls()
        for message in messages:
            for call in message.tool_calls:
                if call.id in said.arguments:
                    said.twice.add(call.id)
                said.arguments[call.id] = call.to_dict()["arguments"]
            result = message.tool_result
            if result is not None:
                if result.call_id in said.results:
                    said.twice.add(result.call_id)
                said.results[result.call_id] = result.content
        return said

    def call(self, call: Any) -> Any:
        """`call` (an event's dict) with its arguments replaced by the marker when a message
        holds the same."""
        if not isinstance(call, dict):
            return call
        cid = call.get("id")
        if cid in self.twice or cid not in self.arguments:
            return call
        if call.get("arguments") != self.arguments[cid]:
            return call
        return {**{k: v for k, v in call.items() if k != "arguments"}, ARGUMENTS_REF: True}

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        kind = event.get("type")
        if kind == "tool_call":
            return {**event, "call": self.call(event.get("call"))}
        if kind == "model_response" and isinstance(event.get("tool_calls"), list):
            return {**event, "tool_calls": [self.call(c) for c in event["tool_calls"]]}
        result = event.get("result")
        if kind != "tool_result" or not isinstance(result, dict):
            return event
        cid = result.get("call_id")
        if cid in self.twice or cid not in self.results:
            return event
        if result.get("content") != self.results[cid]:
            return event
        kept = {k: v for k, v in result.items() if k != "content"}
        return {**event, "result": {**kept, CONTENT_REF: True}}


def once(events: Sequence[dict[str, Any]], messages: Sequence[Message]) -> list[dict[str, Any]]:
    """`events` of a step as stored beside its `messages`: what those say, referred to."""
    said = _Said.of(messages)
    if not said.arguments and not said.results:
        return list(events)
    return [said.event(event) for event in events]


def refers_to_messages(event: Any) -> bool:
    """Whether a stored event holds a marker (its text is to be read from a message)."""
    if not isinstance(event, dict):
        return False
    kind = event.get("type")
    if kind == "tool_result":
        result = event.get("result")
        return isinstance(result, dict) and CONTENT_REF in result
    if kind == "tool_call":
        call = event.get("call")
        return isinstance(call, dict) and ARGUMENTS_REF in call
    if kind == "model_response":
        calls = event.get("tool_calls")
        return isinstance(calls, list) and any(
            isinstance(c, dict) and ARGUMENTS_REF in c for c in calls
        )
    return False


@dataclass
class StepFacts:
    """A session's call arguments and result texts by (step, call id), from its message rows
    (the first row of a step wins: a compaction stores rewritten copies later)."""

    arguments: dict[tuple[int, str], Any] = field(default_factory=dict)
    results: dict[tuple[int, str], Any] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Iterable[tuple[int, Any]]) -> StepFacts:
        facts = cls()
        for step, row in rows:
            if not isinstance(row, dict):
                continue
            for call in row.get("tool_calls") or ():
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    facts.arguments.setdefault((step, call["id"]), call.get("arguments"))
            result = row.get("tool_result")
            if isinstance(result, dict) and isinstance(result.get("call_id"), str):
                text = result.get("content", row.get("content"))
                facts.results.setdefault((step, result["call_id"]), text)
        return facts

    def _call(self, step: int, call: Any, cap: Callable[[Any], Any]) -> Any:
        if not isinstance(call, dict) or ARGUMENTS_REF not in call:
            return call
        kept = {k: v for k, v in call.items() if k != ARGUMENTS_REF}
        arguments = self.arguments.get((step, str(call.get("id"))))
        return {**kept, "arguments": cap(arguments) if arguments is not None else {}}

    def rejoin(self, step: int, event: dict[str, Any], cap: Callable[[Any], Any]) -> dict[str, Any]:
        """`event` of `step` with the text its markers refer to put back, through `cap` (the
        store's preview limit for events)."""
        kind = event.get("type")
        if kind == "tool_call":
            return {**event, "call": self._call(step, event.get("call"), cap)}
        if kind == "model_response":
            calls = event.get("tool_calls") or []
            return {**event, "tool_calls": [self._call(step, c, cap) for c in calls]}
        result = event.get("result")
        if kind != "tool_result" or not isinstance(result, dict):
            return event
        kept = {k: v for k, v in result.items() if k != CONTENT_REF}
        text = self.results.get((step, str(result.get("call_id"))))
        kept["content"] = cap(text) if text is not None else MISSING_TEXT
        return {**event, "result": kept}
