"""Screenshots of the main screen, the approval dialog and the budget dialog at 80×24 and
160×48 (`pytest --snapshot-update` accepts a deliberate change; look at the SVGs first)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from journeyman.core import events as ev
from journeyman.core.messages import Usage
from journeyman.policy.permissions import PermissionMode, PermissionsConfig
from journeyman.tools.sandbox import SandboxKind
from journeyman.tui import conversation
from journeyman.tui.app import ChatApp
from journeyman.tui.dialogs import ApprovalDialog, BudgetDialog
from tests.fakes.agents import call, echo, fake_read, finish, spend_turn, turn
from tests.tui.harness import ManualClock, scripted_app, submit

SIZES = [(80, 24), (160, 48)]
LOCAL = SandboxKind.LOCAL
"""The sandbox the screenshots name in their welcome line, on any machine."""


@pytest.fixture(autouse=True)
def fixed_session_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(conversation, "new_session_id", lambda: "20260101-000000-snapshot")
    monkeypatch.setenv("HOME", str(tmp_path))  # the welcome line shows the workspace as ~/ws


def steady(app: ChatApp) -> ChatApp:
    """Tool durations vary from run to run: the screenshots show them all as 0.01 s."""
    shown = app.on_agent_event

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.ToolResultReceived):
            event = ev.ToolResultReceived(event.iteration, event.result, 0.01)
        shown(event)

    app.agent.on_event = on_event
    return app


def until(kind: type) -> Callable[[Any], Any]:
    async def run_before(pilot: Any) -> None:
        await submit(pilot, "please do it")
        for _ in range(500):
            if isinstance(pilot.app.screen, kind):
                break
            await pilot.pause(0.01)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    script = [
        turn(call("write_file", "w1", path="hello.py", content="print('hi')\n"), text="Writing."),
        finish("hello.py prints hi"),
    ]
    app, _ = scripted_app(tmp_path, script, sandbox=LOCAL)

    async def run_before(pilot: Any) -> None:
        await submit(pilot, "write hello.py")
        if pilot.app.turn is not None:
            await pilot.app.turn
        await pilot.pause()

    assert snap_compare(steady(app), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_approval_dialog(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "app.py").write_text("def add(a, b):\n    return a - b\n")
    edit = call(
        "edit_file", "e1", path="app.py", old_string="return a - b", new_string="return a + b"
    )
    permissions = PermissionsConfig(mode=PermissionMode.DEFAULT)
    app, _ = scripted_app(tmp_path, [turn(edit), finish()], permissions=permissions, sandbox=LOCAL)
    assert snap_compare(steady(app), terminal_size=size, run_before=until(ApprovalDialog))


@pytest.mark.parametrize("size", SIZES)
def test_budget_dialog(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    script = [
        spend_turn(("echo", "a"), tokens=0),
        # a prompt billed at 99 % of the budget: the extension question
        turn(call("echo", "c0-b", text="b"), usage=Usage(990, 0)),
        turn(text="wrapping up"),
    ]
    app, _ = scripted_app(
        tmp_path,
        script,
        clock=ManualClock(),
        tools=[echo, fake_read],
        max_total_tokens=1000,
        sandbox=LOCAL,
    )
    assert snap_compare(steady(app), terminal_size=size, run_before=until(BudgetDialog))
