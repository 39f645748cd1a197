"""Persistence of a run in the session store: events and usage are buffered during a step and
written with the step's messages and checkpoint in one transaction; file changes are journaled
at once, before the tool writes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from journeyman.core.events import Event, FollowUpSent, RunStarted, event_to_dict
from journeyman.core.messages import Message, Role
from journeyman.economics.usage_log import UsageRow
from journeyman.loop.state import LoopState
from journeyman.providers.base import Provider
from journeyman.session.store import HISTORY_START, SessionStore, StepRecord
from journeyman.tools.context import FileChangeIntent
from journeyman.tools.snapshot import WorkspaceSnapshots, interrupted_changes

COMMAND_TOOL = "run_command"
"""The tool whose interrupted command a resume journals (the snapshots are its own)."""

UNPERSISTED_EVENTS = frozenset({"text_delta"})
"""Streaming deltas are not stored; the full text arrives in the model_response event."""

INTERRUPTED_NOTE = (
    "[journeyman] The user interrupted the work on the message above before it was answered. "
    "It stays here for context; their next message follows."
)


class StepRecorder:
    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        saved_messages: int = 0,
        history_start: int = 0,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.saved_messages = saved_messages
        """How many of the run's messages are already in the store."""
        self.history_start = history_start
        """Seq of the first stored message of the current history (moved by compaction)."""
        self._replaced = False
        self.step = 0
        """The step in progress (for journaled file changes)."""
        self._events: list[dict[str, Any]] = []
        self._usage: list[UsageRow] = []

    def event(self, event: Event) -> None:
        if event.type not in UNPERSISTED_EVENTS:
            self._events.append(event_to_dict(event))

    def usage(self, row: UsageRow) -> None:
        self._usage.append(row)

    def journal(self, change: FileChangeIntent) -> None:
        self.store.record_file_change(
            self.session_id, self.step, change.path, change.before, change.after, change.tool
        )

    async def reconcile_interrupted_command(self, workspace: Path, step: int) -> None:
        """Journal, as part of `step`, what a command changed before the agent died in it.

        The snapshots are compared in a worker thread; the changes are journaled here, on the
        thread that opened the store (SQLite connections stay on their thread), and only then
        is the command's marker removed: a crash in between journals them at the next try."""
        self.step = step
        snapshots = WorkspaceSnapshots(workspace, self.session_id)
        found = await asyncio.to_thread(interrupted_changes, snapshots)
        if found is None:
            return
        for change in found.changes:
            self.journal(FileChangeIntent(change.path, change.before, change.after, COMMAND_TOOL))
        await asyncio.to_thread(snapshots.end)

    def history_replaced(self) -> None:
        """The run's messages were rewritten (compaction): the next commit stores all of them."""
        self.saved_messages = 0
        self._replaced = True

    def commit(self, step: int, messages: list[Message], checkpoint: dict[str, Any]) -> None:
        """Write everything since the last commit as step `step`."""
        if self.history_start and not self._replaced:
            checkpoint = {**checkpoint, HISTORY_START: self.history_start}
        first_seq = self.store.record_step(
            self.session_id,
            StepRecord(
                step=step,
                messages=messages[self.saved_messages :],
                events=self._events,
                checkpoint=checkpoint,
                usage=self._usage,
                replaces_history=self._replaced,
            ),
        )
        if self._replaced:
            self.history_start = first_seq
            self._replaced = False
        self.saved_messages = len(messages)
        self._events = []
        self._usage = []

    def finish(self, step: int, finish_reason: str, final_text: str, error: str | None) -> None:
        """Store the run's last events (those after its last step) and its outcome."""
        self.store.record_outcome(self.session_id, finish_reason, final_text, error)
        self.store.append_events(self.session_id, step, self._events, self._usage)
        self._events = []
        self._usage = []


def follow_up_messages(history: list[Message], text: str) -> list[Message]:
    """What a follow-up adds to `history`: the user's message, after a note when the
    history ends with a message that was never answered (its run was cancelled or killed)."""
    message = Message.user(text)
    if history and history[-1].role is Role.USER:
        return [Message.user(INTERRUPTED_NOTE), message]
    return [message]


def store_follow_up(
    store: SessionStore, session_id: str, step: int, messages: list[Message], text: str
) -> None:
    """Store a follow-up's messages as soon as it is sent, with the event that opens it, so a
    cancel or a crash before `step` completes keeps them."""
    store.record_ahead(session_id, step, messages, [event_to_dict(FollowUpSent(text))])


def run_started(
    state: LoopState,
    provider: Provider,
    workspace: Path,
    resumed: bool,
    parent_call_id: str | None = None,
) -> RunStarted:
    """The event that opens a run of `state`'s session (`resumed`: continuing a stored one)."""
    return RunStarted(
        session_id=state.session_id,
        task=state.task,
        provider=provider.name,
        model=provider.model,
        workspace=str(workspace),
        parent_session_id=state.parent_session_id,
        resumed_at_step=state.iterations if resumed else None,
        parent_call_id=parent_call_id,
        tool_mode=getattr(provider, "tool_mode_description", None),
    )
