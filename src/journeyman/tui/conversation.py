"""One session the user talks to, without any widget: the first message starts the session,
each later one continues it (`Agent.send`), and the session's store answers /undo, /diff,
/sessions and the history shown on --resume."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from journeyman.core.events import EventHandler
from journeyman.core.messages import Message, ToolCall
from journeyman.core.result import RunResult
from journeyman.economics.approval import ExtensionApprover
from journeyman.loop.agent import Agent
from journeyman.policy.permissions import Approver
from journeyman.session.fork import prepare_fork
from journeyman.session.store import (
    FileChange,
    SessionNotFoundError,
    SessionStore,
    SessionSummary,
    new_session_id,
)
from journeyman.session.undo import FileChangeTracker, UndoResult
from journeyman.session.workspace_lock import WorkspaceLock


@dataclass(frozen=True)
class AgentHooks:
    """What the app lends the agent: its event sink and its two dialogs."""

    on_event: EventHandler
    extension_approver: ExtensionApprover
    permission_approver: Approver


AgentFactory = Callable[[AgentHooks], Agent]
"""Builds the agent of a conversation around the app's hooks (the CLI's, or a test's)."""


@dataclass
class PendingFork:
    """A `/fork STEP` waiting for the next message, which starts the forked session."""

    parent_id: str
    step: int
    history: list[Message]


@dataclass(frozen=True)
class StoredTranscript:
    """What a resumed session shows of its past."""

    messages: list[Message]
    """The stored history, tool calls and results included."""
    durations: dict[str, float]
    """Seconds each tool call took, by call id (when its event was stored)."""
    diffs: dict[str, str]
    """The unified diff of each call that edited a file, by call id."""


class Conversation:
    def __init__(self, agent: Agent, session_id: str | None = None) -> None:
        self.agent = agent
        self.session_id = session_id
        """The session being talked to; None until the first message."""
        self.fork: PendingFork | None = None
        self.last_result: RunResult | None = None

    def _store(self) -> SessionStore:
        return SessionStore(self.agent.session_root)

    async def send(self, text: str) -> RunResult:
        """The agent works on `text` in this session (a new one for the first message)."""
        fork, self.fork = self.fork, None
        if fork is None and self.session_id is not None:
            result = await self.agent.send(self.session_id, text)
        else:
            result = await self._start(text, fork)
        self.last_result = result
        return result

    async def _start(self, text: str, fork: PendingFork | None) -> RunResult:
        """A new session on `text` (a fork's, when `fork` is pending); when the run stores
        nothing (refused by the settings, or by the model server at its first call), the
        conversation stays on the session it had."""
        before, self.session_id = self.session_id, new_session_id()  # known for the status bar
        try:
            if fork is None:
                return await self.agent.run(text, session_id=self.session_id)
            return await self.agent.run(
                text,
                session_id=self.session_id,
                history=fork.history,
                parent_session_id=fork.parent_id,
                forked_at_step=fork.step,
            )
        finally:
            if not self._stored(self.session_id):
                self.session_id = before

    def _stored(self, session_id: str) -> bool:
        store = self._store()
        try:
            store.load_session(session_id)
        except SessionNotFoundError:
            return False
        finally:
            store.close()
        return True

    def resolve(self, given: str) -> str:
        """The id of the stored session named by `given`, its whole id or the beginning or end
        of it (ValueError when none or several match)."""
        store = self._store()
        try:
            return store.resolve_id(given.strip())
        except SessionNotFoundError as error:
            raise ValueError(f"{error.message}; see /sessions") from None
        finally:
            store.close()

    def transcript(self) -> StoredTranscript:
        """The stored conversation of the session (for a resumed session): its messages and
        how long each tool call took."""
        if self.session_id is None:
            return StoredTranscript([], {}, {})
        store = self._store()
        try:
            messages = store.messages(self.session_id)
            durations = {
                str(result.get("call_id")): float(event["duration_s"])
                for event in store.events(self.session_id)
                if event.get("type") == "tool_result"
                and isinstance(result := event.get("result"), dict)
                and isinstance(event.get("duration_s"), int | float)
            }
            changes = store.file_changes(self.session_id)
        finally:
            store.close()
        return StoredTranscript(messages, durations, self._edit_diffs(messages, changes))

    def _edit_diffs(self, messages: list[Message], changes: list[FileChange]) -> dict[str, str]:
        """The journaled change of each call that edited one file (by `path`), as a unified
        diff: the workspace now holds later versions, so the call's own diff is gone from it."""
        pending = list(changes)
        calls: dict[str, ToolCall] = {}
        diffs: dict[str, str] = {}
        for message in messages:
            calls.update((call.id, call) for call in message.tool_calls)
            result = message.tool_result
            call = calls.get(result.call_id) if result is not None else None
            if result is None or call is None or result.is_error:
                continue
            path = call.arguments.get("path")
            if not isinstance(path, str):
                continue
            relative = self._relative(path)
            for change in pending:
                if change.tool == call.name and change.path == relative:
                    pending.remove(change)
                    diffs[call.id] = _unified_diff(change)
                    break
        return diffs

    def _relative(self, path: str) -> str:
        workspace = self.agent.workspace
        try:
            return (workspace / path).resolve().relative_to(workspace).as_posix()
        except (OSError, ValueError):
            return path

    def load_usage(self) -> None:
        """Give the agent what the session has spent so far (the status bar, /cost, /budget)."""
        if self.session_id is not None:
            self.agent.load_session(self.session_id)

    def sessions(self) -> list[SessionSummary]:
        """The stored sessions of this workspace, newest first."""
        store = self._store()
        try:
            return store.list_sessions(str(self.agent.workspace))
        finally:
            store.close()

    def undo(self, what: str = "", path: str = "") -> UndoResult:
        """Undo the last change, the last turn's (`what="turn"`) or a file's last change."""
        store = self._store()
        try:
            # refused while another process runs in the workspace (this app's own runs share it)
            with WorkspaceLock(self.agent.workspace, purpose="undo"):
                tracker = FileChangeTracker(store, self._require_session(), self.agent.workspace)
                if what == "turn":
                    return tracker.undo_turn()
                if what == "file":
                    return tracker.undo_file(path)
                return tracker.undo_last()
        finally:
            store.close()

    def diff(self) -> str:
        """The pending (not undone) changes of the session as one unified diff."""
        store = self._store()
        try:
            return FileChangeTracker(store, self._require_session(), self.agent.workspace).diff()
        finally:
            store.close()

    def prepare_fork(self, step: int) -> PendingFork:
        """Roll the workspace back to `step` of this session; the next message starts a new
        session from the first `step` steps."""
        store = self._store()
        try:
            parent = self._require_session()
            plan = prepare_fork(store, parent, step, into=None, in_place=True, force=False)
        finally:
            store.close()
        self.fork = PendingFork(parent, step, list(plan.history))
        return self.fork

    def _require_session(self) -> str:
        if self.session_id is None:
            raise ValueError("no session yet: send a message first")
        return self.session_id

    @property
    def workspace(self) -> Path:
        return self.agent.workspace


def _unified_diff(change: FileChange) -> str:
    before, after = change.before, change.after
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"a/{change.path}",
        tofile="/dev/null" if after is None else f"b/{change.path}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
