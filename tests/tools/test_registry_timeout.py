"""A tool may bring its own timeout (`timeout_s`) instead of the run's per-call one; each call
gets its own copy of the turn's context."""

from __future__ import annotations

import asyncio
from pathlib import Path

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ok
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry


class NoArgs(ToolArgs):
    pass


class Patient:
    name = "patient"
    description = "Waits a little."
    args_model = NoArgs
    read_only = True
    parallel_safe = True
    kind = "read"
    permission_arg = None

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s

    async def execute(self, args: NoArgs, ctx: ToolContext):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.2)
        return ok(self.name, "waited")


async def test_own_timeout_replaces_the_runs(tmp_path: Path) -> None:
    call = ToolCall("c1", "patient", {})
    ctx = ToolContext(tmp_path)
    patient = await ToolRegistry([Patient(30.0)]).execute(call, ctx, timeout=0.01)  # type: ignore[list-item]
    assert not patient.is_error and patient.content == "waited"
    hurried = await ToolRegistry([Patient(None)]).execute(call, ctx, timeout=0.01)  # type: ignore[list-item]
    assert hurried.is_error and "timed out" in hurried.content


async def test_each_call_gets_its_own_context_with_its_id(tmp_path: Path) -> None:
    """The registry hands a tool a copy of the turn's context carrying the call's id; the
    turn's context, shared by its calls, is left as it was."""
    seen: list[ToolContext] = []

    class Recorder(BaseTool):
        name = "recorder"
        description = "records its context"
        args_model = NoArgs

        async def execute(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
            seen.append(ctx)
            return ok(self.name, "done")

    registry = ToolRegistry([Recorder()])
    turn = ToolContext(workspace=tmp_path, session_id="s")
    for call_id in ("a", "b"):
        await registry.execute(ToolCall(call_id, "recorder", {}), turn, 5.0)
    assert [ctx.call_id for ctx in seen] == ["a", "b"]
    assert turn.call_id == "" and all(ctx is not turn for ctx in seen)
    assert seen[0].workspace == turn.workspace == tmp_path.resolve()
