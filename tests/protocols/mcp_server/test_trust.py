"""What a client cannot do through `mcp serve`: work outside the server's folders, spend above
its caps, weaken its sandbox or permissions, or get calls approved that nobody approved; and
every refusal is a tool error with a clear text, after which the server keeps serving."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import BUGGY_ADD, calc_package
from tests.fakes.script import reply
from tests.protocols.mcp_server.conftest import in_process_client

FIX = reply(
    tool_calls=[
        ("edit_file", {"path": "calc/__init__.py", "old_string": "a - b", "new_string": "a + b"})
    ]
)


def refusal(result: Any) -> str:
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert "Traceback" not in text
    return str(text)


def answer(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def still_serving(client: Client) -> None:
    listed = await client.call_tool("list_sessions", {})
    assert not listed.is_error


async def test_a_workspace_outside_the_roots_is_refused(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (workspace / "escape").symlink_to(outside)
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        for where in (str(outside), "../elsewhere", "escape", "/"):
            text = refusal(await client.call_tool("start_run", {"task": "x", "workspace": where}))
            assert "outside the folders this server may work in" in text, text
            assert str(workspace) in text
        await still_serving(client)
    assert fake_openai.requests == []  # no run started


async def test_a_folder_inside_a_root_is_a_workspace(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "projects"
    root.mkdir()
    workspace = calc_package(root)  # projects/ws
    fake_openai.enqueue(FIX, reply(tool_calls=[("finish", {"summary": "fixed"})]))
    async with in_process_client(tmp_path, root, fake_openai, monkeypatch) as client:
        run = answer(await client.call_tool("start_run", {"task": "fix", "workspace": "ws"}))
    assert run["workspace"] == str(workspace.resolve()) and run["finish_reason"] == "completed"


async def test_a_budget_above_the_servers_cap_is_clamped(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    expensive = dict(input_tokens=1000, output_tokens=100)  # $0.0045 a call at 3,15 per Mtok
    fake_openai.enqueue(
        reply(tool_calls=[("read_file", {"path": "calc/__init__.py"})], **expensive),
        reply(tool_calls=[("read_file", {"path": "tests/test_calc.py"})], **expensive),
        FIX,
        reply(tool_calls=[("finish", {"summary": "fixed"})]),
    )
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, max_budget_usd=0.005
    ) as client:
        run = answer(
            await client.call_tool(
                "start_run", {"task": "fix add", "max_budget_usd": 100, "max_iterations": 500}
            )
        )
    assert run["finish_reason"] == "max_budget_usd", run
    assert run["cost_usd"] <= 0.01
    notes = " ".join(run["notes"])
    assert "max_budget_usd 100 is above this server's limit; 0.005 is used" in notes
    assert "max_iterations 500 is above this server's limit; 50 is used" in notes  # default
    assert (workspace / "calc" / "__init__.py").read_text() == BUGGY_ADD


async def test_an_iteration_limit_above_the_servers_is_clamped(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(
        reply(tool_calls=[("read_file", {"path": "calc/__init__.py"})]),
        FIX,
        reply(tool_calls=[("finish", {"summary": "fixed"})]),
    )
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, max_iterations=1
    ) as client:
        run = answer(await client.call_tool("start_run", {"task": "fix", "max_iterations": 9}))
    assert run["finish_reason"] == "max_iterations" and run["iterations"] == 1, run
    assert "max_iterations 9 is above this server's limit; 1 is used" in " ".join(run["notes"])


async def test_a_lower_limit_from_the_client_is_kept(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(
        reply(tool_calls=[("read_file", {"path": "calc/__init__.py"})]),
        FIX,
        reply(tool_calls=[("finish", {"summary": "fixed"})]),
    )
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        run = answer(await client.call_tool("start_run", {"task": "fix", "max_iterations": 1}))
    assert run["finish_reason"] == "max_iterations" and "notes" not in run


async def test_the_sandbox_and_permissions_cannot_be_loosened(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, permission_mode="accept_edits"
    ) as client:
        text = refusal(await client.call_tool("start_run", {"task": "x", "sandbox": "local"}))
        assert "sandbox 'local' would weaken this server's 'auto'" in text
        text = refusal(
            await client.call_tool("start_run", {"task": "x", "permission_mode": "bypass"})
        )
        assert "looser than this server's 'accept_edits'" in text
        assert "plan, default, accept_edits" in text
        for smuggled in ({"no_sandbox": True}, {"allow_network": True}, {"yes": True}):
            text = refusal(await client.call_tool("start_run", {"task": "x", **smuggled}))
            assert f"unknown argument(s) {next(iter(smuggled))}" in text
        await still_serving(client)
    assert fake_openai.requests == []


async def test_a_stricter_permission_mode_from_the_client_holds(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, reply(tool_calls=[("finish", {"summary": "fixed"})]))
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        run = answer(
            await client.call_tool("start_run", {"task": "fix", "permission_mode": "plan"})
        )
    # a plan is what the client asked for: the edit is refused, and said so
    assert run["refused_calls"][0]["tool"] == "edit_file"
    assert "plan mode does not change files" in run["refused_calls"][0]["reason"]
    assert run["files_changed"] == []
    assert (workspace / "calc" / "__init__.py").read_text() == BUGGY_ADD


async def test_calls_that_need_approval_are_refused_without_yes(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    # the workspace's file tries to approve everything itself: the trust rules drop it
    (workspace / "journeyman.toml").write_text('[permissions]\nmode = "bypass"\n')
    fake_openai.enqueue(FIX, reply(tool_calls=[("finish", {"summary": "fixed"})]))
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False
    ) as client:
        run = answer(await client.call_tool("start_run", {"task": "fix add"}))
    assert run["finish_reason"] == "refused", run
    assert run["refused_calls"][0]["tool"] == "edit_file"
    assert any("ignored permissions.mode = 'bypass'" in note for note in run["notes"])
    assert (workspace / "calc" / "__init__.py").read_text() == BUGGY_ADD


async def test_unknown_sessions_and_bad_arguments_are_tool_errors(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        for tool, args in (
            ("get_status", {"session_id": "nope"}),
            ("get_diff", {"session_id": "nope"}),
            ("undo", {"session_id": "nope"}),
            ("cancel_run", {"session_id": "nope"}),
            ("send_message", {"session_id": "nope", "message": "more"}),
        ):
            text = refusal(await client.call_tool(tool, args))
            assert "no session 'nope'" in text, (tool, text)
        text = refusal(await client.call_tool("start_run", {"task": "  "}))
        assert "task is empty" in text
        text = refusal(await client.call_tool("start_run", {"task": "x", "max_iterations": 0}))
        assert "max_iterations" in text
        text = refusal(await client.call_tool("start_run", {"task": "x", "mode": "yolo"}))
        assert "mode" in text
        text = refusal(await client.call_tool("start_run", {"task": "x", "workspace": "nothere"}))
        assert "is not a directory" in text
        text = refusal(await client.call_tool("get_status", {}))
        assert "session_id" in text
        await still_serving(client)


async def test_a_session_outside_the_roots_cannot_be_reached(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = calc_package(tmp_path / "a")
    second = calc_package(tmp_path / "b")
    fake_openai.enqueue(FIX, reply(tool_calls=[("finish", {"summary": "fixed"})]))
    async with in_process_client(tmp_path, first, fake_openai, monkeypatch) as client:
        session = answer(await client.call_tool("start_run", {"task": "fix"}))["session_id"]
    # the same session store, served for another folder only
    async with in_process_client(tmp_path, second, fake_openai, monkeypatch) as client:
        for tool, args in (
            ("get_status", {"session_id": session}),
            ("get_diff", {"session_id": session}),
            ("undo", {"session_id": session}),
            ("send_message", {"session_id": session, "message": "more"}),
        ):
            text = refusal(await client.call_tool(tool, args))
            assert "outside the folders this server may work in" in text, (tool, text)
        listed = answer(await client.call_tool("list_sessions", {}))
        assert listed["sessions"] == []
    assert (first / "calc" / "__init__.py").read_text() != BUGGY_ADD  # not undone


@pytest.mark.slow  # the run's command sleeps while the client looks at it (about 3 s)
async def test_a_background_run_reports_progress_and_can_be_cancelled(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(
        reply(tool_calls=[("run_command", {"command": "sleep 3"})]),
        reply(tool_calls=[("finish", {"summary": "never reached"})]),
    )
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        started = answer(await client.call_tool("start_run", {"task": "wait", "wait": False}))
        session = started["session_id"]
        assert started["status"] == "running"
        for _ in range(600):  # past the check's run before the first turn
            if fake_openai.requests:
                break
            await asyncio.sleep(0.05)
        busy = refusal(
            await client.call_tool("send_message", {"session_id": session, "message": "hi"})
        )
        assert "still working" in busy
        busy = refusal(await client.call_tool("start_run", {"task": "another"}))
        assert f"already has a run going (session {session})" in busy
        busy = refusal(await client.call_tool("undo", {"session_id": session}))
        assert "still working" in busy
        running = answer(await client.call_tool("get_status", {"session_id": session}))
        assert running["status"] == "running" and "step" in running["progress"]
        cancelling = answer(await client.call_tool("cancel_run", {"session_id": session}))
        assert cancelling["status"] == "cancelling"
        done = answer(await client.call_tool("get_status", {"session_id": session, "wait_s": 60}))
    assert done["status"] == "finished" and done["finish_reason"] == "cancelled", done
    assert len(fake_openai.requests) == 1  # stopped before the next turn


async def test_a_new_server_reads_the_sessions_of_an_earlier_one(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, reply(tool_calls=[("finish", {"summary": "fixed"})]))
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        session = answer(await client.call_tool("start_run", {"task": "fix"}))["session_id"]
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        status = answer(await client.call_tool("get_status", {"session_id": session}))
        diff = await client.call_tool("get_diff", {"session_id": session})
    assert status["status"] == "finished" and status["finish_reason"] == "completed"
    assert status["summary"] == "fixed" and status["iterations"] == 2
    assert status["tokens"]["total"] == 38 and status["cost_usd"] > 0
    assert status["files_changed"] == ["calc/__init__.py"]
    assert "+    return a + b" in diff.content[0].text


@pytest.mark.slow  # the run's command sleeps after the client gave up waiting (about 2 s)
async def test_a_run_goes_on_when_the_client_stops_waiting(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(
        reply(tool_calls=[("run_command", {"command": "sleep 2"})]),
        FIX,
        reply(tool_calls=[("finish", {"summary": "fixed"})]),
    )
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        with pytest.raises(MCPError):
            await client.call_tool("start_run", {"task": "fix"}, read_timeout_seconds=0.5)
        (row,) = answer(await client.call_tool("list_sessions", {}))["sessions"]
        done = answer(
            await client.call_tool("get_status", {"session_id": row["session_id"], "wait_s": 60})
        )
    assert done["finish_reason"] == "completed", done
    assert (workspace / "calc" / "__init__.py").read_text() != BUGGY_ADD


async def test_a_follow_up_does_not_reset_the_spending(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    # $0.0165 a call at 3,15 per Mtok; each call is also priced before it is sent (about
    # $0.013 for these prompts), and one that might not fit what is left is not made
    expensive = dict(input_tokens=5000, output_tokens=100)
    fake_openai.enqueue(
        reply(tool_calls=[("read_file", {"path": "calc/__init__.py"})], **expensive),
        FIX,
        reply(tool_calls=[("finish", {"summary": "fixed"})]),
        reply(tool_calls=[("read_file", {"path": "tests/test_calc.py"})], **expensive),
        reply(tool_calls=[("finish", {"summary": "read the test"})]),
    )
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, max_budget_usd=0.04
    ) as client:
        first = answer(await client.call_tool("start_run", {"task": "fix"}))
        assert first["finish_reason"] == "completed", first
        follow = answer(
            await client.call_tool(
                "send_message",
                {
                    "session_id": first["session_id"],
                    "message": "read the test",
                    "max_budget_usd": 1,
                },
            )
        )
    assert follow["finish_reason"] == "max_budget_usd", follow
    assert "left of the run's limit" in follow["error"]  # what the first run spent counts
    assert "max_budget_usd 1 is above this server's limit; 0.04 is used" in follow["notes"][0]


async def test_a_run_that_breaks_is_a_tool_error_and_the_server_goes_on(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from journeyman.loop.agent import Agent

    async def broken(self: Agent, task: str, **kwargs: Any) -> Any:
        raise RuntimeError("the store went away")

    workspace = calc_package(tmp_path)
    monkeypatch.setattr(Agent, "run", broken)
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        text = refusal(await client.call_tool("start_run", {"task": "fix"}))
        assert "could not run: RuntimeError: the store went away" in text
        await still_serving(client)


async def test_sessions_are_found_where_the_user_config_stores_them(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    chosen = tmp_path / "my-sessions"
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.toml").write_text(f"session_dir = {str(chosen)!r}\n")
    fake_openai.enqueue(FIX, reply(tool_calls=[("finish", {"summary": "fixed"})]))
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, session_dir=None
    ) as client:
        monkeypatch.delenv("JOURNEYMAN_SESSION_DIR")
        session = answer(await client.call_tool("start_run", {"task": "fix"}))["session_id"]
        listed = answer(await client.call_tool("list_sessions", {}))["sessions"]
        diff = await client.call_tool("get_diff", {"session_id": session})
    assert [row["session_id"] for row in listed] == [session]
    assert "+    return a + b" in diff.content[0].text
    assert (chosen / "journeyman.db").is_file()
