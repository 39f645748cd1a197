"""What a report shows, read from the session store: the session, its outcome, every step with
its model turn, tool calls and notable events, per-step usage, file changes and subagents.

Everything here is read from the store (never from the workspace) and redacted again on the
way in: the store keeps secrets out of its rows, but the undo journal's vault holds exact file
text, and a report is a file that gets attached to bug reports.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from journeyman.core import events as ev
from journeyman.core.events import StoredEvent, UnreadableEvent
from journeyman.core.messages import Message, Role, Usage
from journeyman.core.redact import Redactor
from journeyman.core.result import FinishReason, RunResult
from journeyman.core.stored import MISSING_TIMESTAMP
from journeyman.economics.usage_log import UsageRow
from journeyman.loop.verdict import BEFORE_CALL_ID, CHECK_CALL_PREFIX
from journeyman.providers.pricing import LOCAL_PROVIDERS
from journeyman.session.store import FileChange, SessionRecord, SessionStore, SessionSummary
from journeyman.swarm.tree import SessionNode, session_tree

ROUTINE_STATES = frozenset({"idle", "initializing", "running", "completing"})
"""Lifecycle states every run passes through: not worth a line in the timeline."""


@dataclass(frozen=True)
class Note:
    """Something that happened in a step besides the model turn and the tool calls."""

    kind: str
    """nudge, compaction, summary, budget, extension, approval, error, phase, state, run or
    hook."""
    title: str
    detail: str = ""


@dataclass
class CallView:
    """One tool call and its result."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    result: str | None = None
    """None when the call has no stored result (the run stopped while it ran)."""
    is_error: bool = False
    refused_by: str | None = None
    """permission, hook or budget when the call was refused rather than run."""
    approval: str = ""
    """How a call that needed approval was decided ("approved by --yes", ...)."""
    duration_s: float | None = None
    exit_code: int | None = None
    """A command's exit code, when the tool reported one."""
    child_session_id: str | None = None
    """The subagent session a spawn call started."""
    child_outcome: str = ""
    """How that subagent ended, as its spawn call reported it."""
    asked_by_model: bool = False
    """The model asked for a call of this id in this run (so it is not the harness's check,
    whatever its id looks like)."""

    @property
    def failed(self) -> bool:
        """The call failed, or the command it ran exited non-zero (the check's run before the
        first turn excepted: its failing tests are the task, not an error)."""
        if self.by_harness and self.call_id == BEFORE_CALL_ID:
            return False
        return self.is_error or bool(self.exit_code)

    @property
    def by_harness(self) -> bool:
        """The harness's own run of the check command, not a call the model made."""
        return self.call_id.startswith(CHECK_CALL_PREFIX) and not self.asked_by_model


@dataclass
class TurnView:
    """One model reply."""

    text: str
    requested: list[str]
    """Names of the tools the reply asked for."""
    stop_reason: str | None = None
    latency_s: float | None = None


@dataclass
class StepView:
    """One stored step of the session."""

    number: int
    stored_at: float | None = None
    duration_s: float | None = None
    turns: list[TurnView] = field(default_factory=list)
    calls: list[CallView] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    """None when a call of the step could not be priced."""
    model_calls: int = 0
    phase: str | None = None
    """The phased workflow's phase after the step (phased mode only)."""
    budget_level: str | None = None
    compacted: bool = False
    changes: list[int] = field(default_factory=list)
    """Ids of the file changes journaled in this step."""

    @property
    def has_error(self) -> bool:
        return any(c.failed for c in self.calls) or any(n.kind == "error" for n in self.notes)


@dataclass
class Totals:
    usage: Usage
    cost_usd: float | None
    model_calls: int
    duration_s: float | None
    iterations: int
    tool_calls: int
    failed_calls: int
    compactions: int
    local: bool
    """Every model call was the embedded model's, on this machine: the cost is $0, known."""
    runs: int
    """Runs of the session: its first and each resume or continuation (ended or not)."""


@dataclass
class Report:
    """Everything the HTML report shows about one session."""

    record: SessionRecord
    summary: SessionSummary
    outcome: RunResult | None
    """The last run's result as stored in its run_finished event (None if it never ended)."""
    steps: list[StepView]
    changes: list[FileChange]
    tree: SessionNode | None
    """The session with its subagents; None when it has none."""
    totals: Totals
    models: list[str]
    conversation: list[Message] = field(default_factory=list)
    """The stored history, for a session whose steps have no events (an imported run): the
    timeline has nothing else to show then."""

    @property
    def phased(self) -> bool:
        return any(step.phase for step in self.steps)


def load_report(store: SessionStore, session_id: str, redactor: Redactor | None = None) -> Report:
    """The report of `session_id` (a full id: see `SessionStore.resolve_id`)."""
    redact = redactor or Redactor()
    record = store.load_session(session_id)
    record = SessionRecord(
        id=record.id,
        task=redact(record.task),
        workspace=redact(record.workspace),
        settings=redact.tree(record.settings),
        system_prompt="",  # not shown: the same text for every run
        created_at=record.created_at,
        parent_id=record.parent_id,
        forked_at_step=record.forked_at_step,
    )
    summary = store.summary(session_id)
    summary = SessionSummary(
        record,
        summary.steps,
        summary.finish_reason,
        redact(summary.final_text),
        redact(summary.error) if summary.error else None,
    )
    steps, runs = _steps(store, session_id, redact)
    finished = [run.result for run in runs if run.result is not None]
    usage_rows = [_local_priced(row) for row in store.usage_rows(session_id)]
    _attribute_usage(steps, usage_rows)
    changes = [_redacted_change(c, redact) for c in store.file_changes(session_id)]
    by_number = {s.number: s for s in steps}
    for change in changes:
        step = by_number.get(change.step)
        if step is not None:
            step.changes.append(change.id)
    children = store.subagent_ids(session_id)
    tree = _redacted_tree(session_tree(store, session_id), redact) if children else None
    outcome = finished[-1] if finished else None
    conversation: list[Message] = []
    if not any(s.turns or s.calls for s in steps):
        conversation = [_redacted_message(m, redact) for m in store.messages(session_id)]
    return Report(
        record=record,
        summary=summary,
        outcome=outcome,
        steps=steps,
        changes=changes,
        tree=tree,
        totals=_totals(steps, usage_rows, runs, store, session_id),
        models=sorted({f"{r.provider}:{r.model}" for r in usage_rows}),
        conversation=[m for m in conversation if m.role is not Role.SYSTEM],
    )


# --- steps ----------------------------------------------------------------------------------


def _steps(
    store: SessionStore, session_id: str, redact: Redactor
) -> tuple[list[StepView], list[RunSpan]]:
    """The session's steps, and its runs (the first, then each resume or continuation)."""
    steps: dict[int, StepView] = {}
    previous_stored: float | None = None
    previous_phase: str | None = None
    for number, stored_at, checkpoint in store.step_checkpoints(session_id):
        if number == 0:  # the row written when the session was created
            previous_stored = stored_at
            continue
        step = steps.setdefault(number, StepView(number))
        step.stored_at = stored_at
        if previous_stored is not None:
            step.duration_s = max(0.0, stored_at - previous_stored)
        previous_stored = stored_at
        step.phase = _phase(checkpoint)
        if step.phase and previous_phase and step.phase != previous_phase:
            decisions = _phase_decisions(checkpoint, number, redact)
            detail = "; ".join(decisions)
            step.notes.append(Note("phase", f"{previous_phase} → {step.phase}", detail))
        elif step.phase and previous_phase is None:
            detail = "; ".join(_phase_decisions(checkpoint, number, redact))
            step.notes.append(Note("phase", f"workflow starts, now in {step.phase}", detail))
        previous_phase = step.phase or previous_phase
        level = _get(checkpoint, "budget_gate", "last_level")
        step.budget_level = level if isinstance(level, str) else None
    timeline = _Timeline()
    first_event_at: dict[int, float] = {}
    for number, event in store.read_step_events(session_id, clean=redact.tree):
        step = steps.setdefault(number, StepView(number))
        if isinstance(event, UnreadableEvent):
            step.notes.append(Note("skipped", SKIPPED_TITLE, event.reason))
            continue
        if event.timestamp != MISSING_TIMESTAMP:
            first_event_at.setdefault(number, event.timestamp)
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(step, event, timeline)
        if timeline.runs and event.timestamp != MISSING_TIMESTAMP:
            timeline.runs[-1].last_event_at = event.timestamp
    for number, started in first_event_at.items():
        step = steps[number]
        if step.stored_at is not None and step.stored_at >= started:
            step.duration_s = step.stored_at - started  # a resumed run's first step: no idle gap
    return [steps[n] for n in sorted(steps)], timeline.runs


SKIPPED_TITLE = "a stored event this version cannot read was skipped"


@dataclass
class _Timeline:
    """What reading a session's events carries from one event to the next."""

    calls: dict[str, CallView] = field(default_factory=dict)
    """Every tool call so far by id, for its result and its approval."""
    level: str = "none"
    """The budget level in force."""
    finished: list[RunResult] = field(default_factory=list)
    """The result of each run that ended."""
    runs: list[RunSpan] = field(default_factory=list)
    """Each run of the session (the first, every resume or continuation), in order."""
    model_call_ids: set[str] = field(default_factory=set)
    """Ids of the calls the model asked for in the current run."""


@dataclass
class RunSpan:
    """One run of a session, from its run_started event to its run_finished (if any)."""

    started_at: float | None = None
    last_event_at: float | None = None
    result: RunResult | None = None
    """None when the run did not end (the process was killed, or it is still running)."""

    @property
    def duration_s(self) -> float | None:
        """The run's own figure when it ended, else the span of its stored events."""
        if self.result is not None:
            return self.result.duration_s
        if self.started_at is None or self.last_event_at is None:
            return None
        return max(0.0, self.last_event_at - self.started_at)


def _model_response(step: StepView, event: ev.ModelResponseReceived, timeline: _Timeline) -> None:
    timeline.model_call_ids.update(call.id for call in event.tool_calls)
    step.turns.append(
        TurnView(
            text=event.text,
            requested=[call.name for call in event.tool_calls],
            stop_reason=event.stop_reason,
            latency_s=event.latency_s,
        )
    )


def _tool_call(step: StepView, event: ev.ToolCallStarted, timeline: _Timeline) -> None:
    call = event.call
    view = CallView(call_id=call.id, name=call.name, arguments=dict(call.arguments))
    view.asked_by_model = call.id in timeline.model_call_ids
    timeline.calls[view.call_id] = view
    step.calls.append(view)


def _tool_result(step: StepView, event: ev.ToolResultReceived, timeline: _Timeline) -> None:
    result = event.result
    view = timeline.calls.get(result.call_id)
    if view is None:  # refused before it started (the per-turn cap): no tool_call event
        view = CallView(result.call_id, result.name, {})
        timeline.calls[result.call_id] = view
        step.calls.append(view)
    view.result = result.content
    view.is_error = result.is_error
    view.duration_s = event.duration_s
    metadata = result.metadata
    error_kind = metadata.get("error")
    if error_kind in ("permission", "hook", "budget_restricted"):
        view.refused_by = "budget" if error_kind == "budget_restricted" else error_kind
    exit_code = metadata.get("exit_code")
    view.exit_code = exit_code if isinstance(exit_code, int) else None
    child = metadata.get("child_session_id")
    view.child_session_id = str(child) if child else None
    if child:
        view.child_outcome = _child_outcome(metadata)


def _approval(step: StepView, event: ev.ApprovalDecided, timeline: _Timeline) -> None:
    decided = approval_text(event.decided_by, event.granted)
    approved = timeline.calls.get(event.call_id)
    if approved is not None:
        approved.approval = decided
    step.notes.append(Note("approval", f"{event.tool_name or '?'} {decided}", event.reason))


def _nudge(step: StepView, event: ev.NudgeInjected, _: _Timeline) -> None:
    if event.kind == "hook":
        step.notes.append(Note("hook", "hook says", event.message))
    else:
        title = f"nudge: {event.kind.replace('_', ' ')}"
        step.notes.append(Note("nudge", title, event.message))


def _compaction(step: StepView, event: ev.ContextCompacted, _: _Timeline) -> None:
    step.compacted = True
    before, after = event.tokens_before, event.tokens_after
    step.notes.append(
        Note(
            "compaction",
            f"context compacted: {before:,} → {after:,} tokens",
            f"reason {event.reason}; stages: {', '.join(event.stages)}",
        )
    )


def _summary_call(step: StepView, event: ev.SummaryCallMade, _: _Timeline) -> None:
    usage, cost = event.usage, event.cost_usd
    priced = f", ${cost:.4f}" if cost is not None else ""
    step.notes.append(
        Note(
            "summary",
            "compaction summary call",
            f"{usage.total_input_tokens:,} tokens in, {usage.output_tokens:,} out{priced} "
            f"({event.model or '?'})",
        )
    )


def _budget(step: StepView, event: ev.BudgetUpdated, timeline: _Timeline) -> None:
    if event.level != timeline.level:
        step.notes.append(
            Note(
                "budget",
                f"budget level {timeline.level} → {event.level}",
                f"{event.fraction:.0%} of the {event.driver or '?'} limit used",
            )
        )
    timeline.level = event.level


def _extension_requested(step: StepView, event: ev.ExtensionRequested, _: _Timeline) -> None:
    step.notes.append(
        Note(
            "extension",
            "budget extension asked for",
            f"{event.additional_tokens:,} tokens, ${event.additional_usd:.4f}: {event.reason}",
        )
    )


def _extension_decided(step: StepView, event: ev.ExtensionDecided, _: _Timeline) -> None:
    title = "budget extension granted" if event.granted else "budget extension refused"
    step.notes.append(Note("extension", title, event.reason))


def _error(step: StepView, event: ev.ErrorOccurred, _: _Timeline) -> None:
    step.notes.append(Note("error", f"error ({event.category})", event.message))


CANCEL_STATE_NOTE = "agent running → error"


def _state_change(step: StepView, event: ev.StateChanged, _: _Timeline) -> None:
    if event.to_state not in ROUTINE_STATES:
        step.notes.append(Note("state", f"agent {event.from_state} → {event.to_state}"))


def _run_started(step: StepView, event: ev.RunStarted, timeline: _Timeline) -> None:
    if timeline.runs and timeline.runs[-1].result is None:
        step.notes.append(Note("run", "the run before did not finish (its process stopped)"))
    timeline.runs.append(RunSpan(started_at=_known_time(event.timestamp)))
    timeline.model_call_ids.clear()
    if event.resumed_at_step:
        step.notes.append(Note("run", f"run resumed after step {event.resumed_at_step}"))


def _run_finished(step: StepView, event: ev.RunFinished, timeline: _Timeline) -> None:
    result = event.result
    if result.finish_reason is FinishReason.CANCELLED:
        # the lifecycle ends a cancelled run in its error state: not an error to the reader
        step.notes[:] = [n for n in step.notes if n.title != CANCEL_STATE_NOTE]
    timeline.finished.append(result)
    if not timeline.runs or timeline.runs[-1].result is not None:
        timeline.runs.append(RunSpan())  # its start was not stored (or could not be read)
    timeline.runs[-1].result = result
    reason = result.finish_reason.value
    step.notes.append(Note("run", f"run finished: {reason}", result.error or ""))


_HANDLERS: dict[type[StoredEvent], Callable[[StepView, Any, _Timeline], None]] = {
    ev.ModelResponseReceived: _model_response,
    ev.ToolCallStarted: _tool_call,
    ev.ToolResultReceived: _tool_result,
    ev.ApprovalDecided: _approval,
    ev.NudgeInjected: _nudge,
    ev.ContextCompacted: _compaction,
    ev.SummaryCallMade: _summary_call,
    ev.BudgetUpdated: _budget,
    ev.ExtensionRequested: _extension_requested,
    ev.ExtensionDecided: _extension_decided,
    ev.ErrorOccurred: _error,
    ev.StateChanged: _state_change,
    ev.RunStarted: _run_started,
    ev.RunFinished: _run_finished,
}
"""What each kind of stored event adds to its step; the others (requests sent, the fixed
check, follow-ups) add nothing the timeline shows."""


APPROVALS = {
    ("deny_rule", False): "refused by a deny rule",
    ("plan_mode", False): "refused: plan mode changes nothing",
    ("permission_mode", False): "refused by the permission mode",
    ("remembered", True): "approved by a remembered rule",
    ("yes", True): "approved by --yes",
    ("no_approver", False): "refused: needed approval, nobody could be asked",
    ("approver_failed", False): "refused: asking for approval failed",
    ("user", True): "approved by the user, this once",
    ("user", False): "declined by the user",
    ("user_always", True): "approved by the user, always",
}


def approval_text(decided_by: str, granted: bool) -> str:
    """How an approval decision reads in the timeline."""
    found = APPROVALS.get((decided_by, granted))
    if found is not None:
        return found
    return f"{'approved' if granted else 'refused'} ({decided_by or 'unknown'})"


def _attribute_usage(steps: list[StepView], rows: Iterable[UsageRow]) -> None:
    """Give each usage row to the step it was written with: the first stored after it."""
    timed = [s for s in steps if s.stored_at is not None]
    if not timed:
        return
    stamps = [s.stored_at or 0.0 for s in timed]
    for row in rows:
        index = min(bisect.bisect_left(stamps, row.created_at), len(timed) - 1)
        step = timed[index]
        step.usage = step.usage + row.usage
        step.model_calls += 1
        if step.cost_usd is not None:
            step.cost_usd = None if row.cost_usd is None else step.cost_usd + row.cost_usd


def _phase(checkpoint: Mapping[str, Any]) -> str | None:
    phase = _get(checkpoint, "mode", "agent_state", "phase")
    return phase if isinstance(phase, str) else None


def _phase_decisions(checkpoint: Mapping[str, Any], step: int, redact: Redactor) -> list[str]:
    """The phased workflow's own account of this step's transitions, when it kept one."""
    decisions = _get(checkpoint, "mode", "agent_state", "memory", "debug", "decisions")
    if not isinstance(decisions, list):
        return []
    return [
        redact(str(d.get("text", "")))
        for d in decisions
        if isinstance(d, Mapping) and d.get("step") == step and d.get("text")
    ]


# --- the rest -------------------------------------------------------------------------------


def _totals(
    steps: list[StepView],
    rows: list[UsageRow],
    runs: list[RunSpan],
    store: SessionStore,
    session_id: str,
) -> Totals:
    usage = Usage()
    for row in rows:
        usage = usage + row.usage
    costs = [row.cost_usd for row in rows]
    cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    finished = [run.result for run in runs if run.result is not None]
    durations = [run.duration_s for run in runs]
    known = [d for d in durations if d is not None]
    duration = sum(known) if known else _stored_span(steps)
    _, checkpoint = store.checkpoint(session_id)
    iterations = _get(checkpoint, "counters", "iterations")
    if not isinstance(iterations, int):
        iterations = finished[-1].iterations if finished else 0
    calls = [c for s in steps for c in s.calls]
    return Totals(
        usage=usage,
        cost_usd=cost,
        model_calls=len(rows),
        duration_s=duration,
        iterations=int(iterations or 0),
        tool_calls=len(calls),
        failed_calls=sum(1 for c in calls if c.failed),
        compactions=sum(1 for s in steps for n in s.notes if n.kind == "compaction"),
        local=bool(rows) and all(row.provider in LOCAL_PROVIDERS for row in rows),
        runs=len(runs),
    )


def _local_priced(row: UsageRow) -> UsageRow:
    """A call of the embedded model costs $0, also in a session stored before it was priced
    so (its rows say None there)."""
    if row.cost_usd is None and row.provider in LOCAL_PROVIDERS:
        return dataclasses.replace(row, cost_usd=0.0)
    return row


def _known_time(timestamp: float) -> float | None:
    return None if timestamp == MISSING_TIMESTAMP else timestamp


def _stored_span(steps: list[StepView]) -> float | None:
    known = [s.duration_s for s in steps if s.duration_s is not None]
    return sum(known) if known else None


def _redacted_change(change: FileChange, redact: Redactor) -> FileChange:
    return FileChange(
        id=change.id,
        session_id=change.session_id,
        step=change.step,
        path=redact(change.path),
        kind=change.kind,
        before=None if change.before is None else redact(change.before),
        after=None if change.after is None else redact(change.after),
        tool=change.tool,
        created_at=change.created_at,
        undone=change.undone,
        description=redact(change.description),
        unrecoverable=change.unrecoverable,
    )


def _redacted_message(message: Message, redact: Redactor) -> Message:
    return Message.from_dict(redact.tree(message.to_dict()))


def _redacted_tree(node: SessionNode, redact: Redactor) -> SessionNode:
    summary = node.summary
    record = summary.record
    shown = SessionRecord(
        id=record.id,
        task=redact(record.task),
        workspace=redact(record.workspace),
        settings={},
        system_prompt="",
        created_at=record.created_at,
        parent_id=record.parent_id,
    )
    return SessionNode(
        summary=SessionSummary(shown, summary.steps, summary.finish_reason, "", None),
        tokens=node.tokens,
        cost_usd=node.cost_usd,
        children=[_redacted_tree(child, redact) for child in node.children],
    )


def _child_outcome(metadata: Mapping[str, Any]) -> str:
    parts = [str(metadata.get("finish_reason") or "unfinished")]
    tokens = metadata.get("tokens")
    if isinstance(tokens, int):
        parts.append(f"{tokens:,} tokens")
    cost = _number(metadata.get("cost_usd"))
    if cost is not None:
        parts.append(f"${cost:,.4f}")
    return ", ".join(parts)


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
