"""`note`: the model keeps something in the phased mode's structured memory.

The tool itself only acknowledges the note; the phased mode reads the call's arguments after
it ran and records them (`PLAN` keeps the plan, the others go to the long-term memory), so
what was noted comes back in every later context pack, even once the conversation that said
it has been compacted away.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import ConfigDict, Field

from journeyman.core.messages import ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, ok
from journeyman.tools.context import ToolContext


class NoteKind(StrEnum):
    PLAN = "plan"
    """Replaces the plan: one step per line."""
    TASK = "task"
    """Replaces the summary of what the task asks for."""
    DECISION = "decision"
    LEARNING = "learning"
    MILESTONE = "milestone"


class NoteArgs(ToolArgs):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    kind: NoteKind = Field(
        description="plan (replaces your plan, one step per line), task (what the task asks "
        "for, in a sentence or two), decision, learning, or milestone (something done)."
    )
    """What the note is; decides where in the memory it is kept."""
    text: str = Field(min_length=1, description="The note itself, short and specific.")
    """The note's text."""
    reason: str = Field(default="", description="Why, for a decision; optional.")
    """Why a decision was taken; ignored for the other kinds."""


class NoteTool(BaseTool):
    name = "note"
    description = (
        "Keep a plan, a task summary, a decision, a learning or a milestone in your memory. "
        "Notes are shown to you again at every step, also after old turns are compacted."
    )
    args_model = NoteArgs
    parallel_safe = True
    kind = ToolKind.READ

    async def execute(self, args: NoteArgs, ctx: ToolContext) -> ToolResult:
        return ok(self.name, f"noted ({args.kind.value})")
