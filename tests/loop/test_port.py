"""Modes see the loop only through the TurnPort: a small fake port is enough to drive them."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from journeyman.core.events import Event
from journeyman.core.messages import Message, Role, ToolCall, ToolResult, Usage
from journeyman.core.result import FinishReason
from journeyman.economics.loop_detector import LoopCheck, LoopDetector
from journeyman.loop.modes.plan_solve import PLAN_REQUEST, PlanSolveMode
from journeyman.loop.modes.react import ReactMode
from journeyman.loop.state import LoopState
from journeyman.providers.base import ModelResponse
from journeyman.tools.base import ToolKind

MODES = Path(__file__).parents[2] / "src" / "journeyman" / "loop" / "modes"


class FakePort:
    """Replies from a list; every tool call returns `ran <name>`."""

    def __init__(self, replies: list[ModelResponse], workspace: Path = Path(".")) -> None:
        self.replies, self.workspace = replies, workspace
        self.requests: list[bool] = []
        self.events: list[Event] = []
        self.loops = LoopDetector()

    async def call_model(
        self, state: LoopState, *, tools_enabled: bool = True, extra: Sequence[Message] = ()
    ) -> ModelResponse:
        self.requests.append(tools_enabled)
        return self.replies.pop(0)

    async def run_tools(self, state: LoopState, calls: Sequence[ToolCall]) -> list[ToolResult]:
        return [
            ToolResult(c.id, c.name, f"ran {c.name}", terminate=c.name == "finish") for c in calls
        ]

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def tool_kind(self, call: ToolCall) -> ToolKind | None:
        return ToolKind.FINISH if call.name == "finish" else ToolKind.READ

    def record_repetition(self, name: str, arguments: Mapping[str, Any], digest: str) -> LoopCheck:
        return self.loops.record(name, arguments, digest)

    def forget_repetitions(self) -> None:
        self.loops.reset()

    def pending_diff(self, session_id: str) -> str:
        return ""


def state() -> LoopState:
    return LoopState(task="t", session_id="s", messages=[Message.user("t")])


async def test_react_mode_runs_the_calls_and_reports_them_with_their_results() -> None:
    reply = ModelResponse("", (ToolCall("1", "look", {}), ToolCall("2", "finish", {})), Usage())
    port, run = FakePort([reply]), state()
    outcome = await ReactMode().iterate(run, port)
    assert [c.id for c in outcome.calls] == [r.call_id for r in outcome.results] == ["1", "2"]
    assert outcome.finish_reason is FinishReason.COMPLETED
    assert [m.role for m in run.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL]


async def test_plan_solve_plans_once_without_tools_then_reacts() -> None:
    port, run = (
        FakePort([ModelResponse("1. look", (), Usage()), ModelResponse("ok", (), Usage())]),
        state(),
    )
    mode = PlanSolveMode()
    await mode.iterate(run, port)
    second = await mode.iterate(run, port)
    assert port.requests == [False, True]
    assert sum(m.content == PLAN_REQUEST for m in run.messages) == 1
    assert second.finish_reason is FinishReason.ANSWERED


def test_no_mode_imports_the_kernel() -> None:
    for path in MODES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "journeyman.loop.kernel", path
            if isinstance(node, ast.Import):
                assert all(a.name != "journeyman.loop.kernel" for a in node.names), path
