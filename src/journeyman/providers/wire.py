"""Request bodies built from JSON serialised once, sent through the official SDKs unchanged.

The SDKs rebuild and walk every request body on every call (OpenAI's request transform, the
Anthropic SDK's copy of the body), so a call's CPU grows with the length of the history. The
adapters instead hand the SDK the finished JSON bytes (the SDK still does the transport,
retries, error mapping and streaming) and build those bytes from parts they keep:

- `dumps` encodes exactly as both SDKs do (UTF-8, no ASCII escapes, no spaces, NaN refused),
  so a body assembled from parts is byte for byte the one the SDK would have sent;
- `HistoryWire` keeps the wire form of a conversation between calls: a call whose history
  starts with the previous call's messages (the same objects; messages are immutable) only
  converts and encodes what follows the last point where the conversion starts afresh (the
  latest assistant message whose turn nothing before it runs into), so a call costs what the
  new messages cost, plus copying bytes;
- `SameParts` keeps one encoded value per tool set (or system prompt) while it stays the same.
"""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from journeyman.core.messages import Message, Role
from journeyman.providers.arguments import warn_unpaired

Key = TypeVar("Key")

MEMO_SLOTS = 8
"""Conversations whose wire form one adapter keeps at once (subagents may share a provider)."""


def dumps(value: Any) -> bytes:
    """`value` as JSON, encoded the way the SDKs encode a request body."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def json_object(fields: Sequence[tuple[str, bytes | list[bytes]]]) -> bytes:
    """A JSON object from (key, value) pairs, in the given order: a value is encoded JSON, or
    a list of encoded items that make an array. Joined once, so a large body is copied once."""
    pieces: list[bytes] = []
    for key, value in fields:
        pieces.append(b"," if pieces else b"{")
        pieces.append(dumps(key) + b":")
        if isinstance(value, bytes):
            pieces.append(value)
        elif value:
            pieces.append(b"[")
            pieces.extend(itertools.chain.from_iterable(zip(itertools.repeat(b","), value)))
            pieces[-2 * len(value)] = b""  # no comma before the first item
            pieces.append(b"]")
        else:
            pieces.append(b"[]")
    pieces.append(b"}" if pieces else b"{}")
    return b"".join(pieces)


def json_array(items: Sequence[bytes]) -> bytes:
    """A JSON array of already encoded items."""
    return b"[" + b",".join(items) + b"]"


@dataclass
class Converted:
    """A run of messages converted to wire units (one OpenAI message, one Anthropic turn)."""

    units: list[bytes]
    """Each unit encoded, as it reads in the middle of a history."""
    fresh: list[tuple[int, int]] = field(default_factory=list)
    """Assistant messages that start a unit nothing earlier runs into: which assistant message
    of the run each is (0 for the first; pairing keeps every one, in order) and the number of
    units before it. A later call may reuse those units and convert from there on."""
    fixes: int = 0
    """Tool results added or dropped to pair every call with its result."""
    final: bytes | None = None
    """The last unit as it is sent when it ends the request, if that differs (Anthropic's
    cache breakpoint on the last turn)."""


Converter = Callable[[Sequence[Message]], Converted]
"""Converts messages that start afresh (the start of a history, or a `fresh` message on)."""


@dataclass
class _Memo:
    sources: tuple[Message, ...]
    boundary: int
    """Index in `sources` of the message from which the next call converts again."""
    units: list[bytes]
    """The units of `sources[:boundary]`."""
    fixes: int


class HistoryWire:
    """The encoded units of a conversation, reused from one call to the next."""

    def __init__(self, convert: Converter) -> None:
        self._convert = convert
        self._memos: dict[int, _Memo] = {}

    def units(self, messages: tuple[Message, ...]) -> list[bytes]:
        """The units of `messages`, the last in the form that ends a request."""
        if not messages:
            return self._finish(messages, 0, [], 0, self._convert(messages))
        memo = self._memos.get(id(messages[0]))
        start, before, fixes = 0, [], 0
        if memo is not None and _starts_with(messages, memo.sources, memo.boundary):
            start, before, fixes = memo.boundary, memo.units, memo.fixes
        return self._finish(messages, start, before, fixes, self._convert(messages[start:]))

    def _finish(
        self,
        messages: tuple[Message, ...],
        start: int,
        before: list[bytes],
        fixes: int,
        tail: Converted,
    ) -> list[bytes]:
        warn_unpaired(fixes + tail.fixes)
        units = before + tail.units
        if messages and tail.fresh:
            ordinal, count = tail.fresh[-1]
            boundary = _assistant_index(messages, ordinal, start)
            if boundary is not None:
                memos = self._memos
                memos.pop(id(messages[0]), None)
                if len(memos) >= MEMO_SLOTS:
                    del memos[next(iter(memos))]  # the conversation used least recently
                memos[id(messages[0])] = _Memo(
                    messages, boundary, units[: len(before) + count], fixes + tail.fixes
                )
        if tail.final is not None and units:
            units[-1] = tail.final
        return units


def _starts_with(messages: tuple[Message, ...], sources: tuple[Message, ...], end: int) -> bool:
    """Whether `messages` holds the very objects of `sources` up to and including `end`."""
    if len(messages) <= end or messages[end] is not sources[end]:
        return False
    return all(map(operator.is_, messages[:end], sources[:end]))


def _assistant_index(messages: tuple[Message, ...], ordinal: int, start: int) -> int | None:
    """Where the assistant message number `ordinal` (from 0) of `messages[start:]` is."""
    for index in range(start, len(messages)):
        if messages[index].role is Role.ASSISTANT:
            if ordinal == 0:
                return index
            ordinal -= 1
    return None


class SameParts(Generic[Key]):
    """One encoded value, kept while what it was made from stays the same.

    `key` is compared by identity element by element (tool specs are immutable), `extra`
    by equality (a system prompt, a mode)."""

    def __init__(self) -> None:
        self._key: tuple[object, ...] = ()
        self._extra: object = None
        self._value: Key | None = None

    def get(self, key: Sequence[object], extra: object, build: Callable[[], Key]) -> Key:
        if (
            self._value is not None
            and len(key) == len(self._key)
            and all(map(operator.is_, key, self._key))
            and extra == self._extra
        ):
            return self._value
        value = build()
        self._key, self._extra, self._value = tuple(key), extra, value
        return value
