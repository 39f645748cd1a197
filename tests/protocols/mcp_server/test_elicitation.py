"""Approval questions asked through MCP elicitation: the client's user answers for a run that
waits; no answer, a decline, a background run or a client without elicitation refuses."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import ElicitResult

from journeyman.policy.permissions import ApprovalRequest, PermissionMode
from journeyman.protocols.mcp_server.approval import question
from tests.fakes.long_patch import (
    ESCAPED_LINE,
    ESCAPED_NAME,
    HIDDEN_LINE,
    SETTINGS_TAIL,
    long_patch_workspace,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import BUGGY_ADD, calc_package
from tests.fakes.script import reply
from tests.protocols.mcp_server.conftest import http_server, in_process_client, stdio_client
from tests.protocols.mcp_server.test_trust import FIX, answer

DONE = reply(tool_calls=[("finish", {"summary": "done"})])


class Answering:
    """An elicitation callback that answers each question with the next of `answers`
    (a decision, "decline", or "wait": never answers), recording the questions."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.questions: list[tuple[str, Any]] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.questions.append((params.message, params.requested_schema))
        given = self.answers.pop(0)
        if given == "wait":
            await asyncio.sleep(30)  # cut short by the server's timeout
        if given == "decline":
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content={"decision": given})


def fixed(workspace: Path) -> bool:
    return (workspace / "calc" / "__init__.py").read_text() != BUGGY_ADD


async def test_an_approved_edit_is_applied(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    asker = Answering("allow_once")
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False,
        elicitation_callback=asker, client_mode="legacy",
    ) as client:  # fmt: skip
        run = answer(await client.call_tool("start_run", {"task": "fix add"}))
    assert run["finish_reason"] == "completed", run
    assert fixed(workspace)
    ((message, schema),) = asker.questions
    assert "edit_file" in message and "+" in message and "a + b" in message, message
    assert set(schema["properties"]["decision"]["enum"]) >= {"allow_once", "deny"}


async def test_a_declined_edit_is_not_applied_and_the_model_is_told(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    asker = Answering("decline")
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False,
        elicitation_callback=asker, client_mode="legacy",
    ) as client:  # fmt: skip
        run = answer(await client.call_tool("start_run", {"task": "fix add"}))
    assert not fixed(workspace)
    assert len(asker.questions) == 1
    told = str(fake_openai.requests[1])
    assert "the user declined this call" in told, told
    assert run["refused_calls"][0]["tool"] == "edit_file"


async def test_a_deny_answer_refuses_like_a_decline(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    asker = Answering("deny")
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False,
        elicitation_callback=asker, client_mode="legacy",
    ) as client:  # fmt: skip
        answer(await client.call_tool("start_run", {"task": "fix add"}))
    assert not fixed(workspace) and len(asker.questions) == 1


async def test_no_answer_within_the_timeout_refuses_and_the_run_goes_on(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    asker = Answering("wait")
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False,
        elicitation_callback=asker, client_mode="legacy", approval_timeout_s=0.2,
    ) as client:  # fmt: skip
        run = answer(await client.call_tool("start_run", {"task": "fix add"}))
    assert len(asker.questions) == 1
    assert run["finish_reason"] == "refused", run
    assert len(fake_openai.requests) == 2  # the model was told and went on to finish
    assert not fixed(workspace)
    assert run["refused_calls"][0]["tool"] == "edit_file"


async def test_allow_always_is_remembered(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    command = reply(tool_calls=[("run_command", {"command": "echo hi"})])
    fake_openai.enqueue(command, command, DONE)
    asker = Answering("allow_always")
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False,
        elicitation_callback=asker, client_mode="legacy",
    ) as client:  # fmt: skip
        run = answer(await client.call_tool("start_run", {"task": "say hi twice"}))
    assert run["finish_reason"] == "completed", run
    assert run["refused_calls"] == []
    assert len(asker.questions) == 1  # the second call ran on the remembered rule
    assert "allow_always" in asker.questions[0][0]


async def test_a_client_without_elicitation_is_refused_with_how_to_allow(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False
    ) as client:
        run = answer(await client.call_tool("start_run", {"task": "fix add"}))
    assert not fixed(workspace)
    notes = " ".join(run["notes"])
    assert "--yes" in notes and "elicitation" in notes


async def test_a_background_run_does_not_ask(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    asker = Answering("allow_once")
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False,
        elicitation_callback=asker, client_mode="legacy",
    ) as client:  # fmt: skip
        started = answer(await client.call_tool("start_run", {"task": "fix", "wait": False}))
        run = answer(
            await client.call_tool(
                "get_status", {"session_id": started["session_id"], "wait_s": 60}
            )
        )
    assert asker.questions == []
    assert not fixed(workspace)
    assert run["refused_calls"][0]["tool"] == "edit_file"


async def test_a_deny_rule_refuses_without_asking(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    asker = Answering("allow_once")
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False,
        permission_mode="plan", elicitation_callback=asker, client_mode="legacy",
    ) as client:  # fmt: skip
        answer(await client.call_tool("start_run", {"task": "fix"}))
    assert asker.questions == []
    assert not fixed(workspace)


async def test_an_approved_edit_over_stdio(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    asker = Answering("allow_once")
    async with stdio_client(
        tmp_path, workspace, fake_openai, "--no-verify", elicitation_callback=asker, mode="legacy"
    ) as client:
        run = answer(await client.call_tool("start_run", {"task": "fix add"}))
    assert run["finish_reason"] == "completed", run
    assert fixed(workspace) and len(asker.questions) == 1


async def test_a_declined_edit_over_http(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    asker = Answering("decline")
    with http_server(tmp_path, workspace, fake_openai, "--no-verify") as (url, _lines):
        async with Client(url, elicitation_callback=asker, mode="legacy") as client:
            run = answer(await client.call_tool("start_run", {"task": "fix add"}))
    assert not fixed(workspace) and len(asker.questions) == 1
    assert run["refused_calls"][0]["tool"] == "edit_file"


async def test_a_client_whose_channel_cannot_carry_questions_is_told_how_to_allow(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    fake_openai.enqueue(FIX, DONE)
    asker = Answering("allow_once")
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False,
        elicitation_callback=asker,  # the handshake-free in-process mode: no back-channel
    ) as client:  # fmt: skip
        run = answer(await client.call_tool("start_run", {"task": "fix add"}))
    assert asker.questions == [] and not fixed(workspace)
    assert "--yes" in " ".join(run["notes"])


async def test_a_long_patch_is_asked_about_whole_with_the_file_it_adds_last(
    fake_openai: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = calc_package(tmp_path)
    patch = long_patch_workspace(workspace)
    fake_openai.enqueue(reply(tool_calls=[("apply_patch", {"patch": patch})]), DONE)
    asker = Answering("deny")
    async with in_process_client(
        tmp_path, workspace, fake_openai, monkeypatch, assume_yes=False, verify=False,
        elicitation_callback=asker, client_mode="legacy", edit_tool="apply_patch",
    ) as client:  # fmt: skip
        answer(await client.call_tool("start_run", {"task": "double the settings"}))
    ((message, _),) = asker.questions
    assert "create backdoor.py:" in message and f"+{HIDDEN_LINE}" in message
    assert message.count("# doubled") == 620 and "not shown" not in message
    assert f"+{SETTINGS_TAIL}" in message
    assert f"create {ESCAPED_NAME}:" in message and f"+{ESCAPED_LINE}" in message
    assert not {"\x1b", "\r", "\x07", "\u202e"} & set(message)
    assert not (workspace / "backdoor.py").exists()


def test_the_tool_name_and_reason_of_a_question_are_escaped() -> None:
    request = ApprovalRequest(
        tool_name="mcp__x__run\n  │ $ true",
        args={"command": "ls"},
        reason="asked by a hook: \x1b[2Kfine",
        mode=PermissionMode.DEFAULT,
        project="/repo",
    )
    asked = question(request, "/repo")
    assert asked.startswith("journeyman wants to run mcp__x__run\\n  │ $ true (")
    assert "\\x1b[2Kfine" in asked and "\x1b" not in asked
