"""`Agent.send`: a session, finished or not, continues with a new user message, keeping its
history, budgets and undo journal."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import pytest

from journeyman import ConfigurationError, FinishReason
from journeyman.core.events import Event, RunStarted
from journeyman.core.messages import Role, Usage
from journeyman.loop.recorder import INTERRUPTED_NOTE
from journeyman.policy.permissions import PermissionMode, PermissionsConfig
from journeyman.session.store import SessionStore
from journeyman.tools.sandbox import SandboxKind
from tests.fakes.agents import Crash, call, crash, finish, hang_at, make_agent, turn, user_texts
from tests.fakes.projects import calc_finish, calc_package, fix_add, phased_calc_agent


async def test_a_finished_session_continues_with_the_whole_history(tmp_path: Path) -> None:
    write_a = call("write_file", "w1", path="a.txt", content="one\n")
    write_b = call("write_file", "w2", path="b.txt", content="two\n")
    script = [turn(write_a), finish("wrote a"), turn(write_b), finish("wrote b")]
    agent, provider = make_agent(tmp_path, script, verify=False)

    first = await agent.run("write a.txt")
    second = await agent.send(first.session_id, "now write b.txt")

    assert first.finish_reason is FinishReason.COMPLETED
    assert second.finish_reason is FinishReason.COMPLETED
    assert second.session_id == first.session_id
    assert second.final_text == "wrote b"
    follow_up_request = provider.requests[2]
    asked = [text for text in user_texts(follow_up_request) if not text.startswith("[journeyman]")]
    assert asked == ["write a.txt", "now write b.txt"]
    assert any(m.role is Role.TOOL for m in follow_up_request.messages)  # the first turn's work
    store = SessionStore(tmp_path / "sessions")
    try:
        stored = [
            m.content
            for m in store.messages(first.session_id)
            if m.role is Role.USER and not m.content.startswith("[journeyman]")
        ]
        changed = [change.path for change in store.file_changes(first.session_id)]
        steps = [change.step for change in store.file_changes(first.session_id)]
    finally:
        store.close()
    assert stored == ["write a.txt", "now write b.txt"]
    assert changed == ["a.txt", "b.txt"]  # one undo journal for both messages
    assert steps == [1, 3]  # step numbers go on from the first message's


async def test_budgets_go_on_from_what_the_session_spent(tmp_path: Path) -> None:
    script = [finish("first"), finish("second")]
    agent, _ = make_agent(tmp_path, script, verify=False, max_iterations=1)

    first = await agent.run("one")
    second = await agent.send(first.session_id, "two")

    # the iteration limit counts the turns of each message; tokens are the session's
    assert second.finish_reason is FinishReason.COMPLETED
    assert agent.economics.calls == 2
    assert agent.economics.usage.output_tokens == 10


async def test_an_extension_granted_between_messages_outlives_the_restore(
    tmp_path: Path,
) -> None:
    script = [finish("first"), finish("second"), finish("third")]
    agent, _ = make_agent(tmp_path, script, verify=False, max_total_tokens=1000)
    first = await agent.run("one")

    agent.extend_budget(additional_tokens=500)
    # the follow-up restores the stored limits (1,000) and puts the grant back on top, once
    await agent.send(first.session_id, "two")
    assert agent.economics.limits.max_total_tokens == 1500
    assert agent.economics.extensions_granted == 1
    await agent.send(first.session_id, "three")  # now a stored step holds it: not added again
    assert agent.economics.limits.max_total_tokens == 1500
    assert agent.economics.extensions_granted == 1


async def test_an_extension_outlives_a_follow_up_cancelled_before_any_step(
    tmp_path: Path,
) -> None:
    script = [finish("first"), finish("second")]
    agent, provider = make_agent(tmp_path, script, verify=False, max_total_tokens=1000)
    first = await agent.run("one")
    agent.extend_budget(additional_tokens=500)
    hanging = hang_at(provider, 1)
    sending = asyncio.create_task(agent.send(first.session_id, "slow one"))
    await hanging.wait()
    agent.cancel()
    sending.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sending

    agent.load_session(first.session_id)  # what the app does on /resume
    assert agent.economics.limits.max_total_tokens == 1500
    await agent.send(first.session_id, "new one")  # no step stored the grant: it comes back
    assert agent.economics.limits.max_total_tokens == 1500
    assert agent.economics.extensions_granted == 1


async def test_a_new_agent_continues_a_stored_session(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [finish("first")], verify=False)
    first = await agent.run("one")
    other, provider = make_agent(tmp_path, [finish("second")], verify=False)

    second = await other.send(first.session_id, "two")

    assert second.final_text == "second"
    assert user_texts(provider.requests[0]) == ["one", "two"]
    assert other.economics.usage.output_tokens == 10  # the session's first call, restored


async def test_an_empty_follow_up_is_refused(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [finish("first")], verify=False)
    first = await agent.run("one")
    with pytest.raises(ConfigurationError, match="needs some text"):
        await agent.send(first.session_id, "  ")


async def test_a_phased_follow_up_becomes_the_goal_of_the_next_context_pack(
    tmp_path: Path,
) -> None:
    calc_package(tmp_path)
    script = [fix_add("a - b", "a + b", "e1"), calc_finish(), calc_finish()]
    events: list[Event] = []
    agent, provider = phased_calc_agent(tmp_path, script, events=events)
    first = await agent.run("make add() add its arguments")
    assert first.finish_reason is FinishReason.COMPLETED, first.error

    second = await agent.send(first.session_id, "now check that sub() subtracts")

    assert second.finish_reason is FinishReason.COMPLETED, second.error
    packs = [t for t in user_texts(provider.requests[-1]) if "Goal" in t]
    assert "now check that sub() subtracts" in packs[-1]
    assert "make add() add its arguments" in packs[-1]  # the session's task stays in view
    started = [e.task for e in events if isinstance(e, RunStarted)]
    assert started[-1].endswith("Then: now check that sub() subtracts")


async def test_a_refusal_in_one_message_does_not_refuse_the_next(tmp_path: Path) -> None:
    script = [turn(call("run_command", "r1", command="echo hi")), finish("not run"), finish("ok")]
    ask = PermissionsConfig(mode=PermissionMode.DEFAULT)  # nobody to ask: the call is refused
    agent, _ = make_agent(tmp_path, script, verify=False, permissions=ask)
    first = await agent.run("run echo hi")
    assert first.finish_reason is FinishReason.REFUSED

    other, _ = make_agent(tmp_path, [finish("answered")], verify=False, permissions=ask)
    second = await other.send(first.session_id, "never mind, just say hello")

    assert second.finish_reason is FinishReason.COMPLETED, second.error
    assert second.refused_calls == []


async def test_a_refusal_within_the_follow_up_still_counts(tmp_path: Path) -> None:
    script = [finish("first"), turn(call("run_command", "r1", command="echo hi")), finish("no")]
    ask = PermissionsConfig(mode=PermissionMode.DEFAULT)
    agent, _ = make_agent(tmp_path, script, verify=False, permissions=ask)
    first = await agent.run("say hello")

    second = await agent.send(first.session_id, "now run echo hi")

    assert second.finish_reason is FinishReason.REFUSED
    assert [(r.tool, r.argument) for r in second.refused_calls] == [("run_command", "echo hi")]


async def test_a_follow_up_cancelled_in_its_first_model_call_is_kept(tmp_path: Path) -> None:
    agent, provider = make_agent(tmp_path, [finish("first"), finish("second")], verify=False)
    first = await agent.run("one")
    hanging = hang_at(provider, 1)
    sending = asyncio.create_task(agent.send(first.session_id, "slow one"))
    await hanging.wait()
    agent.cancel()
    sending.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sending
    store = SessionStore(tmp_path / "sessions")
    try:
        stored = [m.content for m in store.messages(first.session_id) if m.role is Role.USER]
    finally:
        store.close()
    assert stored == ["one", "slow one"]

    third = await agent.send(first.session_id, "new one")

    assert third.final_text == "second"
    assert user_texts(provider.requests[2]) == ["one", "slow one", INTERRUPTED_NOTE, "new one"]


async def test_a_follow_up_outlives_a_crash_before_its_first_step(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [finish("first"), crash], verify=False)
    first = await agent.run("one")
    with pytest.raises(Crash):
        await agent.send(first.session_id, "slow one")

    other, provider = make_agent(tmp_path, [finish("second")], verify=False)
    second = await other.send(first.session_id, "new one")

    assert second.final_text == "second"
    assert user_texts(provider.requests[0]) == ["one", "slow one", INTERRUPTED_NOTE, "new one"]


async def test_an_agent_knows_what_a_loaded_session_spent(tmp_path: Path) -> None:
    write = call("write_file", "w1", path="a.txt", content="one\n")
    agent, _ = make_agent(tmp_path, [turn(write), finish("done")], verify=False)
    first = await agent.run("one")
    other, _ = make_agent(tmp_path, [], verify=False)

    other.load_session(first.session_id)

    assert other.economics.calls == 2 and other.economics.iterations == 2
    assert other.economics.usage == agent.economics.usage
    assert other.economics.cost_usd == agent.economics.cost_usd


async def test_failed_checks_of_an_earlier_message_do_not_count_against_the_next(
    tmp_path: Path,
) -> None:
    check = f"{sys.executable} -c \"import os, sys; sys.exit(0 if os.path.exists('ok') else 1)\""
    write_ok = call("write_file", "w1", path="ok", content="yes\n")
    script = [
        finish("done", cid="f1"),
        finish("done", cid="f2"),  # the second failed check ends the first message
        finish("done", cid="f3"),  # the follow-up's first failed check: one more try
        turn(write_ok),
        finish("done", cid="f4"),
    ]
    agent, _ = make_agent(
        tmp_path, script, sandbox=SandboxKind.LOCAL, verify_command=check, max_verify_rounds=2
    )
    first = await agent.run("make the check pass")
    assert first.finish_reason is FinishReason.VERIFICATION_FAILED

    second = await agent.send(first.session_id, "try again, create ok")

    assert second.finish_reason is FinishReason.COMPLETED, second.error


@pytest.mark.parametrize(("spent", "refused"), [(5_000, False), (9_300, True)])
async def test_a_follow_up_passes_the_same_gate_as_a_new_task(
    tmp_path: Path, spent: int, refused: bool
) -> None:
    script = [turn(text="first done", usage=Usage(0, spent)), turn(text="second done")]
    agent, provider = make_agent(
        tmp_path, script, verify=False, max_total_tokens=10_000, max_output_tokens=10_000
    )
    first = await agent.run("one")
    assert first.finish_reason is FinishReason.ANSWERED

    second = await agent.send(first.session_id, "and another thing")

    if refused:  # 93 % of the budget spent: not enough for a new message's work
        assert second.finish_reason is FinishReason.MAX_TOKENS
        assert "not starting a new task" in (second.error or "")
        assert len(provider.requests) == 1  # it never reached the model
    else:
        assert second.finish_reason is FinishReason.ANSWERED
        assert len(provider.requests) == 2
    store = SessionStore(tmp_path / "sessions")
    try:  # refused or not, the message is kept with the session
        assert store.messages(first.session_id)[-1 if refused else -2].content == (
            "and another thing"
        )
    finally:
        store.close()
