"""A stored session read back as the conversation it was, for exports to other formats: every
message once, in order, each reply with the model call that wrote it and each tool result with
how long its tool ran, and the compactions where they happened.

The store keeps the history the model saw; a compaction stores the whole rewritten history
again (see `SessionStore.message_rows`). Read here, those rewritten copies of messages already
read are left out, so an export shows each turn once and a compaction as one event, followed by
what it added (the summary).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from journeyman.core import events as ev
from journeyman.core.messages import Message, Role, Usage
from journeyman.session.store import HISTORY_START, SessionStore


@dataclass(frozen=True)
class ModelCall:
    """One model call as its `model_response` event recorded it."""

    usage: Usage
    cost_usd: float | None
    """None when the call could not be priced."""
    model: str | None
    provider: str | None
    at: float
    """When the reply arrived (seconds since the epoch)."""
    stop_reason: str | None
    latency_s: float
    call_ids: tuple[str, ...] = ()
    """The ids of the tool calls the reply asked for (how the reply is found among the
    messages)."""


@dataclass
class Entry:
    """One message of the session, with what the events say about it."""

    step: int
    message: Message
    at: float | None = None
    """When it was written, where an event says so."""
    model_call: ModelCall | None = None
    """For a reply: the call that wrote it (None for a reply no event matches, e.g. an
    imported session's)."""
    duration_s: float | None = None
    """For a tool result: how long the tool ran."""


@dataclass(frozen=True)
class Compaction:
    """The history was compacted before the turn of `step`."""

    step: int
    at: float
    reason: str
    stages: tuple[str, ...]
    tokens_before: int
    tokens_after: int


@dataclass
class SessionHistory:
    items: list[Entry | Compaction] = field(default_factory=list)
    unmatched_calls: list[ModelCall] = field(default_factory=list)
    """Model calls whose reply is not among the messages (a reply the run dropped, a call cut
    off by a limit): billed, so counted in the totals, but with no turn to show."""


@dataclass
class _StepEvents:
    calls: list[ModelCall] = field(default_factory=list)
    compactions: list[Compaction] = field(default_factory=list)
    results: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Tool call id -> (when its result arrived, how long the tool ran)."""


def read_history(store: SessionStore, session_id: str) -> SessionHistory:
    """The session's messages, each once and in order, with their model calls and compactions."""
    by_step = _events_by_step(store, session_id)
    rewritten_from: dict[int, Any] = {}
    stored_at: dict[int, float] = {}
    for step, at, checkpoint in store.step_checkpoints(session_id):
        rewritten_from[step], stored_at[step] = checkpoint.get(HISTORY_START), at
    history = SessionHistory()
    seen = _Seen()
    current_step: int | None = None
    rewritten = False
    for seq, step, message in store.message_rows(session_id):
        events = by_step[step]
        if step != current_step:
            current_step = step
            history.items.extend(events.compactions)
            rewritten = rewritten_from.get(step) == seq and step > 0
        if rewritten and seen.holds(message):
            continue
        seen.add(message)
        entry = Entry(step, message)
        if message.role is Role.ASSISTANT:
            entry.model_call = _take_call(events.calls, message)
            entry.at = entry.model_call.at if entry.model_call else None
        elif message.tool_result is not None:
            entry.at, entry.duration_s = events.results.get(
                message.tool_result.call_id, (None, None)
            )
        if entry.at is None:
            entry.at = stored_at.get(step)  # when its step was stored, at the latest
        history.items.append(entry)
    for events in by_step.values():
        history.unmatched_calls.extend(events.calls)
    return history


_READ = frozenset({"model_response", "tool_result", "compaction"})
"""The kinds of event an export uses (the others are not even decoded)."""


def _events_by_step(store: SessionStore, session_id: str) -> defaultdict[int, _StepEvents]:
    by_step: defaultdict[int, _StepEvents] = defaultdict(_StepEvents)
    for step, event in store.read_step_events(session_id, types=_READ):
        found = by_step[step]
        if isinstance(event, ev.ModelResponseReceived):
            found.calls.append(
                ModelCall(
                    usage=event.usage,
                    cost_usd=event.cost_usd,
                    model=event.model,
                    provider=event.provider,
                    at=event.timestamp,
                    stop_reason=event.stop_reason,
                    latency_s=event.latency_s,
                    call_ids=tuple(call.id for call in event.tool_calls),
                )
            )
        elif isinstance(event, ev.ToolResultReceived):
            found.results[event.result.call_id] = (event.timestamp, event.duration_s)
        elif isinstance(event, ev.ContextCompacted):
            found.compactions.append(
                Compaction(
                    step,
                    event.timestamp,
                    event.reason,
                    tuple(event.stages),
                    event.tokens_before,
                    event.tokens_after,
                )
            )
    return by_step


def _take_call(calls: list[ModelCall], reply: Message) -> ModelCall | None:
    """The first of the step's model calls that asked for the same tool calls as `reply`, taken
    off the list; None when none did."""
    wanted = tuple(call.id for call in reply.tool_calls)
    for index, call in enumerate(calls):
        if call.call_ids == wanted:
            return calls.pop(index)
    return None


class _Seen:
    """The messages read so far, as a rewritten history repeats them (a compaction may shorten
    a tool result or a reply's text, never their call ids)."""

    def __init__(self) -> None:
        self._calls: set[str] = set()
        self._results: set[str] = set()
        self._texts: set[tuple[str, str]] = set()

    def holds(self, message: Message) -> bool:
        if message.tool_result is not None:
            return message.tool_result.call_id in self._results
        if message.tool_calls:
            return all(call.id in self._calls for call in message.tool_calls)
        return (message.role.value, message.content) in self._texts

    def add(self, message: Message) -> None:
        if message.tool_result is not None:
            self._results.add(message.tool_result.call_id)
        elif message.tool_calls:
            self._calls.update(call.id for call in message.tool_calls)
        else:
            self._texts.add((message.role.value, message.content))
