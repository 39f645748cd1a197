"""Compaction asked for by the user (`Agent.request_compaction`, the app's /compact): the next
run compacts the history before its first model call, whatever its size, once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from journeyman.context.compaction import SUMMARY_PREFIX
from journeyman.core import events as ev
from journeyman.core.messages import Usage
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.tools.builtin import default_tools
from tests.fakes.agents import call, echo, finish, is_summary_call, make_agent, turn


def summary(request: ModelRequest) -> ModelResponse:
    """The step that answers the compaction's summary call: asked after the history, with the
    run's tools (so that the provider's prompt cache serves all but the question)."""
    assert is_summary_call(request), "expected the compaction's summary call"
    assert request.tools and len(request.messages) > 1
    return turn(text="summary: eight echoes")


def long_session_script(*follow_ups: Any) -> list[Any]:
    echoes = [turn(call("echo", f"e{i}", text=f"echo {i}")) for i in range(8)]
    return [*echoes, finish("echoed"), *follow_ups]


def tools() -> list[Any]:
    return [echo, next(t for t in default_tools() if t.name == "finish")]


async def test_a_requested_compaction_shrinks_the_next_runs_history_once(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    script = long_session_script(summary, finish("shorter", cid="f2"), finish("again", cid="f3"))
    agent, provider = make_agent(tmp_path, script, tools=tools(), events=events, verify=False)
    first = await agent.run("echo eight times")
    stored = len(provider.requests[-1].messages)
    agent.request_compaction()
    second = await agent.send(first.session_id, "anything else?")
    assert second.final_text == "shorter"
    compactions = [e for e in events if isinstance(e, ev.ContextCompacted)]
    assert [c.reason for c in compactions] == ["requested"]
    assert "summarise" in compactions[0].stages
    request = provider.requests[-1]
    assert len(request.messages) < stored
    assert any(m.content.startswith(SUMMARY_PREFIX) for m in request.messages)
    assert request.messages[-1].content == "anything else?"

    third = await agent.send(first.session_id, "and now?")  # the request was used up
    assert third.final_text == "again"
    assert len([e for e in events if isinstance(e, ev.ContextCompacted)]) == 1


async def test_without_a_request_a_small_history_is_left_alone(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    agent, provider = make_agent(
        tmp_path,
        long_session_script(finish("as is", cid="f2")),
        tools=tools(),
        events=events,
        verify=False,
    )
    first = await agent.run("echo eight times")
    stored = len(provider.requests[-1].messages)
    await agent.send(first.session_id, "anything else?")
    assert not [e for e in events if isinstance(e, ev.ContextCompacted)]
    assert len(provider.requests[-1].messages) > stored


async def test_an_early_compaction_does_not_raise_the_counted_tokens(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    counted_at_compaction: list[int] = []
    # the first prompt (3,000 tokens) is the baseline; nothing else is counted
    echoes = [
        turn(call("echo", f"e{i}", text=f"echo {i}"), usage=Usage(3_000 if i == 0 else 0, 0))
        for i in range(8)
    ]
    done = turn(call("finish", "fin", summary="echoed"), usage=Usage())
    summarised = turn(text="summary: eight echoes", usage=Usage())  # nothing counted either
    script = [*echoes, done, summarised, turn(call("finish", "f2", summary="ok"), usage=Usage())]
    agent, _ = make_agent(
        tmp_path, script, tools=tools(), events=events, verify=False, max_total_tokens=100_000
    )

    def on_compacted(event: ev.Event) -> None:
        events.append(event)
        if isinstance(event, ev.ContextCompacted):
            counted_at_compaction.append(agent.economics.incremental_tokens)

    agent.on_event = on_compacted
    first = await agent.run("echo eight times")
    counted = agent.economics.incremental_tokens
    assert counted == 0
    agent.request_compaction()
    await agent.send(first.session_id, "anything else?")
    [compacted] = [e for e in events if isinstance(e, ev.ContextCompacted)]
    assert compacted.tokens_after > counted  # the compacted context is bigger than the count
    assert counted_at_compaction == [counted]  # and the count did not rise to it
