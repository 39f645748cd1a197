"""A whole session driven through `journeyman mcp serve` with the SDK's client, over stdio and
over streamable HTTP: fix a bug with progress notifications, read the status and the diff,
continue with a message, undo."""

from __future__ import annotations

import http.client
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from mcp import Client

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import BUGGY_ADD, calc_package
from tests.fakes.script import reply
from tests.protocols.mcp_server.conftest import http_server, stdio_client

FIXED_ADD = "def add(a, b):\n    return a + b\n"


def answer(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def fix_continue_undo(client: Client, fake: FakeOpenAIServer, workspace: Path) -> None:
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"start_run", "send_message", "get_status", "get_diff", "undo"} <= names

    fake.enqueue(
        reply(
            tool_calls=[
                (
                    "edit_file",
                    {"path": "calc/__init__.py", "old_string": "a - b", "new_string": "a + b"},
                )
            ]
        ),
        reply(tool_calls=[("finish", {"summary": "add adds now"})]),
    )
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    run = answer(
        await client.call_tool("start_run", {"task": "fix add"}, progress_callback=on_progress)
    )
    session = run["session_id"]
    assert run["status"] == "finished" and run["finish_reason"] == "completed", run
    assert run["summary"] == "add adds now" and run["files_changed"] == ["calc/__init__.py"]
    assert run["verification"]["passed"] is True
    assert (workspace / "calc" / "__init__.py").read_text() == FIXED_ADD

    messages = [message or "" for _, message in progress]
    assert messages[0].startswith(f"session {session} started")
    assert any("step 1: calling edit_file calc/__init__.py" in m for m in messages), messages
    assert any("so far" in m for m in messages[1:])
    values = [value for value, _ in progress]
    assert values == sorted(set(values)), "progress must increase with every notification"

    status = answer(await client.call_tool("get_status", {"session_id": session[:15]}))
    assert status["session_id"] == session and status["status"] == "finished"
    assert status["finish_reason"] == "completed" and status["iterations"] == 2
    assert status["tokens"]["total"] == 38 and status["cost_usd"] > 0  # two fake replies

    diff = await client.call_tool("get_diff", {"session_id": session})
    assert not diff.is_error
    assert "-    return a - b\n+    return a + b" in diff.content[0].text

    fake.enqueue(
        reply(tool_calls=[("write_file", {"path": "NOTES.md", "content": "add fixed\n"})]),
        reply(tool_calls=[("finish", {"summary": "noted"})]),
    )
    follow = answer(
        await client.call_tool("send_message", {"session_id": session, "message": "write NOTES.md"})
    )
    assert follow["session_id"] == session and follow["finish_reason"] == "completed"
    assert (workspace / "NOTES.md").read_text() == "add fixed\n"
    history = [str(m.get("content")) for m in fake.requests[-2].json["messages"]]
    assert any("fix add" in text for text in history) and "write NOTES.md" in history

    undone = answer(await client.call_tool("undo", {"session_id": session}))
    assert [item["path"] for item in undone["undone"]] == ["NOTES.md"]
    assert not (workspace / "NOTES.md").exists()
    undone = answer(
        await client.call_tool(
            "undo", {"session_id": session, "what": "file", "path": "calc/__init__.py"}
        )
    )
    assert undone["undone"][0]["action"] == "reverted"
    assert (workspace / "calc" / "__init__.py").read_text() == BUGGY_ADD
    empty = await client.call_tool("get_diff", {"session_id": session})
    assert "no pending file changes" in empty.content[0].text

    listed = answer(await client.call_tool("list_sessions", {}))
    assert [row["session_id"] for row in listed["sessions"]] == [session]


@pytest.mark.slow  # a server process starts (about 3 s)
async def test_a_session_over_stdio(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    workspace = calc_package(tmp_path)
    async with stdio_client(tmp_path, workspace, fake_openai, "--yes") as client:
        await fix_continue_undo(client, fake_openai, workspace)


@pytest.mark.slow
async def test_a_session_over_http_on_loopback(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = calc_package(tmp_path)
    with http_server(tmp_path, workspace, fake_openai, "--yes") as (url, _stderr):
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        async with Client(url) as client:
            await fix_continue_undo(client, fake_openai, workspace)
        # a web page that resolves its own name to 127.0.0.1 cannot drive the server
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        try:
            conn.request(
                "POST",
                parts.path,
                body=b"{}",
                headers={"Host": "attacker.example", "Content-Type": "application/json"},
            )
            assert conn.getresponse().status in (403, 421)
        finally:
            conn.close()


def test_the_http_transport_offers_no_host_option(tmp_path: Path) -> None:
    from tests.support.cli import clean_env, journeyman

    done = journeyman(
        "mcp", "serve", "--transport", "http", "--host", "0.0.0.0", "-w", str(tmp_path),
        env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 2 and "--host" in done.stderr


@pytest.mark.slow  # a journeyman server process and a run (~3 s on a busy machine)
async def test_edit_tool_chooses_the_tool_the_runs_edit_with(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = calc_package(tmp_path)
    (workspace / "calc" / "__init__.py").write_text(FIXED_ADD)  # the check passes as it is
    fake_openai.enqueue(reply(tool_calls=[("finish", {"summary": "nothing to do"})]))
    async with stdio_client(tmp_path, workspace, fake_openai, "--edit-tool", "edit_file") as client:
        answer(await client.call_tool("start_run", {"task": "look at add"}))
    offered = [tool["function"]["name"] for tool in fake_openai.requests[0].json["tools"]]
    # an OpenAI-compatible provider gets apply_patch unless --edit-tool says otherwise
    assert "edit_file" in offered and "apply_patch" not in offered, offered
