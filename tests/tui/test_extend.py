"""`/extend` typed in the app's prompt: its dialog answers to y and n, closes by itself after
60 s without an answer, and never leaves the app deaf to keys (it used to wait on the very
message queue that should have delivered the answer)."""

from __future__ import annotations

from pathlib import Path

from journeyman.tools.builtin import default_tools
from journeyman.tui.app import ChatApp
from journeyman.tui.dialogs import BudgetDialog
from journeyman.tui.widgets import Note
from tests.fakes.agents import echo, finish, spend_turn
from tests.tui.harness import ManualClock, finish_turn, scripted_app, submit
from tests.tui.test_app import wait_for_screen

FINISH = next(t for t in default_tools() if t.name == "finish")


def notes(app: ChatApp) -> str:
    return "\n".join(str(note.render()) for note in app.query(Note))


def extend_app(tmp_path: Path, clock: ManualClock, script: list | None = None) -> ChatApp:
    """An app with a 1,000-token budget whose extension adds half of it."""
    app, _ = scripted_app(
        tmp_path, script or [], clock=clock, tools=[echo, FINISH], max_total_tokens=1000
    )
    return app


async def test_y_grants_an_extension_asked_for_with_extend_and_the_next_message_has_it(
    tmp_path: Path,
) -> None:
    script = [
        finish("first message done"),
        # 1,020 tokens in one turn: over the first budget (1,000), and within the extended one
        # (1,500) with room for the closing call's bound (its whole prompt at a token a byte)
        spend_turn(("echo", "a"), tokens=1020),
        finish("within the extended budget"),
    ]
    app = extend_app(tmp_path, ManualClock(), script)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "hello")
        await finish_turn(pilot)
        await submit(pilot, "/extend")
        dialog = await wait_for_screen(pilot, BudgetDialog)
        assert "+500 tokens" in "\n".join(str(s.render()) for s in dialog.query("Static"))
        await pilot.press("y")
        await pilot.pause()
        assert not isinstance(app.screen, BudgetDialog)
        assert "budget extension granted" in notes(app)
        assert app.agent.economics.limits.max_total_tokens == 1500
        # the follow-up restores the session's stored limits: the grant must survive that
        await submit(pilot, "spend a little more than the first budget")
        assert app.turn is not None
        for _ in range(500):
            if app.turn.done() or isinstance(app.screen, BudgetDialog):
                break
            await pilot.pause(0.01)
        assert not isinstance(app.screen, BudgetDialog), "the budget gate asked again"
        await finish_turn(pilot)
        second = app.results[1]
        assert second.success, second.error
        assert second.final_text == "within the extended budget"
        assert app.agent.economics.limits.max_total_tokens == 1500
        assert app.agent.economics.extensions_granted == 1


async def test_n_declines_an_extension_asked_for_with_extend(tmp_path: Path) -> None:
    app = extend_app(tmp_path, ManualClock())
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "/extend")
        await wait_for_screen(pilot, BudgetDialog)
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, BudgetDialog)
        assert "budget extension denied" in notes(app)
        await submit(pilot, "/budget")  # the prompt takes commands again
        assert "extensions granted 0 of" in notes(app)
    assert app.agent.economics.limits.max_total_tokens == 1000


async def test_an_unanswered_extend_closes_after_60_seconds_and_the_app_still_quits(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    app = extend_app(tmp_path, clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "/extend")
        dialog = await wait_for_screen(pilot, BudgetDialog)
        clock.advance(59)
        await pilot.pause(0.3)
        assert app.screen is dialog
        clock.advance(2)
        for _ in range(300):  # the dialog's own timer closes it
            if "budget extension denied" in notes(app):
                break
            await pilot.pause(0.01)
        assert "budget extension denied" in notes(app)
        assert app.screen is not dialog
        await submit(pilot, "/cost")
        assert "0 model call(s)" in notes(app)
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert not app.is_running
    assert app.agent.economics.limits.max_total_tokens == 1000


async def test_ctrl_c_closes_the_extend_dialog_and_ctrl_d_quits_with_it_open(
    tmp_path: Path,
) -> None:
    app = extend_app(tmp_path, ManualClock())
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "/extend")
        await wait_for_screen(pilot, BudgetDialog)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not isinstance(app.screen, BudgetDialog)
        assert "/extend cancelled: nothing changed" in notes(app)
        app.clock.advance(5)  # type: ignore[attr-defined]  # a later Ctrl-C is a first press
        await submit(pilot, "/extend")
        await wait_for_screen(pilot, BudgetDialog)
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert not app.is_running
    assert app.agent.economics.limits.max_total_tokens == 1000
    assert app.agent.economics.extensions_granted == 0
