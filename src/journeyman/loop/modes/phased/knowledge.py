"""What the phased mode knows about the workspace and keeps in its structured memory: the
verification command, the workspace index, the context pack builder, and the record of the
model's replies, its plan and notes, and of the actions it took.

The plan and the task summary come from the first PLAN reply that lays out steps (a numbered
or bulleted list; the words before the list are the task summary), or from a `note` call of
kind plan or task, which also revises them later. Decisions, learnings and milestones come
from `note` calls. Raw replies go to the debug-only record, never shown to the model."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path

from journeyman.context.index import WorkspaceIndexer
from journeyman.context.memory import MemoryFormatter, MemorySettings, PhasedState
from journeyman.context.pack import ContextPackBuilder, PackSettings
from journeyman.context.profile import ProjectProfile, detect_profile
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.core.text import clip, head_and_tail
from journeyman.tools.base import ToolKind
from journeyman.tools.notes import NoteArgs, NoteKind, NoteTool

CHANGING_KINDS = frozenset({ToolKind.EDIT, ToolKind.COMMAND, ToolKind.OTHER})
"""Tools whose calls are remembered as attempts (they may change something)."""
NOTE_TOOL = NoteTool.name
MAX_PLAN_STEPS = 15
MAX_STEP_CHARS = 300
MAX_TASK_SUMMARY_CHARS = 600
_PLAN_STEP = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*\u2022])\s+(\S.*)$")
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
        if self._builder is None or self._builder.goal != goal:  # a follow-up changes it
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


def remember_response(memory: PhasedState, text: str, settings: MemorySettings) -> None:
    """Keep the model's reply in the debug record (never shown to the model)."""
    memory.record_model_response(text)
    debug = memory.memory.debug
    keep = settings.keep_model_responses
    if len(debug.model_responses) > keep:
        debug.model_responses = debug.model_responses[-keep:] if keep else ()


def log_decision(memory: PhasedState, text: str, settings: MemorySettings) -> None:
    """Log a decision of the workflow in the debug record (never shown to the model)."""
    memory.record_step_decision(text)
    debug = memory.memory.debug
    keep = settings.keep_step_decisions
    if len(debug.decisions) > keep:
        debug.decisions = debug.decisions[-keep:] if keep else ()


def plan_from_reply(text: str) -> tuple[list[str], str]:
    """The steps of a plan laid out in a reply (its numbered or bulleted lines; at least two)
    and the text before them; ([], "") when the reply lays out no plan."""
    lines = text.splitlines()
    steps: list[str] = []
    first = None
    for number, line in enumerate(lines):
        match = _PLAN_STEP.match(line)
        if match:
            first = number if first is None else first
            steps.append(clip(match.group(1).strip(), MAX_STEP_CHARS))
    if len(steps) < 2 or first is None:
        return [], ""
    before = " ".join(line.strip() for line in lines[:first] if line.strip())
    return steps[:MAX_PLAN_STEPS], clip(before, MAX_TASK_SUMMARY_CHARS)


def remember_plan(memory: PhasedState, text: str) -> bool:
    """Keep the plan a PLAN reply lays out, when none is recorded yet; True when one was."""
    long_term = memory.memory.long_term
    if long_term.plan:
        return False
    steps, summary = plan_from_reply(text)
    if not steps:
        return False
    memory.set_plan(steps)
    if summary and not long_term.task_summary:
        memory.set_task_summary(summary)
    return True


def remember_note(memory: PhasedState, call: ToolCall, result: ToolResult) -> None:
    """Keep what a successful `note` call says in the long-term memory."""
    if call.name != NOTE_TOOL or result.is_error:
        return
    try:
        note = NoteArgs.model_validate(call.arguments)
    except ValueError:  # the tool accepted it, so this is only a safety net
        return
    if note.kind is NoteKind.PLAN:
        memory.set_plan(note.text)
    elif note.kind is NoteKind.TASK:
        memory.set_task_summary(note.text)
    elif note.kind is NoteKind.DECISION:
        memory.add_decision(note.text, note.reason)
    elif note.kind is NoteKind.LEARNING:
        memory.add_learning(note.text)
    else:
        memory.add_milestone(note.text)


def remember_actions(
    memory: PhasedState,
    settings: MemorySettings,
    workspace: Path,
    done: Sequence[tuple[ToolCall, ToolResult, ToolKind | None]],
    added: Sequence[str],
    changed: Sequence[str],
) -> None:
    """Record an ACT step's calls, the attempts among them, and the files they touched."""
    limit = settings.tool_output_chars * 2
    for call, result, kind in done:
        if call.name == NOTE_TOOL:  # kept as a note, not as an action
            remember_note(memory, call, result)
            continue
        arguments = json.dumps(call.arguments, sort_keys=True, default=str)
        memory.record_tool_result(
            call.name,
            arguments,
            head_and_tail(result.content, limit, note="characters left out"),
            is_error=result.is_error,
        )
        if kind in CHANGING_KINDS:
            first = result.content.strip().splitlines()[0] if result.content.strip() else ""
            memory.record_attempt(
                f"{call.name} {clip(arguments, 160)}", first[:200], success=not result.is_error
            )
    for path in added:
        memory.record_created_file(path)
    keep = settings.file_content_chars
    for path in (*added, *changed):
        content = _read_small(workspace / path)
        if content is not None:
            memory.record_file_content(path, content[:keep])


def _read_small(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_READ:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
