"""What the phased mode knows about the workspace and keeps in its structured memory: the
verification command, the workspace index, the context pack builder, and the record of the
model's replies and of the actions it took."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from journeyman.context.index import WorkspaceIndexer
from journeyman.context.memory import AgentState, MemoryFormatter, MemorySettings
from journeyman.context.pack import ContextPackBuilder, PackSettings
from journeyman.context.profile import ProjectProfile, detect_profile
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.tools.base import ToolKind

CHANGING_KINDS = frozenset({ToolKind.EDIT, ToolKind.COMMAND, ToolKind.OTHER})
"""Tools whose calls are remembered as attempts (they may change something)."""
MAX_FILE_READ = 200_000
"""Bytes of a changed file read to remember its content (larger files are not remembered)."""


class WorkspaceKnowledge:
    """The project profile, the workspace index and the pack builder, made on first use."""

    def __init__(
        self, configured_command: str | None, pack: PackSettings, formatter: MemoryFormatter
    ) -> None:
        self.configured_command = (configured_command or "").strip() or None
        """The check command the user gave; None lets the harness choose (see `loop.verdict`)."""
        self.pack = pack
        self.formatter = formatter
        self._profile: ProjectProfile | None = None
        self._index: WorkspaceIndexer | None = None
        self._builder: ContextPackBuilder | None = None

    async def index(self, workspace: Path, *, refresh: bool) -> WorkspaceIndexer:
        """The index, built on first use and brought up to date when `refresh` asks."""
        if self._index is None:
            self._index = WorkspaceIndexer(workspace)
            await asyncio.to_thread(self._index.bootstrap)
        elif refresh:
            await asyncio.to_thread(self._index.refresh)
        return self._index

    def pack_builder(self, goal: str, workspace: Path) -> ContextPackBuilder:
        if self._builder is None:
            if self._profile is None:
                self._profile = detect_profile(workspace)
            self._builder = ContextPackBuilder(
                goal=goal,
                files=self._index,
                profile=self._profile,
                settings=self.pack,
                formatter=self.formatter,
            )
        return self._builder


def remember_response(memory: AgentState, text: str, settings: MemorySettings) -> None:
    """Keep the model's reply in the debug record (never shown to the model)."""
    memory.record_model_response(text)
    debug = memory.memory.debug
    keep = settings.keep_model_responses
    if len(debug.model_responses) > keep:
        debug.model_responses = debug.model_responses[-keep:] if keep else ()


def remember_actions(
    memory: AgentState,
    settings: MemorySettings,
    workspace: Path,
    done: Sequence[tuple[ToolCall, ToolResult, ToolKind | None]],
    added: Sequence[str],
    changed: Sequence[str],
) -> None:
    """Record an ACT step's calls, the attempts among them, and the files they touched."""
    limit = settings.tool_output_chars * 2
    for call, result, kind in done:
        arguments = json.dumps(call.arguments, sort_keys=True, default=str)
        memory.record_tool_result(
            call.name, arguments, _head_and_tail(result.content, limit), is_error=result.is_error
        )
        if kind in CHANGING_KINDS:
            first = result.content.strip().splitlines()[0] if result.content.strip() else ""
            memory.record_attempt(
                f"{call.name} {_short(arguments)}", first[:200], success=not result.is_error
            )
    for path in added:
        memory.record_created_file(path)
    keep = settings.file_content_chars
    for path in (*added, *changed):
        content = _read_small(workspace / path)
        if content is not None:
            memory.record_file_content(path, content[:keep])


def _head_and_tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit:,} characters left out ...]\n{text[-half:]}"


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read_small(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_READ:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
