"""`finish`: the model's explicit signal that the task is done."""

from __future__ import annotations

import dataclasses

from pydantic import ConfigDict, Field

from journeyman.core.messages import ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, ok
from journeyman.tools.context import ToolContext


class FinishArgs(ToolArgs):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    summary: str = Field(
        min_length=1,
        description="What was done and how it was verified, for the user; mention anything "
        "left undone.",
    )
    """Final report for the user: what changed, how it was checked, what is left."""


class FinishTool(BaseTool):
    name = "finish"
    description = (
        "Call once the task is complete and verified, with a short summary for the user. "
        "This ends the run: call it alone, after every other tool call has returned."
    )
    args_model = FinishArgs
    read_only = True
    kind = ToolKind.FINISH

    async def execute(self, args: FinishArgs, ctx: ToolContext) -> ToolResult:
        return dataclasses.replace(ok(self.name, args.summary), terminate=True)
