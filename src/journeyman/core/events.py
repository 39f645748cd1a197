"""The typed events a run emits, in order, to UIs, trajectory files and hooks, and how they
are written to the session store (`event_to_dict`) and read back (`read_event`)."""

from __future__ import annotations

import dataclasses
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from journeyman.core.messages import ToolCall, ToolResult, Usage
from journeyman.core.result import RunResult
from journeyman.core.stored import StoredFormatError, decode_tagged, tag_of


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class RunStarted:
    session_id: str
    task: str
    provider: str
    model: str
    workspace: str
    parent_session_id: str | None = None
    resumed_at_step: int | None = None
    """Set when this run continues a stored session after that many steps."""
    parent_call_id: str | None = None
    """For a subagent's run: the id of the parent's `spawn_agent` call that started it."""
    tool_mode: str | None = None
    """How tools reach the model and why (OpenAI-compatible servers); None when the provider
    has only one way (and in sessions stored before it was recorded)."""
    timestamp: float = field(default_factory=_now)
    type: Literal["run_started"] = "run_started"


@dataclass(frozen=True)
class ModelRequestSent:
    iteration: int
    message_count: int
    tool_count: int
    max_output_tokens: int | None = None
    """The reply limit the request was sent with (after fitting it to the budget)."""
    timestamp: float = field(default_factory=_now)
    type: Literal["model_request"] = "model_request"


@dataclass(frozen=True)
class ModelResponseReceived:
    iteration: int
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    cost_usd: float | None
    stop_reason: str | None
    latency_s: float
    model: str | None = None
    """The model that answered, as the provider reports it."""
    provider: str | None = None
    """The provider that answered (a fallback's, when the first one gave up)."""
    timestamp: float = field(default_factory=_now)
    type: Literal["model_response"] = "model_response"


@dataclass(frozen=True)
class TextDelta:
    text: str
    timestamp: float = field(default_factory=_now)
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True)
class ToolCallStarted:
    iteration: int
    call: ToolCall
    timestamp: float = field(default_factory=_now)
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ApprovalDecided:
    """A call that needed more than the permission policy's plain "allow" was granted or
    refused, and what decided it (`policy.permissions.DecidedBy`)."""

    iteration: int
    call_id: str
    tool_name: str
    granted: bool
    decided_by: str
    """deny_rule, plan_mode, permission_mode, remembered, yes, no_approver, approver_failed,
    user (this call only) or user_always."""
    reason: str
    """Why the call needed a decision: the matching rule or the mode."""
    timestamp: float = field(default_factory=_now)
    type: Literal["approval"] = "approval"


@dataclass(frozen=True)
class ToolResultReceived:
    iteration: int
    result: ToolResult
    duration_s: float
    timestamp: float = field(default_factory=_now)
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class StateChanged:
    from_state: str
    to_state: str
    timestamp: float = field(default_factory=_now)
    type: Literal["state_change"] = "state_change"


@dataclass(frozen=True)
class NudgeInjected:
    kind: str
    message: str
    timestamp: float = field(default_factory=_now)
    type: Literal["nudge"] = "nudge"


@dataclass(frozen=True)
class BudgetUpdated:
    """Where the run stands against its limits, before each turn."""

    level: str
    previous_level: str
    fraction: float
    """Used fraction of the limit closest to exhaustion."""
    driver: str | None
    """Which limit that is: tokens, usd, iterations or duration."""
    incremental_tokens: int
    total_tokens: int
    cost_usd: float | None
    text_only: bool = False
    max_tool_calls: int | None = None
    timestamp: float = field(default_factory=_now)
    type: Literal["budget"] = "budget"


@dataclass(frozen=True)
class ExtensionRequested:
    additional_tokens: int
    additional_usd: float
    reason: str
    extensions_granted: int
    max_extensions: int
    timestamp: float = field(default_factory=_now)
    type: Literal["extension_requested"] = "extension_requested"


@dataclass(frozen=True)
class ExtensionDecided:
    granted: bool
    additional_tokens: int
    additional_usd: float
    reason: str = ""
    """Why it was refused without asking (limit of extensions, cooldown), if it was."""
    timestamp: float = field(default_factory=_now)
    type: Literal["extension_decided"] = "extension_decided"


@dataclass(frozen=True)
class ErrorOccurred:
    category: str
    message: str
    retryable: bool
    details: dict[str, Any] = field(default_factory=dict)
    timestamp: float = field(default_factory=_now)
    type: Literal["error"] = "error"


@dataclass(frozen=True)
class ContextCompacted:
    reason: str
    """"threshold" (the prompt neared the context window), "overflow" (the provider refused
    the prompt), "stale_observations" (old tool results outgrew their own budget) or
    "requested" (the user asked for it, e.g. /compact in the terminal app)."""
    stages: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    timestamp: float = field(default_factory=_now)
    type: Literal["compaction"] = "compaction"


@dataclass(frozen=True)
class SummaryCallMade:
    """The compaction's model call that summarised old turns (not a turn of the run)."""

    iteration: int
    usage: Usage
    cost_usd: float | None
    latency_s: float
    max_output_tokens: int
    """The reply limit the request was sent with."""
    model: str | None = None
    """The model that answered, as the provider reports it."""
    provider: str | None = None
    """The provider that answered (a fallback's, when the first one gave up)."""
    stop_reason: str | None = None
    timestamp: float = field(default_factory=_now)
    type: Literal["summary_call"] = "summary_call"


@dataclass(frozen=True)
class PhaseChanged:
    """The phased mode's workflow moved (DISCOVER -> PLAN -> ACT -> VERIFY -> DONE or FAIL)."""

    from_phase: str
    to_phase: str
    edge: str
    """Why: "next" (the normal order), "recover", "unchanged", "intervene" or "restart"."""
    timestamp: float = field(default_factory=_now)
    type: Literal["phase_change"] = "phase_change"


@dataclass(frozen=True)
class CheckFixed:
    """The check a session is judged by, fixed before the model's first turn from the
    workspace as it was (or `--verify`), with the test infrastructure it rests on and how the
    check ended then; never re-detected from files the model wrote."""

    command: str | None
    """None when no check was configured or found."""
    source: str
    runner: str | None
    infra: dict[str, Any]
    """The manifest of test files and settings (`context.test_infra.TestInfra.to_dict`)."""
    before: dict[str, Any] | None = None
    """The check's run before the first turn: exit_code, tests, duration_s (None if not run)."""
    timestamp: float = field(default_factory=_now)
    type: Literal["check_fixed"] = "check_fixed"


@dataclass(frozen=True)
class RunFinished:
    result: RunResult
    timestamp: float = field(default_factory=_now)
    type: Literal["run_finished"] = "run_finished"


Event = (
    RunStarted
    | ModelRequestSent
    | ModelResponseReceived
    | TextDelta
    | ToolCallStarted
    | ApprovalDecided
    | ToolResultReceived
    | StateChanged
    | NudgeInjected
    | BudgetUpdated
    | ExtensionRequested
    | ExtensionDecided
    | ErrorOccurred
    | ContextCompacted
    | SummaryCallMade
    | PhaseChanged
    | CheckFixed
    | RunFinished
)

EventHandler = Callable[[Event], object]


@dataclass(frozen=True)
class FollowUpSent:
    """The user sent a follow-up message to a stored session (stored, never emitted): what the
    verdict judges of a run starts there."""

    text: str
    timestamp: float = field(default_factory=_now)
    type: Literal["follow_up"] = "follow_up"


StoredEvent = Event | FollowUpSent
"""Every event the session store holds (`text_delta` excepted: deltas are not stored)."""


@dataclass(frozen=True)
class UnreadableEvent:
    """A stored event this version cannot read (unknown type, a field missing or of the wrong
    kind: an older or newer version, an imported file, a hand-edited store). Readers skip it
    and may say so."""

    type: str
    """The type it claims (text cut to 80 characters), or "" when it names none."""
    reason: str


EVENT_TYPES: dict[str, type[StoredEvent]] = {
    tag_of(cls): cls for cls in typing.get_args(StoredEvent)
}
"""The stored events by their `type`."""


def event_from_dict(data: Any) -> StoredEvent:
    """A stored event read back; `StoredFormatError` when it is not one this version knows."""
    return decode_tagged(EVENT_TYPES, data)


def read_event(data: Any) -> StoredEvent | UnreadableEvent:
    """A stored event read back, or what it claims to be and why it cannot be read."""
    try:
        return event_from_dict(data)
    except StoredFormatError as error:
        claimed = data.get("type") if isinstance(data, dict) else None
        return UnreadableEvent(claimed[:80] if isinstance(claimed, str) else "", str(error))


def event_to_dict(event: StoredEvent) -> dict[str, Any]:
    """A JSON-ready dict of the event, with nested records in their own dict form."""
    data: dict[str, Any] = {"type": event.type}
    for f in dataclasses.fields(event):
        if f.name == "type":
            continue
        value = getattr(event, f.name)
        data[f.name] = _jsonable(value)
    return data


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value
