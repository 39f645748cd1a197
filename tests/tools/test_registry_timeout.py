"""A tool may bring its own timeout (`timeout_s`) instead of the run's per-call one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from journeyman.core.messages import ToolCall
from journeyman.tools.base import ToolArgs, ok
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
