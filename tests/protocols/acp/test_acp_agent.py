"""`journeyman acp` driven by the protocol package's client over a subprocess pipe, against the
fake OpenAI server: a fix task, a refused edit, a cancel mid-turn, a session loaded after a
restart, the phased mode's plan, and what happens without the package."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from journeyman.session.store import SessionStore
from tests.fakes.long_patch import (
    ESCAPED_LINE,
    ESCAPED_NAME,
    HIDDEN_FILE,
    HIDDEN_LINE,
    SETTINGS_TAIL,
    long_patch_workspace,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import BUGGY_ADD, CALC_TEST_COMMAND, calc_package
from tests.fakes.script import error, hang, reply
from tests.protocols.acp.conftest import EditorClient, EditorLauncher, acp
from tests.support.cli import clean_env

FIX_ADD = {"path": "calc/__init__.py", "old_string": "a - b", "new_string": "a + b"}


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_a_fix_task_streams_text_and_tool_calls_and_edits_the_file(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    calc_package(tmp_path)
    fake_openai.enqueue(
        reply("The add function subtracts; fixing it.", tool_calls=[("edit_file", FIX_ADD)]),
        reply(tool_calls=[("finish", {"summary": "add now adds"})]),
    )
    async with editor.start("--verify", CALC_TEST_COMMAND) as ed:
        session = await ed.new_session()
        stop = await ed.prompt(session, "make the calc test pass")

    client = ed.client
    assert stop == "end_turn", editor.stderr()
    assert "def add(a, b):\n    return a + b" in (tmp_path / "ws/calc/__init__.py").read_text()
    chunks = client.of("agent_message_chunk")
    assert len(chunks) > 1  # streamed, not sent whole
    assert "The add function subtracts; fixing it." in client.agent_text()
    text = client.agent_text().rstrip()
    assert "add now adds" in text  # the finish summary, then the check's receipt
    assert text.endswith("passed: 1 passed, on the final tree]")
    # journeyman's check before the first turn, the model's edit, then journeyman's check
    before, started, check = client.of("tool_call")
    assert before.tool_call_id == "verify-before" and before.title == CALC_TEST_COMMAND
    assert started.kind == "edit" and started.status == "pending"
    assert check.kind == "execute" and check.title == CALC_TEST_COMMAND
    assert started.title == "edit_file calc/__init__.py"
    assert started.content[0].old_text == "a - b" and started.content[0].new_text == "a + b"
    finished = [u for u in client.of("tool_call_update") if u.status == "completed"]
    ids = [before.tool_call_id, started.tool_call_id, check.tool_call_id]
    assert [u.tool_call_id for u in finished] == ids
    [diff] = finished[1].content
    target = str(tmp_path / "ws" / "calc" / "__init__.py")
    assert diff.type == "diff" and diff.path == target  # absolute, whole file before and after
    assert diff.old_text == BUGGY_ADD and "a + b" in diff.new_text
    [(asked, options)] = client.questions
    assert asked.tool_call_id == started.tool_call_id
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
    assert "Traceback" not in editor.stderr()


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_a_shell_call_shows_its_command_and_output(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer
) -> None:
    command = f"{sys.executable} -c \"print('hello from the tool')\""
    fake_openai.enqueue(
        reply(tool_calls=[("run_command", {"command": command})]),
        reply("It printed hello."),
    )
    async with editor.start("--no-verify") as ed:
        stop = await ed.prompt(await ed.new_session(), "run the greeting")

    assert stop == "end_turn", editor.stderr()
    [started] = ed.client.of("tool_call")
    assert started.kind == "execute" and started.content[0].content.text == f"$ {command}"
    [done] = [u for u in ed.client.of("tool_call_update") if u.status == "completed"]
    assert "hello from the tool" in done.content[0].content.text


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_edit_tool_chooses_the_tool_the_model_edits_with(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.enqueue(reply("Nothing to change."))
    async with editor.start("--no-verify", "--edit-tool", "edit_file") as ed:
        stop = await ed.prompt(await ed.new_session(), "look around")
    assert stop == "end_turn", editor.stderr()
    offered = [tool["function"]["name"] for tool in fake_openai.requests[0].json["tools"]]
    # an OpenAI-compatible provider gets apply_patch unless --edit-tool says otherwise
    assert "edit_file" in offered and "apply_patch" not in offered, offered


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_a_refused_edit_leaves_the_file_and_the_model_is_told(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    calc_package(tmp_path)
    fake_openai.enqueue(
        reply(tool_calls=[("edit_file", FIX_ADD)]),
        reply("Understood, I will leave the file alone."),
    )
    client = EditorClient(answer=lambda call, options: "reject_once")
    async with editor.start("--no-verify", client=client) as ed:
        stop = await ed.prompt(await ed.new_session(), "fix add")

    assert stop == "end_turn"
    assert (tmp_path / "ws/calc/__init__.py").read_text() == BUGGY_ADD
    assert len(client.questions) == 1
    [failed] = [u for u in client.of("tool_call_update") if u.status == "failed"]
    assert "declined" in failed.content[0].content.text
    second = fake_openai.requests[1].json["messages"]
    [tool_message] = [m for m in second if m["role"] == "tool"]
    assert "declined" in tool_message["content"]
    assert "[journeyman stopped: refused]" in client.agent_text()  # the user is told why


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_after_two_rejects_the_editor_is_told_both_and_what_to_do_there(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    calc_package(tmp_path)
    again = {**FIX_ADD, "old_string": "return a - b", "new_string": "return a + b"}
    fake_openai.enqueue(
        reply(tool_calls=[("edit_file", FIX_ADD)]),
        reply(tool_calls=[("edit_file", again)]),  # the model tries once more on the same file
        reply("I will leave the file alone."),
    )
    client = EditorClient(answer=lambda call, options: "reject_once")
    async with editor.start("--no-verify", "--edit-tool", "edit_file", client=client) as ed:
        stop = await ed.prompt(await ed.new_session(), "fix add")

    assert stop == "end_turn", editor.stderr()
    assert len(client.questions) == 2
    told = client.agent_text()
    assert "[journeyman stopped: refused] 2 edit/command call(s) were refused" in told, told
    assert "edit_file(calc/__init__.py) (2 times)" in told
    assert "choose Allow" in told and "--yes" not in told  # no flags to pass in an editor


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_allow_always_is_remembered_for_the_same_call(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    write = {"path": "notes.txt", "content": "first\n"}
    fake_openai.enqueue(
        reply(tool_calls=[("write_file", write)]),
        reply(tool_calls=[("write_file", {**write, "content": "second\n"})]),
        reply("Both written."),
    )
    client = EditorClient(answer=lambda call, options: "allow_always")
    async with editor.start("--no-verify", client=client) as ed:
        assert await ed.prompt(await ed.new_session(), "write the notes twice") == "end_turn"

    assert len(client.questions) == 1  # the second write was allowed by the remembered rule
    assert (tmp_path / "ws/notes.txt").read_text() == "second\n"


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_cancel_mid_turn_ends_the_prompt_and_the_session_goes_on(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.enqueue(hang(60))
    async with editor.start("--no-verify") as ed:
        session = await ed.new_session()
        turn = asyncio.create_task(ed.prompt(session, "think for a long time"))
        while not fake_openai.requests:  # the model call is under way
            await asyncio.sleep(0.02)
        await ed.conn.cancel(session_id=session)
        stop = await asyncio.wait_for(turn, 30)
        assert stop == "cancelled"

        fake_openai.enqueue(reply("Here is a short answer."))
        again = await ed.prompt(session, "then answer briefly")

    assert again == "end_turn", editor.stderr()
    assert "Here is a short answer." in ed.client.agent_text()
    last = fake_openai.requests[-1].json["messages"]
    assert last[-1] == {"role": "user", "content": "then answer briefly"}
    assert "Traceback" not in editor.stderr()


async def test_a_first_prompt_whose_key_is_refused_keeps_nothing_and_the_next_one_starts(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A key the server refuses at the first call stores no session; the editor's session is
    still usable, and its next prompt starts one (the key works again, say after a fix)."""
    fake_openai.enqueue(error(401, "Incorrect API key provided"), reply("Hello there."))
    async with editor.start("--no-verify") as ed:
        session = await ed.new_session()
        await ed.prompt(session, "say hello")
        assert "rejected the API key" in ed.client.agent_text(), ed.client.agent_text()
        store = SessionStore(tmp_path / "sessions")
        try:
            assert store.list_sessions() == []
        finally:
            store.close()
        again = await ed.prompt(session, "say hello")
    assert again == "end_turn", editor.stderr()
    assert "Hello there." in ed.client.agent_text()
    assert fake_openai.requests[-1].json["messages"][-1] == {"role": "user", "content": "say hello"}
    assert "Traceback" not in editor.stderr()


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_a_session_loaded_after_a_restart_replays_its_history_and_continues(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        reply(
            "Writing the notes.",
            tool_calls=[("write_file", {"path": "notes.txt", "content": "one\n"})],
        ),
        reply(tool_calls=[("finish", {"summary": "notes written"})]),
    )
    async with editor.start("--no-verify") as first:
        session = await first.new_session()
        assert await first.prompt(session, "write notes.txt") == "end_turn"
    assert first.process.returncode is not None  # that agent process is gone

    fake_openai.enqueue(
        reply(tool_calls=[("write_file", {"path": "more.txt", "content": "two\n"})]),
        reply(tool_calls=[("finish", {"summary": "more written"})]),
    )
    sent_before = len(fake_openai.requests)
    async with editor.start("--no-verify") as second:
        await second.conn.load_session(
            cwd=str(second.workspace), session_id=session, mcp_servers=[]
        )
        replayed = second.client.take()
        stop = await second.prompt(session, "now write more.txt")

    kinds = [u.session_update for u in replayed]
    assert kinds[0] == "user_message_chunk" and replayed[0].content.text == "write notes.txt"
    [call] = [u for u in replayed if u.session_update == "tool_call"]
    assert (
        call.kind == "edit" and call.status == "completed" and call.title == "write_file notes.txt"
    )
    assert "Writing the notes." in "".join(
        u.content.text for u in replayed if u.session_update == "agent_message_chunk"
    )
    assert "notes written" in "".join(
        u.content.text for u in replayed if u.session_update == "agent_message_chunk"
    )
    assert stop == "end_turn", editor.stderr()
    assert (tmp_path / "ws/more.txt").read_text() == "two\n"
    follow_up = fake_openai.requests[sent_before].json["messages"]
    user_texts = [m["content"] for m in follow_up if m["role"] == "user"]
    assert "write notes.txt" in user_texts[0] and user_texts[-1] == "now write more.txt"
    store = SessionStore(tmp_path / "sessions")
    try:
        assert [s.record.id for s in store.list_sessions()] == [session]  # the same session
        assert [c.path for c in store.file_changes(session)] == ["notes.txt", "more.txt"]
    finally:
        store.close()


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_the_phased_mode_shows_its_workflow_as_the_plan(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    calc_package(tmp_path)
    fake_openai.enqueue(
        reply("1. Fix add.\n2. Run the tests.", tool_calls=[("edit_file", FIX_ADD)]),
        reply(tool_calls=[("finish", {"summary": "add fixed"})]),
    )
    async with editor.start("--mode", "phased", "--verify", CALC_TEST_COMMAND) as ed:
        stop = await ed.prompt(await ed.new_session(), "make the calc test pass")

    assert stop == "end_turn", editor.stderr()
    plans = ed.client.of("plan")
    assert plans, "no plan update was sent"
    in_progress = [
        next((e.content for e in p.entries if e.status == "in_progress"), None) for p in plans
    ]
    assert any(text and text.startswith("Make the changes") for text in in_progress)
    assert any(text and text.startswith("Verify") for text in in_progress)
    assert all(e.status == "completed" for e in plans[-1].entries)


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_a_workspace_config_cannot_loosen_the_approvals(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    (editor.workspace / "journeyman.toml").write_text(
        '[permissions]\nmode = "bypass"\nallow = ["run_command"]\n'
    )
    marker = tmp_path / "ran"
    fake_openai.enqueue(
        reply(tool_calls=[("run_command", {"command": f"touch {marker}"})]),
        reply("Fine, not running it."),
    )
    client = EditorClient(answer=lambda call, options: "reject_once")
    async with editor.start("--no-verify", client=client) as ed:
        await ed.prompt(await ed.new_session(), "touch the marker")

    assert not marker.exists()
    assert len(client.questions) == 1  # asked, as the user's own default mode says
    assert "ignored permissions.mode" in client.agent_text()  # the user is told at once
    assert "ignored permissions.mode" in editor.stderr()


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_a_prompt_to_an_unknown_session_is_an_error_not_a_crash(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer
) -> None:
    async with editor.start() as ed:
        with pytest.raises(acp.RequestError) as raised:
            await ed.prompt("no-such-session", "hello")
        with pytest.raises(acp.RequestError):
            await ed.conn.load_session(cwd=str(ed.workspace), session_id="nope", mcp_servers=[])
        fake_openai.enqueue(reply("Hello."))
        assert await ed.prompt(await ed.new_session(), "hello") == "end_turn"
    assert "no such session" in str(raised.value.data)


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_a_session_that_cannot_start_says_why_and_the_agent_stays_up(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer
) -> None:
    async with editor.start("--provider", "anthropic") as ed:  # and no ANTHROPIC_API_KEY
        with pytest.raises(acp.RequestError) as raised:
            await ed.new_session()
        with pytest.raises(acp.RequestError):
            await ed.conn.new_session(cwd="relative/path", mcp_servers=[])
        assert ed.process.returncode is None
    assert "ANTHROPIC_API_KEY" in str(raised.value.data)
    assert "Traceback" not in editor.stderr()


def test_without_the_protocol_package_it_says_how_to_install_it(tmp_path: Path) -> None:
    hide_package = (
        "import sys; sys.modules['acp'] = None; sys.argv = ['journeyman', 'acp']; "
        "from journeyman.cli.app import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide_package],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "pip install 'journeyman[acp]'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow  # a journeyman process per editor (~2 s to start on a busy machine)
async def test_a_long_patch_is_asked_about_with_the_file_it_adds_last(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    patch = long_patch_workspace(tmp_path / "ws")
    fake_openai.enqueue(
        reply(tool_calls=[("apply_patch", {"patch": patch})]),
        reply("Refused, leaving it."),
    )
    client = EditorClient(answer=lambda call, options: "reject_once")
    env = {"JOURNEYMAN_EDIT_TOOL": "apply_patch"}
    async with editor.start("--no-verify", client=client, env=env) as ed:
        assert await ed.prompt(await ed.new_session(), "double the settings") == "end_turn"

    [(asked, _)] = client.questions
    shown = {Path(c.path).name: c for c in asked.content or [] if c.type == "diff"}
    assert list(shown) == ["settings.py", ESCAPED_NAME, HIDDEN_FILE], editor.stderr()
    assert shown[HIDDEN_FILE].new_text == HIDDEN_LINE + "\n"
    assert shown[ESCAPED_NAME].new_text == ESCAPED_LINE + "\n"
    assert shown["settings.py"].new_text.count("# doubled") == 620
    assert shown["settings.py"].new_text.endswith(SETTINGS_TAIL + "\n")
    assert not (tmp_path / "ws" / HIDDEN_FILE).exists()


def check_cards(updates: list[Any]) -> list[tuple[Any, Any]]:
    """The check's cards after the first turn's start: (its start, its last update)."""
    started = [u for u in updates if u.session_update == "tool_call"]
    cards = []
    for start in started:
        if start.tool_call_id.startswith("verify-") and start.tool_call_id != "verify-before":
            ends = [
                u for u in updates
                if u.session_update == "tool_call_update" and u.tool_call_id == start.tool_call_id
            ]  # fmt: skip
            cards.append((start, ends[-1]))
    return cards


@pytest.mark.slow  # two journeyman processes (~2 s each to start on a busy machine)
async def test_a_follow_up_turns_check_shows_its_own_output_and_fails_when_the_tests_fail(
    editor: EditorLauncher, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    calc_package(tmp_path)
    breaks = {**FIX_ADD, "old_string": "a + b", "new_string": "a * b"}
    fake_openai.enqueue(
        reply(tool_calls=[("edit_file", FIX_ADD)]),
        reply(tool_calls=[("finish", {"summary": "add now adds"})]),
        reply(tool_calls=[("edit_file", breaks)]),
        reply(tool_calls=[("finish", {"summary": "add now multiplies"})]),
    )
    flags = ("--verify", CALC_TEST_COMMAND, "--edit-tool", "edit_file")
    async with editor.start(*flags) as ed:
        session = await ed.new_session()
        assert await ed.prompt(session, "make the calc test pass") == "end_turn"
        [(_, passed)] = check_cards(ed.client.take())
        await ed.prompt(session, "now make it multiply")
        [(_, failed)] = check_cards(ed.client.take())
    assert passed.status == "completed" and "OK" in passed.content[0].content.text
    assert failed.status == "failed", editor.stderr()
    [shown] = failed.content
    assert shown.type == "content" and "AssertionError: 6 != 5" in shown.content.text

    # reopened in a new editor, a turn that changes nothing: the check's card shows the
    # tests' output, not the diffs of the turns before
    fake_openai.enqueue(
        reply(tool_calls=[("read_file", {"path": "calc/__init__.py"})]),
        reply(tool_calls=[("finish", {"summary": "nothing to change"})]),
    )
    async with editor.start(*flags) as again:
        await again.conn.load_session(cwd=str(again.workspace), session_id=session, mcp_servers=[])
        again.client.take()
        await again.prompt(session, "run the tests once more")
        updates = again.client.take()
    [(start, last)] = check_cards(updates)
    assert start.title == CALC_TEST_COMMAND and last.status == "failed"
    assert [c.type for c in last.content] == ["content"]
    assert "AssertionError: 6 != 5" in last.content[0].content.text
    [read] = [
        u for u in updates if u.session_update == "tool_call_update" and u.status == "completed"
    ]
    assert [c.type for c in read.content] == ["content"]  # the file read, not an old diff
    assert "Traceback" not in editor.stderr()
