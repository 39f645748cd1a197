"""Hooks: every outcome from callables and shell commands, matchers, failures and timeouts."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from journeyman.core.messages import ToolResult
from journeyman.policy.hooks import (
    HookDecision,
    HookEvent,
    HookOutcome,
    HookPayload,
    HookRunner,
    ShellHookConfig,
)
from journeyman.tools.shell import group_alive

PRE = HookEvent.PRE_TOOL_USE


def pre_payload(tmp_path: Path, tool: str = "run_command") -> HookPayload:
    return HookPayload(
        session_id="s-1", cwd=str(tmp_path), tool_name=tool, tool_args={"command": "make"}
    )


def shell(runner: HookRunner, command: str, **fields: object) -> None:
    runner.add_shell(
        ShellHookConfig.model_validate({"event": "PreToolUse", "command": command, **fields})
    )


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat[stat.rfind(")") + 2] not in "ZX"


# ---------------------------------------------------------------------------- callable hooks


async def test_no_hooks_means_continue(tmp_path: Path) -> None:
    result = await HookRunner().run(PRE, pre_payload(tmp_path))
    assert result.decision is HookDecision.CONTINUE
    assert (result.ran, result.errors, result.message, result.append) == (0, [], "", "")


async def test_callable_outcomes_sync_and_async(tmp_path: Path) -> None:
    seen: list[tuple[HookEvent, str | None]] = []

    def record(event: HookEvent, payload: HookPayload) -> None:
        seen.append((event, payload.tool_name))

    async def inject(event: HookEvent, payload: HookPayload) -> HookOutcome:
        await asyncio.sleep(0)
        return HookOutcome.inject("remember the style guide")

    def augment(event: HookEvent, payload: HookPayload) -> HookOutcome:
        return HookOutcome.augment("[lint: 0 warnings]")

    runner = HookRunner()
    runner.add(PRE, record)
    runner.add("PreToolUse", inject)
    runner.add(PRE, augment)
    result = await runner.run(PRE, pre_payload(tmp_path))
    assert seen == [(PRE, "run_command")]
    assert result.ran == 3 and not result.denied and not result.errors
    assert result.message == "remember the style guide"
    assert result.append == "[lint: 0 warnings]"
    tool_result = ToolResult("c1", "run_command", "ok")
    assert result.apply_to(tool_result).content == "ok\n\n[lint: 0 warnings]"
    assert (await HookRunner().run(PRE)).apply_to(tool_result) is tool_result


async def test_halt_beats_deny_beats_continue_and_texts_keep_order() -> None:
    runner = HookRunner()
    runner.add(PRE, lambda e, p: HookOutcome.deny("no network"))
    runner.add(PRE, lambda e, p: HookOutcome(message="one"))
    runner.add(PRE, lambda e, p: HookOutcome(HookDecision.HALT, reason="quota", message="two"))
    result = await runner.run(PRE, HookPayload(tool_name="x"))
    assert result.decision is HookDecision.HALT and result.halted and result.denied
    assert result.reasons == ["no network", "quota"]
    assert result.reason == "no network\nquota"
    assert result.messages == ["one", "two"]

    deny_only = HookRunner()
    deny_only.add(PRE, lambda e, p: HookOutcome.deny("protected file"))
    deny_only.add(PRE, lambda e, p: None)
    result = await deny_only.run(PRE, HookPayload(tool_name="x"))
    assert result.decision is HookDecision.DENY and not result.halted


async def test_raising_slow_and_wrong_callables_are_reported_not_raised() -> None:
    def boom(event: HookEvent, payload: HookPayload) -> HookOutcome:
        raise RuntimeError("hook bug")

    async def slow(event: HookEvent, payload: HookPayload) -> HookOutcome:
        await asyncio.sleep(30)
        return HookOutcome.deny("too late")

    def wrong(event: HookEvent, payload: HookPayload) -> str:
        return "deny"

    runner = HookRunner()
    runner.add(HookEvent.STOP, boom)
    runner.add(HookEvent.STOP, slow, timeout=0.05, name="slow-hook")
    runner.add(HookEvent.STOP, wrong)  # type: ignore[arg-type]
    runner.add(HookEvent.STOP, lambda e, p: HookOutcome.inject("still here"))
    started = time.monotonic()
    result = await runner.run(HookEvent.STOP)
    assert time.monotonic() - started < 5
    assert result.decision is HookDecision.CONTINUE
    assert result.message == "still here"
    kinds = {(e.kind, e.hook) for e in result.errors}
    assert ("timeout", "slow-hook") in kinds
    assert any(k == "exception" and "boom" in h for k, h in kinds)
    assert any(k == "bad_return" for k, _ in kinds)
    assert "hook bug" in next(e.message for e in result.errors if e.kind == "exception")


async def test_matcher_is_a_full_regex_on_the_tool_name() -> None:
    calls: list[str] = []
    runner = HookRunner()
    runner.add(
        PRE, lambda e, p: calls.append(f"edit:{p.tool_name}"), matcher="edit_file|write_file"
    )
    runner.add(PRE, lambda e, p: calls.append(f"any:{p.tool_name}"), matcher="*")
    runner.add(HookEvent.SESSION_START, lambda e, p: calls.append("start"), matcher="ignored")
    for tool in ("edit_file", "write_file", "write_file_extra", "read_file"):
        await runner.run(PRE, HookPayload(tool_name=tool))
    await runner.run(HookEvent.SESSION_START)
    await runner.run(HookEvent.SESSION_END)
    assert calls == [
        "edit:edit_file",
        "any:edit_file",
        "edit:write_file",
        "any:write_file",
        "any:write_file_extra",
        "any:read_file",
        "start",
    ]
    assert runner.has(PRE) and not runner.has("Notification")
    with pytest.raises(ValueError):
        runner.add(PRE, lambda e, p: None, matcher="(unclosed")


def test_shell_hook_config_validation() -> None:
    with pytest.raises(ValidationError):
        ShellHookConfig.model_validate({"event": "BeforeTool", "command": "true"})
    with pytest.raises(ValidationError):
        ShellHookConfig.model_validate({"event": "Stop", "command": "true", "matcher": "(x"})
    with pytest.raises(ValidationError):
        ShellHookConfig.model_validate({"event": "Stop", "command": "true", "timeout": 0})
    config = ShellHookConfig.model_validate({"event": "Stop", "command": "true"})
    assert config.timeout == 60.0 and config.matcher is None


def test_payload_json_has_event_and_only_relevant_fields() -> None:
    payload = HookPayload(
        session_id="s", cwd="/w", tool_name="t", tool_args={"a": 1}, extra={"agent": "helper"}
    )
    assert payload.to_json(PRE) == {
        "agent": "helper",
        "event": "PreToolUse",
        "session_id": "s",
        "cwd": "/w",
        "tool_name": "t",
        "tool_args": {"a": 1},
    }


# ------------------------------------------------------------------------------- shell hooks


async def test_shell_hook_reads_the_payload_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "payload.json"
    runner = HookRunner()
    shell(runner, f"cat > {out}; echo $JOURNEYMAN_HOOK_EVENT $PWD > {out}.env")
    result = await runner.run(PRE, pre_payload(tmp_path))
    assert result.decision is HookDecision.CONTINUE and not result.errors
    data = json.loads(out.read_text())
    assert data["event"] == "PreToolUse" and data["session_id"] == "s-1"
    assert data["tool_name"] == "run_command" and data["tool_args"] == {"command": "make"}
    assert data["cwd"] == str(tmp_path)
    assert Path(f"{out}.env").read_text().split() == ["PreToolUse", str(tmp_path)]


@pytest.mark.parametrize(
    ("stdout", "decision", "field", "value"),
    [
        ('{"decision": "deny", "reason": "frozen"}', HookDecision.DENY, "reason", "frozen"),
        ('{"decision": "block", "reason": "b"}', HookDecision.DENY, "reason", "b"),
        ('{"decision": "halt", "reason": "stop"}', HookDecision.HALT, "reason", "stop"),
        ('{"message": "note this"}', HookDecision.CONTINUE, "message", "note this"),
        ('{"append": "[coverage 91%]"}', HookDecision.CONTINUE, "append", "[coverage 91%]"),
        ('{"decision": "continue"}', HookDecision.CONTINUE, "message", ""),
        ("just some log output", HookDecision.CONTINUE, "message", ""),
        ("", HookDecision.CONTINUE, "message", ""),
    ],
)
async def test_shell_hook_json_outcomes(
    tmp_path: Path, stdout: str, decision: HookDecision, field: str, value: str
) -> None:
    (tmp_path / "out").write_text(stdout)
    runner = HookRunner()
    shell(runner, f"cat > /dev/null; cat {tmp_path / 'out'}")
    result = await runner.run(PRE, pre_payload(tmp_path))
    assert result.decision is decision
    assert not result.errors
    assert getattr(result, field) == value


async def test_exit_two_denies_with_stderr(tmp_path: Path) -> None:
    runner = HookRunner()
    shell(runner, "echo 'rm is not allowed here' >&2; exit 2", matcher="run_command")
    result = await runner.run(PRE, pre_payload(tmp_path))
    assert result.decision is HookDecision.DENY
    assert result.reason == "rm is not allowed here"
    assert not result.errors
    silent = HookRunner()
    shell(silent, "exit 2")
    assert "denied by hook" in (await silent.run(PRE, pre_payload(tmp_path))).reason


async def test_other_failures_are_reported_and_the_run_continues(tmp_path: Path) -> None:
    runner = HookRunner()
    shell(runner, "echo broken >&2; exit 3")
    shell(runner, "echo '{\"decision\": ' ")
    shell(runner, 'echo \'{"decision": "maybe"}\'')
    shell(runner, 'echo \'{"message": "fine"}\'')
    result = await runner.run(PRE, pre_payload(tmp_path))
    assert result.decision is HookDecision.CONTINUE
    assert result.message == "fine"
    kinds = sorted(e.kind for e in result.errors)
    assert kinds == ["exit_status", "invalid_output", "invalid_output"]
    status = next(e for e in result.errors if e.kind == "exit_status")
    assert "status 3" in status.message and "broken" in status.message


async def test_missing_working_directory_is_a_reported_failure(tmp_path: Path) -> None:
    runner = HookRunner()
    shell(runner, "true")
    result = await runner.run(PRE, HookPayload(cwd=str(tmp_path / "gone"), tool_name="x"))
    assert result.decision is HookDecision.CONTINUE
    assert [e.kind for e in result.errors] == ["spawn"]


async def test_hanging_shell_hook_is_killed_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    runner = HookRunner(kill_grace=0.5)
    shell(
        runner,
        f"sleep 30 & echo $$ $! > {pids}; wait",
        timeout=0.5,
    )
    shell(runner, 'echo \'{"message": "quick one"}\'')
    started = time.monotonic()
    result = await runner.run(PRE, pre_payload(tmp_path))
    assert time.monotonic() - started < 10
    assert result.decision is HookDecision.CONTINUE
    assert result.message == "quick one"
    assert [e.kind for e in result.errors] == ["timeout"]
    shell_pid, child_pid = (int(x) for x in pids.read_text().split())
    assert not group_alive(shell_pid)
    assert not alive(shell_pid) and not alive(child_pid)


async def test_a_hook_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    runner = HookRunner(kill_grace=0.2)
    shell(
        runner, f"trap '' TERM; echo $$ > {pid_file}; while true; do sleep 0.05; done", timeout=0.3
    )
    result = await runner.run(PRE, pre_payload(tmp_path))
    assert [e.kind for e in result.errors] == ["timeout"]
    assert not group_alive(int(pid_file.read_text()))


async def test_cancelling_the_run_stops_the_hook(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    runner = HookRunner(kill_grace=0.2)
    shell(runner, f"echo $$ > {pid_file}; sleep 30", timeout=30)
    task = asyncio.create_task(runner.run(PRE, pre_payload(tmp_path)))
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not group_alive(int(pid_file.read_text()))


async def test_from_config_and_python_script_hook(tmp_path: Path) -> None:
    script = tmp_path / "guard.py"
    script.write_text(
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        "if 'rm' in data['tool_args']['command']:\n"
        "    print(json.dumps({'decision': 'deny', 'reason': 'no rm'}))\n"
        "else:\n"
        "    print(json.dumps({'append': 'checked ' + data['tool_name']}))\n"
    )
    configs = [
        ShellHookConfig(
            event=HookEvent.PRE_TOOL_USE,
            command=f"{sys.executable} {script}",
            matcher="run_command",
        )
    ]
    runner = HookRunner.from_config(configs, cwd=tmp_path)
    ok = await runner.run(PRE, HookPayload(tool_name="run_command", tool_args={"command": "ls"}))
    assert ok.append == "checked run_command" and not ok.errors
    bad = await runner.run(
        PRE, HookPayload(tool_name="run_command", tool_args={"command": "rm -rf x"})
    )
    assert bad.decision is HookDecision.DENY and bad.reason == "no rm"
    other = await runner.run(PRE, HookPayload(tool_name="read_file", tool_args={}))
    assert other.ran == 0
