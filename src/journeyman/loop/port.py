"""What a mode may ask of the loop during its turn: the narrow port modes receive instead of
the kernel. A test can drive a mode with a small fake that implements it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from journeyman.core.events import Event
from journeyman.core.messages import Message, ToolCall, ToolResult
from journeyman.economics.loop_detector import LoopCheck
from journeyman.loop.state import LoopState
from journeyman.loop.verdict import CheckRun
from journeyman.providers.base import ModelResponse
from journeyman.session.store import SessionStore
from journeyman.session.undo import FileChangeTracker
from journeyman.tools.base import ToolKind

MAX_DIFF_CHARS = 8_000
"""The pending diff a mode is given (the context pack may cut it further)."""


class TurnPort(Protocol):
    @property
    def workspace(self) -> Path:
        """The folder the run works in."""
        ...

    async def call_model(
        self, state: LoopState, *, tools_enabled: bool = True, extra: Sequence[Message] = ()
    ) -> ModelResponse:
        """One model call with the run's history (plus `extra`), accounted and reported."""
        ...

    async def run_tools(self, state: LoopState, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run the calls through permissions, hooks and timeouts; results in the calls' order."""
        ...

    def emit(self, event: Event) -> None: ...

    def tool_kind(self, call: ToolCall) -> ToolKind | None:
        """What the called tool declares it does; None for an unknown tool."""
        ...

    def record_repetition(
        self, name: str, arguments: Mapping[str, Any], result_digest: str
    ) -> LoopCheck:
        """Count an action the observer cannot see (e.g. a check run by the mode itself)."""
        ...

    def forget_repetitions(self) -> None:
        """Start counting repetitions afresh (after the mode rebuilt the model's context)."""
        ...

    def pending_diff(self, session_id: str) -> str:
        """The session's file changes not undone yet, as a unified diff."""
        ...

    async def check_command(self) -> str | None:
        """The harness's check command (configured, else detected and runnable), or None."""
        ...

    async def summarise(self, state: LoopState, transcript: str) -> str:
        """A summary of `transcript` by the run's model, accounted in the run's usage; "" when
        the call failed (a summary is never essential)."""
        ...

    async def run_check(self, state: LoopState, command: str) -> CheckRun:
        """Run the check under its own timeout, as the harness does before accepting success."""
        ...


def pending_diff(store: SessionStore, session_id: str, workspace: Path) -> str:
    """The session's changes not undone yet, as a unified diff (from the undo journal)."""
    diff = FileChangeTracker(store, session_id, workspace).diff()
    if len(diff) <= MAX_DIFF_CHARS:
        return diff
    more = len(diff) - MAX_DIFF_CHARS
    return diff[:MAX_DIFF_CHARS] + f"\n[... {more:,} more characters of diff]"
