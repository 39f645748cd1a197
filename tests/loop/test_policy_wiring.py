"""Rules, permissions and hooks as the kernel applies them, through scripted runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from journeyman import FinishReason
from journeyman.core import events as ev
from journeyman.core.messages import Role
from journeyman.policy.hooks import HookEvent, HookOutcome, HookPayload, ShellHookConfig
from journeyman.policy.permissions import (
    ApprovalAnswer,
    ApprovalRequest,
    PermissionMode,
)
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from tests.fakes.agents import FINISH, WRITE, call, turn
from tests.fakes.agents import policy_agent as agent_for


def tool_texts(provider: ScriptedProvider, index: int) -> list[str]:
    """The tool results the model saw in request `index`."""
    return [
        m.tool_result.content
        for m in provider.requests[index].messages
        if m.role is Role.TOOL and m.tool_result is not None
    ]


# --- rules ----------------------------------------------------------------------------------


async def test_rules_reach_the_system_prompt_in_priority_order(tmp_path: Path) -> None:
    agent, provider, workspace = agent_for(tmp_path, [turn(text="ok")])
    (workspace / "AGENTS.md").write_text("Use tabs.\n")
    (workspace / ".journeyman").mkdir()
    (workspace / ".journeyman" / "rules.md").write_text("Use four spaces.\n")
    await agent.run("format the code")
    system = provider.requests[0].system
    assert "Use tabs." in system and "Use four spaces." in system
    assert system.index("Use tabs.") < system.index("Use four spaces.")  # highest priority last
    stored = SessionStore(tmp_path / "sessions")
    try:
        (record,) = stored.list_sessions()
        assert "Use four spaces." in stored.load_session(record.record.id).system_prompt
    finally:
        stored.close()


async def test_no_rules_files_leave_the_prompt_alone(tmp_path: Path) -> None:
    agent, provider, _ = agent_for(tmp_path, [turn(text="ok")])
    await agent.run("anything")
    assert "Use tabs" not in provider.requests[0].system
    assert provider.requests[0].system.endswith("what blocks you.\n")


# --- permissions ----------------------------------------------------------------------------


async def test_without_a_policy_every_call_runs(tmp_path: Path) -> None:
    agent, _, workspace = agent_for(tmp_path, [turn(WRITE), turn(FINISH)])
    result = await agent.run("write it")
    assert result.finish_reason is FinishReason.COMPLETED
    assert (workspace / "out.txt").read_text() == "hello\n"


async def test_default_mode_without_anyone_to_ask_refuses_writes(tmp_path: Path) -> None:
    script = [turn(call("list_files", path="."), WRITE), turn(FINISH)]
    agent, provider, workspace = agent_for(tmp_path, script, mode=PermissionMode.DEFAULT)
    result = await agent.run("write it")
    # the model finished, but the write it needed never ran: not a success
    assert result.finish_reason is FinishReason.REFUSED and not result.success
    assert [(r.tool, r.argument) for r in result.refused_calls] == [("write_file", "out.txt")]
    assert "--yes" in (result.error or "")
    assert not (workspace / "out.txt").exists()
    listing, refusal = tool_texts(provider, 1)
    assert "needs the user's approval" in refusal and "--yes" in refusal
    assert "refused" not in listing  # reads still run


async def test_a_first_refusal_is_not_a_mistake_but_repeating_it_is(tmp_path: Path) -> None:
    script = [turn(WRITE)] * 4
    agent, _, _ = agent_for(
        tmp_path, script, mode=PermissionMode.DEFAULT, config={"max_consecutive_mistakes": 2}
    )
    result = await agent.run("write it")
    assert result.finish_reason is FinishReason.MAX_CONSECUTIVE_MISTAKES
    assert result.iterations == 3  # refusal 1 is free; refusals 2 and 3 are mistakes


async def test_yes_approves_what_would_be_asked_but_not_deny_rules(tmp_path: Path) -> None:
    script = [turn(WRITE, call("run_command", command="rm -rf build")), turn(FINISH)]
    agent, provider, workspace = agent_for(
        tmp_path,
        script,
        mode=PermissionMode.DEFAULT,
        deny=["run_command(rm -rf *)"],
        assume_yes=True,
    )
    await agent.run("write it")
    assert (workspace / "out.txt").read_text() == "hello\n"
    assert "not allowed" in tool_texts(provider, 1)[1]


async def test_plan_mode_refuses_edits_even_with_yes(tmp_path: Path) -> None:
    agent, provider, workspace = agent_for(
        tmp_path, [turn(WRITE), turn(FINISH)], mode=PermissionMode.PLAN, assume_yes=True
    )
    await agent.run("write it")
    assert not (workspace / "out.txt").exists()
    assert "not allowed" in tool_texts(provider, 1)[0]


async def test_always_is_remembered_for_the_project_across_runs(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    async def approve_always(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer.ALWAYS

    script = [turn(WRITE), turn(FINISH), turn(WRITE), turn(FINISH)]
    agent, _, workspace = agent_for(
        tmp_path, script, mode=PermissionMode.DEFAULT, permission_approver=approve_always
    )
    await agent.run("first")
    (workspace / "out.txt").unlink()
    fresh, _, _ = agent_for(tmp_path, script[2:], mode=PermissionMode.DEFAULT)
    await fresh.run("second")  # no approver at all, yet the remembered rule lets it run
    assert len(asked) == 1 and asked[0].tool_name == "write_file"
    assert (workspace / "out.txt").read_text() == "hello\n"


async def test_a_declined_call_is_not_run(tmp_path: Path) -> None:
    async def decline(_request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer.DENY

    agent, provider, workspace = agent_for(
        tmp_path,
        [turn(WRITE), turn(FINISH)],
        mode=PermissionMode.DEFAULT,
        permission_approver=decline,
    )
    await agent.run("write it")
    assert not (workspace / "out.txt").exists()
    assert "the user declined" in tool_texts(provider, 1)[0]


def stored_approvals(tmp_path: Path, session_id: str) -> list[tuple[str, bool, str]]:
    """(tool, granted, decided_by) of every approval event stored for the session."""
    store = SessionStore(tmp_path / "sessions")
    try:
        return [
            (e["tool_name"], e["granted"], e["decided_by"])
            for e in store.events(session_id)
            if e["type"] == "approval"
        ]
    finally:
        store.close()


async def test_every_approval_decision_is_an_event_and_is_stored(tmp_path: Path) -> None:
    answers = iter([ApprovalAnswer.ALLOW, ApprovalAnswer.ALWAYS, ApprovalAnswer.DENY])

    async def answer(_request: ApprovalRequest) -> ApprovalAnswer:
        return next(answers)

    script = [
        turn(call("list_files", path=".")),  # read-only: needs no approval, no event
        turn(WRITE),
        turn(call("run_command", command="echo hi")),
        turn(call("run_command", command="echo hi", cid="again")),  # remembered now
        turn(call("write_file", path="b.txt", content="x")),
        turn(call("run_command", command="rm -rf build")),
        turn(FINISH),
    ]
    seen: list[ev.Event] = []
    agent, _, _ = agent_for(
        tmp_path,
        script,
        mode=PermissionMode.DEFAULT,
        deny=["run_command(rm -rf *)"],
        permission_approver=answer,
    )
    agent.on_event = seen.append
    result = await agent.run("do it")
    expected = [
        ("write_file", True, "user"),
        ("run_command", True, "user_always"),
        ("run_command", True, "remembered"),
        ("write_file", False, "user"),
        ("run_command", False, "deny_rule"),
    ]
    emitted = [e for e in seen if isinstance(e, ev.ApprovalDecided)]
    assert [(e.tool_name, e.granted, e.decided_by) for e in emitted] == expected
    assert emitted[0].call_id == WRITE.id and emitted[0].iteration == 2
    assert "rm -rf" in emitted[-1].reason  # the deny rule, not the call's arguments
    assert stored_approvals(tmp_path, result.session_id) == expected


async def test_yes_plan_mode_and_a_run_that_cannot_ask_say_so(tmp_path: Path) -> None:
    seen: list[ev.Event] = []
    script = [turn(WRITE), turn(FINISH)]
    for mode, yes, by, granted in [
        (PermissionMode.DEFAULT, True, "yes", True),
        (PermissionMode.DEFAULT, False, "no_approver", False),
        (PermissionMode.PLAN, True, "plan_mode", False),
    ]:
        seen.clear()
        agent, _, _ = agent_for(tmp_path, script, mode=mode, assume_yes=yes)
        agent.on_event = seen.append
        await agent.run("write it")
        decided = [(e.granted, e.decided_by) for e in seen if isinstance(e, ev.ApprovalDecided)]
        assert decided == [(granted, by)]


# --- hooks ----------------------------------------------------------------------------------


async def test_pre_tool_use_deny_keeps_the_tool_from_running(tmp_path: Path) -> None:
    agent, provider, workspace = agent_for(tmp_path, [turn(WRITE), turn(FINISH)])
    agent.hooks.add(
        HookEvent.PRE_TOOL_USE,
        lambda _e, _p: HookOutcome.deny("no writes today"),
        matcher="write_file",
    )
    result = await agent.run("write it")
    assert result.finish_reason is FinishReason.COMPLETED
    assert not (workspace / "out.txt").exists()
    assert "no writes today" in tool_texts(provider, 1)[0]


async def test_post_tool_use_appends_and_sees_the_result(tmp_path: Path) -> None:
    seen: list[HookPayload] = []

    def review(_event: HookEvent, payload: HookPayload) -> HookOutcome:
        seen.append(payload)
        return HookOutcome.augment("reviewed by the hook")

    agent, provider, _ = agent_for(tmp_path, [turn(WRITE), turn(FINISH)])
    agent.hooks.add(HookEvent.POST_TOOL_USE, review, matcher="write_file")
    await agent.run("write it")
    assert tool_texts(provider, 1)[0].endswith("reviewed by the hook")
    assert seen[0].tool_name == "write_file" and seen[0].is_error is False


async def test_halt_ends_the_run_with_the_reason(tmp_path: Path) -> None:
    agent, provider, workspace = agent_for(tmp_path, [turn(WRITE), turn(FINISH)])
    agent.hooks.add(HookEvent.PRE_TOOL_USE, lambda _e, _p: HookOutcome.halt("red button"))
    result = await agent.run("write it")
    assert result.finish_reason is FinishReason.HALTED
    assert "red button" in (result.error or "")
    assert len(provider.requests) == 1 and not (workspace / "out.txt").exists()


async def test_stop_hook_can_send_the_model_back_to_work(tmp_path: Path) -> None:
    answers = iter([HookOutcome.deny("the tests were not run"), None])
    agent, provider, _ = agent_for(tmp_path, [turn(FINISH), turn(FINISH)])
    agent.hooks.add(HookEvent.STOP, lambda _e, _p: next(answers))
    result = await agent.run("do it")
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.iterations == 2
    last = provider.requests[1].messages[-1]
    assert last.role is Role.USER and "the tests were not run" in last.content


async def test_user_prompt_submit_can_refuse_the_task(tmp_path: Path) -> None:
    agent, provider, _ = agent_for(tmp_path, [turn(text="never asked")])
    agent.hooks.add(
        HookEvent.USER_PROMPT_SUBMIT, lambda _e, p: HookOutcome.deny(f"not allowed: {p.prompt}")
    )
    result = await agent.run("deploy to production")
    assert result.finish_reason is FinishReason.HALTED
    assert "not allowed: deploy to production" in (result.error or "")
    assert provider.requests == []


async def test_session_hooks_see_start_and_end_and_may_add_context(tmp_path: Path) -> None:
    events: list[tuple[HookEvent, dict[str, Any]]] = []

    def record(event: HookEvent, payload: HookPayload) -> HookOutcome:
        events.append((event, dict(payload.extra)))
        return HookOutcome.inject("The CI is red since Monday.")

    agent, provider, _ = agent_for(tmp_path, [turn(text="ok")])
    agent.hooks.add(HookEvent.SESSION_START, record)
    agent.hooks.add(HookEvent.SESSION_END, lambda e, p: events.append((e, dict(p.extra))))
    await agent.run("look around")
    assert events == [
        (HookEvent.SESSION_START, {"resumed": False}),
        (HookEvent.SESSION_END, {"finish_reason": "answered"}),
    ]
    assert "The CI is red since Monday." in provider.requests[0].messages[-1].content


async def test_a_hanging_or_failing_hook_never_breaks_the_run(tmp_path: Path) -> None:
    async def hang(_event: HookEvent, _payload: HookPayload) -> None:
        await asyncio.sleep(30)

    def explode(_event: HookEvent, _payload: HookPayload) -> None:
        raise RuntimeError("hook bug")

    agent, _, workspace = agent_for(tmp_path, [turn(WRITE), turn(FINISH)])
    agent.hooks.add(HookEvent.PRE_TOOL_USE, hang, timeout=0.2)
    agent.hooks.add(HookEvent.POST_TOOL_USE, explode)
    result = await agent.run("write it")
    assert result.finish_reason is FinishReason.COMPLETED
    assert (workspace / "out.txt").read_text() == "hello\n"


async def test_shell_hook_from_config_denies_with_exit_status_2(tmp_path: Path) -> None:
    hook = ShellHookConfig(
        event=HookEvent.PRE_TOOL_USE,
        matcher="run_command",
        command="grep -q 'git push' && { echo 'pushing is for humans' >&2; exit 2; }; exit 0",
    )
    script = [turn(call("run_command", command="git push origin main")), turn(FINISH)]
    agent, provider, _ = agent_for(tmp_path, script, config={"hooks": [hook]})
    await agent.run("ship it")
    assert "pushing is for humans" in tool_texts(provider, 1)[0]


async def test_notification_hooks_hear_about_approval_questions(tmp_path: Path) -> None:
    heard: list[str] = []

    async def approve(_request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer.ALLOW

    agent, _, workspace = agent_for(
        tmp_path,
        [turn(WRITE), turn(FINISH)],
        mode=PermissionMode.DEFAULT,
        permission_approver=approve,
    )
    agent.hooks.add(HookEvent.NOTIFICATION, lambda _e, p: heard.append(p.message or ""))
    await agent.run("write it")
    assert (workspace / "out.txt").exists()
    assert len(heard) == 1 and "needs your approval" in heard[0]
