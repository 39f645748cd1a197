"""The interactive app driven by Textual's Pilot: a conversation against the fake OpenAI server
and against scripted agents — streaming, tool cards, both dialogs, slash commands, Ctrl-C,
quitting and resuming."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button

from journeyman import Agent, AgentConfig
from journeyman.core import events as ev
from journeyman.core.lifecycle import AgentState
from journeyman.core.messages import Usage
from journeyman.core.result import FinishReason
from journeyman.loop.config import ModeName
from journeyman.loop.recorder import INTERRUPTED_NOTE
from journeyman.loop.run_options import RunOptions
from journeyman.policy.permissions import PermissionMode, PermissionsConfig
from journeyman.providers.factory import create_provider
from journeyman.tools.builtin import default_tools
from journeyman.tools.sandbox import SandboxKind
from journeyman.tui.app import ChatApp, shown_path
from journeyman.tui.conversation import AgentHooks
from journeyman.tui.dialogs import ApprovalDialog, BudgetDialog
from journeyman.tui.widgets import AssistantText, Note, StatusFacts, ToolCard, UserMessage
from tests.fakes.agents import Probe, call, finish, hang_at, spend_turn, turn, user_texts
from tests.fakes.long_patch import (
    ESCAPED_LINE,
    ESCAPED_NAME,
    HIDDEN_LINE,
    SETTINGS_TAIL,
    long_patch_workspace,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import CALC_TEST_COMMAND, calc_package, fix_add
from tests.fakes.script import reply
from tests.tui.harness import ManualClock, finish_turn, scripted_app, submit

ASK = PermissionsConfig(mode=PermissionMode.DEFAULT)


def notes(app: ChatApp) -> str:
    return "\n".join(str(note.render()) for note in app.query(Note))


def status_parts(app: ChatApp) -> list[str]:
    """The status bar's segments, whichever lines they were wrapped to."""
    return re.split(r" \| |\n", str(app.status.render()))


async def wait_for_screen(pilot: Any, kind: type) -> Any:
    for _ in range(500):
        if isinstance(pilot.app.screen, kind):
            return pilot.app.screen
        await pilot.pause(0.01)
    raise AssertionError(f"no {kind.__name__} opened")


async def test_streamed_text_and_tool_cards_from_the_openai_server(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    fake_openai.enqueue(
        reply(
            "I will write the file now.",
            tool_calls=[("write_file", {"path": "a.txt", "content": "one\n"})],
            chunk_size=3,
        ),
        reply(tool_calls=[("finish", {"summary": "a.txt written"})]),
    )
    seen: list[ev.Event] = []

    def build(hooks: AgentHooks) -> Agent:
        def on_event(event: ev.Event) -> None:
            seen.append(event)
            hooks.on_event(event)

        provider = create_provider("openai", "gpt-4.1-mini", fake_openai.base_url, api_key="sk-t")
        return Agent(
            provider,
            workspace=workspace,
            config=AgentConfig(
                session_dir=tmp_path / "s", stream=True, verify=False, sandbox=SandboxKind.LOCAL
            ),
            on_event=on_event,
            approver=hooks.extension_approver,
            permission_approver=hooks.permission_approver,
        )

    app = ChatApp(build, clock=ManualClock())
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write a.txt")
        await finish_turn(pilot)
        deltas = [e for e in seen if isinstance(e, ev.TextDelta)]
        assert len(deltas) > 1  # the text arrived in pieces
        texts = [w.text for w in app.query(AssistantText)]
        assert texts[0] == "I will write the file now."
        titles = [str(card.title) for card in app.query(ToolCard)]
        assert titles[0].startswith("✓ ok write_file a.txt")
        assert titles[1].startswith("✓ ok finish")
        card = app.query(ToolCard).first()
        assert card.collapsed
        card.collapsed = False  # expands to the diff and the full result
        await pilot.pause()
        body = str(card.body.render())
        assert "+one" in body and "created a.txt (1 lines)" in body
        status = str(app.status.render())
        assert "openai:gpt-4.1-mini" in status and "IDLE" in status
        assert f"session {app.results[0].session_id}" in status
    assert (workspace / "a.txt").read_text() == "one\n"


async def test_an_edit_is_approved_and_another_denied(tmp_path: Path) -> None:
    script = [
        turn(call("write_file", "w1", path="a.txt", content="one\n")),
        turn(call("write_file", "w2", path="b.txt", content="two\n")),
        finish("tried both"),
    ]
    app, _ = scripted_app(tmp_path, script, permissions=ASK)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write two files")
        dialog = await wait_for_screen(pilot, ApprovalDialog)
        assert app.agent.lifecycle.state is AgentState.PAUSED
        assert dialog.request.tool_name == "write_file"
        shown = "\n".join(line.plain for line in dialog.change.lines)
        assert "+one" in shown and "create a.txt" in shown
        await pilot.press("y")
        dialog = await wait_for_screen(pilot, ApprovalDialog)
        assert dialog.request.args["path"] == "b.txt"
        await pilot.press("n")
        await finish_turn(pilot)
        assert "write_file: allow" in notes(app) and "write_file: deny" in notes(app)
    workspace = tmp_path / "ws"
    assert (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()


def budget_script() -> list[Any]:
    return [
        spend_turn(("echo", "a"), tokens=0),
        # a prompt billed at 99 % of the budget: the extension question
        turn(call("echo", "c0-b", text="b"), usage=Usage(990, 0)),
        spend_turn(("echo", "c"), tokens=10),
        turn(text="wrapping up"),
    ]


def budget_app(tmp_path: Path, clock: ManualClock) -> ChatApp:
    from tests.fakes.agents import echo, fake_read

    app, _ = scripted_app(
        tmp_path, budget_script(), clock=clock, tools=[echo, fake_read], max_total_tokens=1000
    )
    return app


async def test_the_budget_dialog_denies_when_nobody_answers_in_60_seconds(tmp_path: Path) -> None:
    clock = ManualClock()
    app = budget_app(tmp_path, clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "spend")
        dialog = await wait_for_screen(pilot, BudgetDialog)
        assert app.agent.lifecycle.state is AgentState.PAUSED
        clock.advance(59)
        await pilot.pause(0.3)
        assert app.screen is dialog  # still waiting at 59 s
        clock.advance(2)
        await pilot.pause(0.3)
        assert app.screen is not dialog
        await finish_turn(pilot)
        assert "budget extension denied" in notes(app)
    assert app.agent.economics.extensions_granted == 0
    assert app.agent.economics.limits.max_total_tokens == 1000


async def test_y_grants_the_budget_extension(tmp_path: Path) -> None:
    app = budget_app(tmp_path, ManualClock())
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "spend")
        await wait_for_screen(pilot, BudgetDialog)
        await pilot.press("y")
        await finish_turn(pilot)
        assert "budget extension granted" in notes(app)
    assert app.agent.economics.extensions_granted == 1
    assert app.agent.economics.limits.max_total_tokens == 1500


async def test_diff_undo_and_a_follow_up_in_the_same_session(tmp_path: Path) -> None:
    script = [
        turn(call("write_file", "w1", path="a.txt", content="one\n")),
        finish("wrote a"),
        finish("nothing more to do"),
    ]
    app, providers = scripted_app(tmp_path, script)
    workspace = tmp_path / "ws"
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write a.txt")
        await finish_turn(pilot)
        await submit(pilot, "/diff")
        assert "+one" in notes(app)
        await submit(pilot, "/undo")
        assert "deleted a.txt" in notes(app)
        assert not (workspace / "a.txt").exists()
        await submit(pilot, "anything else?")
        await finish_turn(pilot)
        first, second = app.results
        assert second.session_id == first.session_id
        assert second.final_text == "nothing more to do"
        users = [m.content for m in providers[0].requests[-1].messages if m.role.value == "user"]
        assert users[0] == "write a.txt" and users[-1] == "anything else?"


async def test_unknown_commands_say_what_exists_and_commands_complete(tmp_path: Path) -> None:
    app, _ = scripted_app(tmp_path, [])
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "/frobnicate")
        assert "unknown command /frobnicate" in notes(app) and "/undo" in notes(app)
        await pilot.press("/", "u", "n", "d")
        await pilot.pause()
        await pilot.press("right")  # accepts the suggestion
        assert app.query_one("#prompt").value == "/undo"
        app.query_one("#prompt").value = ""
        await submit(pilot, "/help")
        assert "/fork STEP" in notes(app)
        await submit(pilot, "/mode plan")
        assert app.agent.config.mode is ModeName.PLAN_SOLVE
        await submit(pilot, "/undo")
        assert "no session yet" in notes(app)


async def test_ctrl_c_cancels_the_turn_and_the_session_goes_on(tmp_path: Path) -> None:
    script = [turn(call("slow", "s1", text="x")), finish("after the cancel")]
    clock = ManualClock()
    app, _ = scripted_app(tmp_path, script, clock=clock, tools=Probe().tools())
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "be slow")
        for _ in range(200):
            if app.query(ToolCard):
                break
            await pilot.pause(0.01)
        await pilot.press("ctrl+c")
        await finish_turn(pilot)
        assert app.results[0].finish_reason is FinishReason.CANCELLED
        assert "cancelled; the session is saved" in notes(app)
        # the interrupted call and the bar say it was cancelled, not running, not an error
        assert str(app.query(ToolCard).first().title).startswith("■ cancelled slow")
        assert "CANCELLED" in status_parts(app) and "ERROR" not in status_parts(app)
        clock.advance(5)  # a later Ctrl-C is a new first press
        await submit(pilot, "go on")
        await finish_turn(pilot)
        assert "IDLE" in status_parts(app)
        assert app.results[1].final_text == "after the cancel"
        assert app.results[1].session_id == app.results[0].session_id
        await pilot.press("ctrl+c")
        assert app.is_running
        await pilot.press("ctrl+c")  # the second within 2 s quits
        await pilot.pause()
    assert not app.is_running


async def test_quitting_mid_turn_loses_nothing_and_resume_shows_the_history(
    tmp_path: Path,
) -> None:
    script = [
        turn(call("echo", "e1", text="first"), text="Echoing."),
        turn(call("slow", "s1", text="x")),
    ]
    app, _ = scripted_app(tmp_path, script, tools=Probe().tools())
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "start something long")
        for _ in range(300):
            if any(card.call.name == "slow" for card in app.query(ToolCard)):
                break
            await pilot.pause(0.01)
        await pilot.press("ctrl+d")  # empty prompt: quit, mid-turn
        await pilot.pause()
    session = app.conversation.session_id
    assert session is not None and app.results[0].finish_reason is FinishReason.CANCELLED

    again, providers = scripted_app(
        tmp_path, [finish("picked up")], session_id=session, tools=Probe().tools()
    )
    async with again.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        shown = [w.render() for w in again.query(UserMessage)]
        assert "> start something long" in [str(s) for s in shown]
        assert "Echoing." in [w.text for w in again.query(AssistantText)]
        await submit(pilot, "finish it")
        await finish_turn(pilot)
        assert again.results[0].session_id == session
        assert again.results[0].final_text == "picked up"
    contents = [m.content for m in providers[0].requests[0].messages]
    assert "start something long" in contents and "finish it" in contents


async def test_a_follow_up_cancelled_before_any_reply_is_kept(tmp_path: Path) -> None:
    clock = ManualClock()
    app, providers = scripted_app(tmp_path, [finish("first"), finish("second")], clock=clock)
    hanging = hang_at(providers[0], 1)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "quick one")
        await finish_turn(pilot)
        await submit(pilot, "slow one")
        await hanging.wait()
        await pilot.press("ctrl+c")
        await finish_turn(pilot)
        assert app.results[1].finish_reason is FinishReason.CANCELLED
        clock.advance(5)
        await submit(pilot, "new one")
        await finish_turn(pilot)
        assert app.results[2].final_text == "second"
    session = app.conversation.session_id
    asked = user_texts(providers[0].requests[2])
    assert asked == ["quick one", "slow one", INTERRUPTED_NOTE, "new one"]

    again, _ = scripted_app(tmp_path, [], session_id=session)
    async with again.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        shown = [str(w.render()) for w in again.query(UserMessage)]
    assert shown == ["> quick one", "> slow one", "> new one"]


async def test_a_resumed_session_shows_what_it_spent_and_its_tool_cards(tmp_path: Path) -> None:
    write = call("write_file", "w1", path="a.txt", content="one\n")
    app, _ = scripted_app(tmp_path, [turn(write, usage=Usage(120, 30)), finish("wrote a")])
    async with app.run_test(size=(120, 30)) as pilot:
        await submit(pilot, "write a.txt")
        await finish_turn(pilot)
        spent = status_parts(app)[1:3]
        live_card = str(app.query(ToolCard).first().title)
    assert spent[0] != "in 0 out 0 cache 0"

    again, _ = scripted_app(tmp_path, [], session_id=app.results[0].session_id)
    async with again.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert status_parts(again)[1:3] == spent
        assert status_parts(again)[3] == "budget 4% NONE"  # 2 of 50 turns
        await submit(pilot, "/cost")
        assert "2 model call(s)" in notes(again)
        await submit(pilot, "/budget")
        assert "turns 2 of" in notes(again)
        cards = list(again.query(ToolCard))
        titles = [str(card.title) for card in cards]
        body = str(cards[0].body.render())
    assert titles[0] == live_card and titles[0].startswith("✓ ok write_file a.txt")
    assert "+one" in body and "(no change)" not in body  # the edit as it was made
    assert titles[1].startswith("✓ ok finish")


async def test_the_transcript_keeps_a_bounded_number_of_widgets(tmp_path: Path) -> None:
    script = [finish(f"answer {n}", cid=f"f{n}") for n in range(30)]
    app, _ = scripted_app(tmp_path, script)
    app.transcript.max_items = 20
    async with app.run_test(size=(100, 30)) as pilot:
        for n in range(30):
            await submit(pilot, f"question {n}")
            await finish_turn(pilot)
        assert len(app.transcript.children) <= 21
        assert "earlier items are not shown" in notes(app)
        assert app.results[-1].final_text == "answer 29"


async def test_a_command_card_shows_the_command_and_its_exit_code(tmp_path: Path) -> None:
    script = [turn(call("run_command", "r1", command="echo hi; exit 3")), finish("ran it")]
    app, _ = scripted_app(tmp_path, script, sandbox=SandboxKind.LOCAL)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "run it")
        await finish_turn(pilot)
        card = app.query(ToolCard).first()
        assert str(card.title).startswith("✗ exit 3 run_command echo hi; exit 3")
        body = str(card.body.render())
        assert "$ echo hi; exit 3" in body and "exit code 3" in body and "hi" in body


async def test_session_commands_list_resume_and_fork(tmp_path: Path) -> None:
    script = [
        turn(call("write_file", "w1", path="a.txt", content="one\n")),
        finish("wrote a"),
        finish("forked and done"),
    ]
    app, _ = scripted_app(tmp_path, script)
    workspace = tmp_path / "ws"
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write a.txt")
        await finish_turn(pilot)
        first = app.results[0].session_id
        await submit(pilot, "/sessions")
        assert first in notes(app)
        await submit(pilot, "/cost")
        assert "2 model call(s)" in notes(app)
        await submit(pilot, "/budget")
        assert "extensions granted 0 of 3" in notes(app)
        await submit(pilot, "/resume nosuch")
        assert "no session 'nosuch'" in notes(app)
        await submit(pilot, f"/resume {first[:15]}")
        assert app.conversation.session_id == first
        assert "> write a.txt" in [str(w.render()) for w in app.query(UserMessage)]
        await submit(pilot, "/fork 0")
        assert "forked" in notes(app)
        assert not (workspace / "a.txt").exists()  # rolled back to step 0
        await submit(pilot, "again, differently")
        await finish_turn(pilot)
        forked = app.results[-1]
        assert forked.session_id != first and forked.parent_session_id == first


async def test_plan_mode_is_read_only_until_the_plan_is_approved(tmp_path: Path) -> None:
    script = [
        turn(call("write_file", "w1", path="a.txt", content="one\n")),
        finish("planned"),
        turn(call("write_file", "w2", path="a.txt", content="one\n")),
        finish("done"),
    ]
    app, _ = scripted_app(
        tmp_path, script, permissions=PermissionsConfig(mode=PermissionMode.TRUSTED)
    )
    workspace = tmp_path / "ws"
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "/plan")
        assert "read-only until you approve" in notes(app)
        await submit(pilot, "plan it")
        await finish_turn(pilot)
        assert not (workspace / "a.txt").exists()
        await submit(pilot, "/plan off")
        assert "plan approved" in notes(app)
        await submit(pilot, "now do it")
        await finish_turn(pilot)
    assert (workspace / "a.txt").read_text() == "one\n"


async def test_plan_off_approves_a_plan_mode_the_app_did_not_turn_on(tmp_path: Path) -> None:
    """A session reopened in plan mode (or `chat --permission-mode plan`) has no mode from
    before /plan: /plan off goes to the default one, and /plan says plan mode is on."""
    app, _ = scripted_app(tmp_path, [], permissions=PermissionsConfig(mode=PermissionMode.PLAN))
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "/plan")
        assert "plan mode is already on" in notes(app)
        await submit(pilot, "/plan off")
        assert "plan approved" in notes(app) and "(default)" in notes(app)
        assert app.agent.config.permissions is not None
        assert app.agent.config.permissions.mode is PermissionMode.DEFAULT
        await submit(pilot, "/plan off")
        assert "plan mode is not on" in notes(app)


async def test_servers_start_once_for_the_app_and_stop_when_it_quits(tmp_path: Path) -> None:
    app, _ = scripted_app(tmp_path, [finish("one"), finish("two")])
    log: list[str] = []

    @contextlib.asynccontextmanager
    async def connected() -> AsyncIterator[list[Any]]:
        log.append("start")
        app.agent._connected_registry = app.agent.registry
        try:
            yield []
        finally:
            app.agent._connected_registry = None
            log.append("stop")

    app.agent.lsp = True
    app.agent.connected = connected  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "first")
        await finish_turn(pilot)
        await submit(pilot, "second")
        await finish_turn(pilot)
        assert log == ["start"]
        await pilot.press("ctrl+d")
        await pilot.pause()
    assert log == ["start", "stop"]
    assert [r.final_text for r in app.results] == ["one", "two"]


async def test_always_allows_the_same_call_without_asking_again(tmp_path: Path) -> None:
    write = call("write_file", "w1", path="a.txt", content="one\n")
    again = call("write_file", "w2", path="a.txt", content="two\n")
    app, _ = scripted_app(tmp_path, [turn(write), turn(again), finish()], permissions=ASK)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write a.txt twice")
        await wait_for_screen(pilot, ApprovalDialog)
        await pilot.press("a")
        await finish_turn(pilot)
        assert notes(app).count("write_file: always") == 1
        assert "write_file: allow" not in notes(app)  # the second write was not asked about
    assert (tmp_path / "ws" / "a.txt").read_text() == "two\n"


async def test_compact_shrinks_the_history_the_next_message_sends(tmp_path: Path) -> None:
    from tests.loop.test_requested_compaction import long_session_script, summary, tools

    script = long_session_script(summary, finish("after compacting", cid="f2"))
    app, providers = scripted_app(tmp_path, script, tools=tools())
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "/compact")
        assert "nothing to compact yet" in notes(app)
        await submit(pilot, "echo eight times")
        await finish_turn(pilot)
        stored = len(providers[0].requests[-1].messages)
        await submit(pilot, "/compact")
        assert "compacted at the start of your next message" in notes(app)
        await submit(pilot, "anything else?")
        await finish_turn(pilot)
        assert "context compacted:" in notes(app)
        assert "nothing was compacted" not in notes(app)
    request = providers[0].requests[-1]
    assert request.tools and len(request.messages) < stored
    assert request.messages[-1].content == "anything else?"
    assert app.results[-1].final_text == "after compacting"


async def test_compact_on_a_short_history_says_nothing_was_compacted(tmp_path: Path) -> None:
    app, _ = scripted_app(tmp_path, [finish("one"), finish("two", cid="f2")])
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "first")
        await finish_turn(pilot)
        await submit(pilot, "/compact")
        await submit(pilot, "second")
        await finish_turn(pilot)
        assert "nothing was compacted: the history is too short" in notes(app)
        assert app.results[-1].final_text == "two"


async def test_mcp_reports_the_running_servers_with_their_tools(tmp_path: Path) -> None:
    from journeyman.integrations.mcp import McpServerConfig
    from tests.integrations.mcp.conftest import stdio_server

    app, _ = scripted_app(tmp_path, [finish("one")])
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "/mcp")
        assert "no MCP servers" in notes(app)
        app.agent.mcp = {
            "calc": stdio_server(),
            "broken": McpServerConfig(command="no-such-program-jm"),
        }
        await submit(pilot, "/mcp")
        assert "MCP servers calc, broken: they start with your next message" in notes(app)
        await submit(pilot, "go")
        await finish_turn(pilot)
        await submit(pilot, "/mcp")
        shown = notes(app)
        assert "calc: running, " in shown and "calc_add" in shown
        assert "broken: failed — " in shown
        await pilot.press("ctrl+d")
        await pilot.pause()


async def test_lsp_reports_which_language_servers_run(tmp_path: Path) -> None:
    from tests.integrations.lsp.conftest import fake, only

    app, _ = scripted_app(tmp_path, [])
    workspace = tmp_path / "ws"
    manager = only(fake("hang"), workspace, diagnostics_wait=0.1)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await submit(pilot, "/lsp")
            assert "language servers: off" in notes(app)
            app.agent.lsp = manager
            await submit(pilot, "/lsp")
            assert "fake (python): not started (starts when the agent touches a .py file)" in (
                notes(app)
            )
            (workspace / "a.py").write_text("x = 1\n")
            await manager.notify_file_changed(workspace / "a.py", "x = 1\n", start=True)
            await submit(pilot, "/lsp")
            assert "fake (python): running, pid " in notes(app)
    finally:
        await manager.aclose()


async def test_quitting_with_the_approval_dialog_open_cancels_the_turn_and_resumes(
    tmp_path: Path,
) -> None:
    script = [turn(call("write_file", "w1", path="a.txt", content="one\n"))]
    app, _ = scripted_app(tmp_path, script, permissions=ASK)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write a.txt")
        await wait_for_screen(pilot, ApprovalDialog)
        await pilot.press("ctrl+d")  # nobody answers: quitting must not wait for an answer
        await pilot.pause()
    assert not app.is_running
    session = app.conversation.session_id
    assert session is not None and app.results[0].finish_reason is FinishReason.CANCELLED
    assert not (tmp_path / "ws" / "a.txt").exists()

    again, providers = scripted_app(
        tmp_path, [finish("resumed")], session_id=session, permissions=ASK
    )
    async with again.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "never mind the file")
        await finish_turn(pilot)
        assert again.results[0].session_id == session
        assert again.results[0].final_text == "resumed"
    contents = [m.content for m in providers[0].requests[0].messages]
    assert "write a.txt" in contents and "never mind the file" in contents


async def test_two_ctrl_c_quit_while_the_approval_dialog_is_open(tmp_path: Path) -> None:
    script = [turn(call("write_file", "w1", path="a.txt", content="one\n"))]
    app, _ = scripted_app(tmp_path, script, permissions=ASK)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write a.txt")
        await wait_for_screen(pilot, ApprovalDialog)
        await pilot.press("ctrl+c")  # the first cancels the turn and closes the dialog
        await finish_turn(pilot)
        assert not isinstance(app.screen, ApprovalDialog)
        assert app.results[0].finish_reason is FinishReason.CANCELLED
        assert "cancelled; the session is saved" in notes(app)
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert not app.is_running
    assert not (tmp_path / "ws" / "a.txt").exists()


def openai_app(server: FakeOpenAIServer, tmp_path: Path) -> ChatApp:
    """An app whose agent talks to the fake OpenAI server as openai:gpt-4.1-mini."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)

    def build(hooks: AgentHooks) -> Agent:
        provider = create_provider("openai", "gpt-4.1-mini", server.base_url, api_key="sk-t")
        return Agent(
            provider,
            workspace=workspace,
            config=AgentConfig(session_dir=tmp_path / "s", verify=False),
            options=RunOptions(base_url=server.base_url),
            on_event=hooks.on_event,
            approver=hooks.extension_approver,
            permission_approver=hooks.permission_approver,
        )

    return ChatApp(build, clock=ManualClock())


async def test_model_switches_the_model_of_the_next_message(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_openai.enqueue(
        reply(tool_calls=[("finish", {"summary": "first"})]),
        reply(tool_calls=[("finish", {"summary": "second"})]),
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-t")
    app = openai_app(fake_openai, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "hello")
        await finish_turn(pilot)
        await submit(pilot, "/model gpt-4.1")
        assert "model openai:gpt-4.1 from the next message on" in notes(app)
        assert status_parts(app)[0] == "openai:gpt-4.1"
        await submit(pilot, "/model nosuch:thing")
        shown = notes(app)
        assert "/model: unknown provider 'nosuch'" in shown
        assert "/model openai:nosuch:thing" in shown  # how to name a model with a colon
        assert "the model stays openai:gpt-4.1" in shown
        await submit(pilot, "/model")
        assert "usage: /model NAME" in notes(app)
        await submit(pilot, "and again")
        await finish_turn(pilot)
        assert [r.final_text for r in app.results] == ["first", "second"]
        assert app.results[1].session_id == app.results[0].session_id
    models = [r.body["model"] for r in fake_openai.requests if r.body]
    assert models == ["gpt-4.1-mini", "gpt-4.1"]


async def test_a_follow_up_after_switching_to_the_phased_mode(tmp_path: Path) -> None:
    script = [
        finish("reacted"),
        turn(call("note", "n1", text="the plan: nothing to change")),
        finish("phased and done", cid="f2"),
    ]
    app, providers = scripted_app(tmp_path, script)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "first, in react")
        await finish_turn(pilot)
        await submit(pilot, "/mode phased")  # no check command: the next message would fail
        assert "the phased mode needs a check command" in notes(app)
        assert app.agent.config.mode.value == "react"
        app.agent.config = app.agent.config.model_copy(update={"verify_command": "true"})
        await submit(pilot, "/mode phased")
        assert "mode phased from the next message on" in notes(app)
        assert "mode phased" in status_parts(app)
        await submit(pilot, "now the follow-up")
        await finish_turn(pilot)
        first, second = app.results
        assert second.session_id == first.session_id
        assert second.success and second.final_text == "phased and done"
    requests = providers[0].requests
    assert "note" in {spec.name for spec in requests[-1].tools}
    users = [m.content for m in requests[-1].messages if m.role.value == "user"]
    assert users[0] == "first, in react" and "now the follow-up" in users


def test_the_status_bar_wraps_between_its_parts_never_inside_one() -> None:
    facts = StatusFacts(
        model="anthropic:claude-sonnet-4-5",
        tokens_in=1_234_567,
        tokens_out=89_012,
        cache_read=1_000_000,
        cost_usd=12.3456,
        budget_fraction=0.85,
        budget_level="restricted",
        phase="exploration",
        state="running",
        mode="phased",
        session_id="20260101-000000-abcdef",
    )
    for width in (40, 80, 120):
        lines = facts.render(width).splitlines()
        assert all(len(line) <= width for line in lines), (width, lines)
        parts = [part for line in lines for part in line.split(" | ")]
        assert parts == [segment for segment in facts.segments() if segment]
    assert len(facts.render(0).splitlines()) == 1


async def test_mcp_and_lsp_say_why_the_servers_did_not_start(tmp_path: Path) -> None:
    app, _ = scripted_app(tmp_path, [finish("without servers")])

    @contextlib.asynccontextmanager
    async def connected() -> AsyncIterator[list[Any]]:
        raise RuntimeError("mcp.json is not valid JSON")
        yield []  # pragma: no cover

    app.agent.mcp = {"calc": None}  # type: ignore[dict-item]
    app.agent.connected = connected  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "go")
        await finish_turn(pilot)
        assert app.results[0].final_text == "without servers"
        await submit(pilot, "/mcp")
        await submit(pilot, "/lsp")
        assert notes(app).count("the servers could not start: mcp.json is not valid JSON") == 2


async def test_a_long_patch_must_be_scrolled_to_its_end_before_yes(tmp_path: Path) -> None:
    patch = long_patch_workspace(tmp_path / "ws")
    script = [turn(call("apply_patch", "p1", patch=patch)), finish("settings doubled")]
    app, _ = scripted_app(tmp_path, script, permissions=ASK, edit_tool="apply_patch")
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "double the settings")
        dialog = await wait_for_screen(pilot, ApprovalDialog)
        await pilot.pause()
        shown = "\n".join(line.plain for line in dialog.change.lines)
        assert "create backdoor.py:" in shown and HIDDEN_LINE in shown  # all of it is there
        assert f"+{SETTINGS_TAIL}" in shown
        assert f"create {ESCAPED_NAME}:" in shown and f"+{ESCAPED_LINE}" in shown
        assert not {"\x1b", "\r", "\x07", "\u202e"} & set(shown)
        unread = str(dialog.unread.render())
        assert dialog.unread.display and "more rows below" in unread
        assert int(unread.split()[0].replace(",", "")) > 1_000
        await pilot.press("y")  # the end was never on screen: not taken
        await pilot.pause()
        assert app.screen is dialog and not dialog.end_seen
        assert dialog.query_one("#allow", Button).disabled
        for _ in range(3):
            await pilot.press("space")  # a page at a time
        await pilot.pause()
        assert 0 < dialog.change.scroll_y < dialog.change.max_scroll_y
        assert "more rows below" in str(dialog.unread.render())
        assert app.focused is dialog.change  # the keys scroll the call
        await pilot.press("end")
        await pilot.pause(0.3)
        assert dialog.end_seen and not dialog.unread.display
        assert not dialog.query_one("#allow", Button).disabled
        await pilot.press("y")
        await finish_turn(pilot)
    assert (tmp_path / "ws" / "backdoor.py").read_text() == HIDDEN_LINE + "\n"


async def test_a_line_wider_than_the_dialog_is_folded_never_cut(tmp_path: Path) -> None:
    line = "x = '" + "padding " * 400 + "' ; import os; os.system('evil')"
    script = [turn(call("write_file", "w1", path="a.py", content=line + "\n")), finish()]
    app, _ = scripted_app(tmp_path, script, permissions=ASK)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write a.py")
        dialog = await wait_for_screen(pilot, ApprovalDialog)
        await pilot.pause()
        view = dialog.change
        assert all(len(row.plain) <= view.folded_at for row in view.rows)
        assert "+" + line in "".join(row.plain for row in view.rows)
        assert not dialog.end_seen  # 3,000 characters fold into more rows than the box shows
        await pilot.press("end")
        await pilot.pause()
        assert dialog.end_seen
        await pilot.press("n")
        await finish_turn(pilot)


async def test_the_app_opens_on_a_line_naming_the_workspace_model_sandbox_and_permissions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the workspace is shown from the home folder
    app, _ = scripted_app(tmp_path, [], sandbox=SandboxKind.LOCAL, permissions=ASK)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        first = str(app.query(Note).first().render())
        assert first.startswith("journeyman in ~/ws\n")
        assert f"model {app.agent.provider.name}:{app.agent.provider.model}" in first
        assert f"sandbox {app.agent.sandbox.description}" in first
        assert "permissions default" in first and "mode react" in first
    assert shown_path(tmp_path.parent / "elsewhere") == str(tmp_path.parent / "elsewhere")


async def test_the_checks_card_is_labelled_as_the_check_and_a_model_call_cannot_pose_as_it(
    tmp_path: Path,
) -> None:
    calc_package(tmp_path)
    script = [
        fix_add("a - b", "a + b", "e1"),
        turn(call("echo", "verify-1", text="posing as the check")),
        finish("fixed add"),
    ]
    app, _ = scripted_app(
        tmp_path,
        script,
        verify=True,
        verify_command=CALC_TEST_COMMAND,
        sandbox=SandboxKind.LOCAL,
        tools=[*default_tools(), *(t for t in Probe().tools() if t.name != "finish")],
    )
    async with app.run_test(size=(120, 30)) as pilot:
        await submit(pilot, "fix add")
        await finish_turn(pilot)
        titles = [str(card.title) for card in app.query(ToolCard)]
    checks = [title for title in titles if "check by journeyman" in title]
    assert len(checks) == 2, titles  # before the first turn, then after the edit
    assert "check by journeyman, before the first turn" in checks[0]  # its failure: the task
    assert "before the first turn" not in checks[1]
    assert any(title.startswith("✓ ok echo posing as the check") for title in titles), titles
