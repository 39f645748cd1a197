"""The harness owns the verdict: success claims are checked after the last change, in every mode."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from journeyman import Agent, AgentConfig, FinishReason, ToolArgs, tool
from journeyman.core.messages import Role
from journeyman.core.result import FinishCategory
from journeyman.loop.config import ModeName
from journeyman.policy.permissions import PermissionMode, PermissionsConfig
from journeyman.providers.base import ModelRequest
from journeyman.providers.scripted import ScriptedProvider
from journeyman.tools.base import ToolKind
from journeyman.tools.builtin import default_tools
from journeyman.tools.sandbox import SandboxKind
from tests.fakes.agents import call, make_agent, turn

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
CHECK = "from calc import add\nassert add(2, 3) == 5, f'add(2, 3) gave {add(2, 3)}'\nprint('ok')\n"
CHECK_COMMAND = f"{sys.executable} check.py"


FIX = turn(call("edit_file", path="calc.py", old_string="a - b", new_string="a + b"))
FINISH = turn(call("finish", summary="add() adds now"))
CLAIM = turn(text="Done: the test passes now.")


def project(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    (root / "check.py").write_text(CHECK)
    return root


def agent_for(
    tmp_path: Path,
    script: list[Any],
    *,
    permissions: PermissionsConfig | None = None,
    **config: Any,
) -> tuple[Agent, ScriptedProvider, Path]:
    """An agent on the calc project whose check is `CHECK_COMMAND` unless `config` says."""
    root = tmp_path / "ws" if (tmp_path / "ws").exists() else project(tmp_path)
    fields: dict[str, Any] = {
        "sandbox": SandboxKind.LOCAL,
        "verify_command": CHECK_COMMAND,
        "permissions": permissions,
    }
    fields.update(config)
    agent, provider = make_agent(tmp_path, script, **fields)
    return agent, provider, root


def harness_messages(request: ModelRequest) -> list[str]:
    return [
        m.content
        for m in request.messages
        if m.role is Role.USER and m.content.startswith("[journeyman]")
    ]


async def test_a_prose_claim_with_a_failing_check_is_not_a_success(tmp_path: Path) -> None:
    agent, provider, _ = agent_for(tmp_path, [CLAIM, CLAIM], max_verify_rounds=2)
    result = await agent.run("make the failing test pass")

    assert not result.success
    assert result.finish_reason is FinishReason.VERIFICATION_FAILED
    assert result.finish_reason.category is FinishCategory.RETRYABLE
    assert "still fails (exit code 1)" in (result.error or "")
    evidence = result.verification
    assert evidence is not None and evidence.exit_code == 1 and not evidence.passed
    assert "add(2, 3) gave -1" in evidence.output_tail
    assert result.files_changed == []
    told = harness_messages(provider.requests[1])[-1]
    assert f"journeyman ran the check `{CHECK_COMMAND}`" in told
    assert "has not been changed" in told and "exit code 1" in told
    assert "check 1 of 2" in told


async def test_a_fix_then_finish_is_checked_after_the_last_change(tmp_path: Path) -> None:
    agent, provider, _root = agent_for(tmp_path, [FIX, FINISH])
    result = await agent.run("make the failing test pass")

    assert result.success and result.finish_reason is FinishReason.COMPLETED
    evidence = result.verification
    assert evidence is not None
    assert evidence.command == CHECK_COMMAND and evidence.exit_code == 0
    assert evidence.after_last_change and evidence.passed
    assert "ok" in evidence.output_tail
    assert result.files_changed == ["calc.py"]
    assert result.refused_calls == []
    data = result.to_dict()
    assert data["verification"]["after_last_change"] is True
    assert data["verification"]["exit_code"] == 0
    assert data["files_changed"] == ["calc.py"]
    assert provider.remaining == 0


async def test_a_claim_without_a_fix_goes_back_to_the_model(tmp_path: Path) -> None:
    agent, provider, root = agent_for(tmp_path, [FINISH, FIX, FINISH])
    result = await agent.run("make the failing test pass")

    assert result.success and result.finish_reason is FinishReason.COMPLETED
    assert (root / "calc.py").read_text() == FIXED
    told = harness_messages(provider.requests[1])[-1]
    assert "exit code 1" in told and "add(2, 3) gave -1" in told
    # the harness speaks of its own action, and never of a finish the model did not make
    assert "you ran" not in told.lower()
    assert result.verification is not None and result.verification.after_last_change


async def test_the_check_has_its_own_timeout(tmp_path: Path) -> None:
    slow = f"{sys.executable} -c 'import time; time.sleep(1.5)'"
    agent, _, _ = agent_for(
        tmp_path, [FINISH], verify_command=slow, tool_timeout_s=0.5, verify_timeout_s=10
    )
    result = await agent.run("make the failing test pass")

    assert result.success, result.error
    assert result.verification is not None and result.verification.timeout_s == 10


async def test_a_check_past_its_own_timeout_fails(tmp_path: Path) -> None:
    slow = f"{sys.executable} -c 'import time; time.sleep(5)'"
    agent, _provider, _ = agent_for(
        tmp_path, [FINISH], verify_command=slow, verify_timeout_s=0.5, max_verify_rounds=1
    )
    result = await agent.run("make the failing test pass")

    assert result.finish_reason is FinishReason.VERIFICATION_FAILED
    assert result.verification is not None and result.verification.timed_out


async def test_no_verify_accepts_a_prose_answer(tmp_path: Path) -> None:
    agent, _, _ = agent_for(tmp_path, [CLAIM], verify=False)
    result = await agent.run("what does add() do?")

    assert result.success and result.finish_reason is FinishReason.ANSWERED
    assert result.verification is None


async def test_ask_mode_offers_only_read_tools_and_accepts_prose(tmp_path: Path) -> None:
    answer = turn(text="add() subtracts its second argument from the first.")
    script = [turn(call("read_file", path="calc.py")), answer]
    agent, provider, _ = agent_for(tmp_path, script, mode=ModeName.ASK)
    result = await agent.run("what does add() do?")

    assert result.success and result.finish_reason is FinishReason.ANSWERED
    assert result.verification is None  # the failing check never ran
    offered = {spec.name for spec in provider.requests[0].tools}
    assert "read_file" in offered and "finish" in offered
    assert not offered & {"edit_file", "write_file", "run_command"}


async def test_ask_mode_cannot_change_the_workspace(tmp_path: Path) -> None:
    script = [FIX, turn(text="I could not edit it.")]
    agent, provider, root = agent_for(tmp_path, script, mode=ModeName.ASK)
    await agent.run("what does add() do?")

    assert (root / "calc.py").read_text() == BUGGY
    results = [m for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert results and "unknown tool" in results[-1].content


async def test_refused_edit_and_command_end_as_refused(tmp_path: Path) -> None:
    script = [
        turn(
            call("edit_file", path="calc.py", old_string="a - b", new_string="a + b"),
            call("run_command", command="python check.py"),
        ),
        FINISH,
    ]
    agent, _, root = agent_for(
        tmp_path, script, permissions=PermissionsConfig(mode=PermissionMode.DEFAULT), verify=False
    )
    result = await agent.run("make the failing test pass")

    assert result.finish_reason is FinishReason.REFUSED and not result.success
    refused = [(r.tool, r.argument) for r in result.refused_calls]
    assert refused == [("edit_file", "calc.py"), ("run_command", "python check.py")]
    assert all("approval" in r.reason for r in result.refused_calls)
    assert (root / "calc.py").read_text() == BUGGY


async def test_a_refusal_that_later_succeeds_is_not_listed(tmp_path: Path) -> None:
    edit = call("edit_file", path="calc.py", old_string="a - b", new_string="a + b")
    permissions = PermissionsConfig(mode=PermissionMode.DEFAULT)
    asked: list[str] = []

    async def approve_second(request: Any) -> str:
        asked.append(request.tool_name)
        return "deny" if len(asked) == 1 else "allow"

    agent, _, _ = agent_for(tmp_path, [turn(edit), turn(edit), FINISH], permissions=permissions)
    agent.permission_approver = approve_second
    result = await agent.run("make the failing test pass")

    assert result.success, result.error
    assert result.refused_calls == []


async def test_every_mode_checks_a_claim(tmp_path: Path) -> None:
    plan = turn(text="Plan: fix add().")
    agent, _provider, _ = agent_for(
        tmp_path, [plan, CLAIM], mode=ModeName.PLAN_SOLVE, max_verify_rounds=1
    )
    result = await agent.run("make the failing test pass")

    assert result.finish_reason is FinishReason.VERIFICATION_FAILED


async def test_a_check_denied_by_a_rule_is_a_configuration_error(tmp_path: Path) -> None:
    permissions = PermissionsConfig(mode=PermissionMode.TRUSTED, deny=["run_command(*check.py*)"])
    agent, _, _ = agent_for(tmp_path, [FIX, FINISH], permissions=permissions)
    result = await agent.run("make the failing test pass")

    assert result.finish_reason is FinishReason.CONFIGURATION_ERROR
    assert "--no-verify" in (result.error or "")
    assert result.verification is not None and result.verification.not_run


@pytest.mark.skipif(shutil.which("uv", path="/usr/bin") is not None, reason="uv is installed")
async def test_a_detected_check_without_its_program_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    (root / "uv.lock").write_text("")
    (root / "pyproject.toml").write_text('[project]\nname = "calc"\n[tool.pytest.ini_options]\n')
    (root / "test_calc.py").write_text(
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    tools = tmp_path / "bin"
    tools.mkdir()
    runner = tools / "pytest"
    runner.write_text(f'#!/bin/sh\nexec {sys.executable} -m pytest -q -p no:cacheprovider "$@"\n')
    runner.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin")
    agent, provider, _ = agent_for(tmp_path, [FIX, FINISH], verify_command=None)
    result = await agent.run("make the failing test pass")

    assert result.success, result.error
    assert result.verification is not None and result.verification.command == "pytest"
    assert provider.remaining == 0


# --- the harness's messages do not blame the model for what it did not do -------------------


async def test_a_language_server_lookup_counts_as_reading_before_an_edit(tmp_path: Path) -> None:
    class WhereArgs(ToolArgs):
        path: str

    @tool(args=WhereArgs, read_only=True, kind=ToolKind.READ)
    async def lsp_symbols(args: WhereArgs, ctx: object) -> str:
        """Symbols of a file (a stand-in for a language-server lookup)."""
        return "add (function) line 1"

    root = project(tmp_path)
    provider = ScriptedProvider([turn(call("lsp_symbols", path="calc.py")), FIX, FINISH])
    agent = Agent(
        provider,
        workspace=root,
        tools=[*default_tools(), lsp_symbols],
        config=AgentConfig(
            session_dir=tmp_path / "sessions",
            sandbox=SandboxKind.LOCAL,
            verify_command=CHECK_COMMAND,
        ),
    )
    result = await agent.run("make the failing test pass")

    assert result.success, result.error
    told = [text for request in provider.requests for text in harness_messages(request)]
    assert not any("before any file was read" in text for text in told)


async def test_a_resumed_session_keeps_its_count_of_failed_checks(tmp_path: Path) -> None:
    # the first run fails its check once, then the provider stops answering
    agent, _, _ = agent_for(tmp_path, [CLAIM], max_verify_rounds=2)
    first = await agent.run("make the failing test pass")
    assert not first.success and first.finish_reason is not FinishReason.VERIFICATION_FAILED

    again, _, _ = agent_for(tmp_path, [CLAIM], max_verify_rounds=2)
    resumed = await again.resume(first.session_id)

    # the second failed check is the last one allowed: no third round
    assert resumed.finish_reason is FinishReason.VERIFICATION_FAILED
    assert "after 2 check(s)" in (resumed.error or "")
