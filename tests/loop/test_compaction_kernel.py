"""Compaction inside runs: triggered near the window, forced by an overflow error, persisted so
resume and fork see the right history, hooks around it, and the budget baseline moved."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from journeyman import Agent, FinishReason, RunResult
from journeyman.context.compaction import MASKED_PREFIX, SUMMARY_PREFIX, CompactionSettings
from journeyman.context.rules import RulesLoader
from journeyman.core import events as ev
from journeyman.core.errors import ProviderError
from journeyman.core.messages import ToolCall, Usage
from journeyman.policy.hooks import HookEvent, HookPayload
from journeyman.providers.base import Capabilities, ModelRequest, ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from tests.fakes.agents import NO_RETRY, make_agent

WINDOW = 6_000


def reader(step: int) -> Any:
    """A turn that reads a big file, answered with the prompt size the request really had."""

    def respond(request: ModelRequest) -> ModelResponse:
        if request.tools == ():  # the compaction's summary call
            return ModelResponse(text=f"summary at step {step}", usage=Usage(500, 40))
        chars = sum(len(m.content) for m in request.messages) + len(request.system)
        call = ToolCall(f"r{step}", "read_file", {"path": f"big{step}.txt"})
        return ModelResponse(text="", tool_calls=(call,), usage=Usage(chars // 4, 20))

    return respond


def summary_or(response: ModelResponse) -> Any:
    def respond(request: ModelRequest) -> ModelResponse:
        if request.tools == ():
            return ModelResponse(text="summary of the early reads", usage=Usage(500, 40))
        return response

    return respond


FINISH = ModelResponse(
    text="", tool_calls=(ToolCall("f", "finish", {"summary": "done"}),), usage=Usage(100, 10)
)


def make(
    tmp_path: Path,
    script: list[Any],
    events: list[ev.Event],
    window: int = WINDOW,
    **config: Any,
) -> tuple[Agent, ScriptedProvider, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    for i in range(25):  # ~5,200 characters a read, a different file each step
        (workspace / f"big{i}.txt").write_text(f"line {i} of text\n" * 400)
    agent, provider = make_agent(
        tmp_path,
        script,
        events=events,
        retry_policy=NO_RETRY,
        provider_options={"capabilities": Capabilities(context_window=window)},
        agent_options={"rules": RulesLoader(workspace, home=tmp_path / "home")},
        **config,
    )
    return agent, provider, workspace


def prompt_chars(request: ModelRequest) -> int:
    return sum(len(m.content) for m in request.messages)


async def test_a_long_run_compacts_and_stays_under_the_window(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    script = [reader(i) for i in range(20)] + [summary_or(FINISH)] * 3
    agent, provider, _ = make(
        tmp_path,
        script,
        events,
        max_iterations=40,
        max_total_tokens=60_000,
        compaction=CompactionSettings(keep_recent_observations=2),
    )
    result = await agent.run("read the files")
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    compactions = [e for e in events if isinstance(e, ev.ContextCompacted)]
    assert compactions and all(c.tokens_after < c.tokens_before for c in compactions)
    tool_requests = [r for r in provider.requests if r.tools]
    assert max(prompt_chars(r) for r in tool_requests) // 4 < WINDOW
    masked = [m for m in tool_requests[-1].messages if m.content.startswith(MASKED_PREFIX)]
    assert masked


async def test_each_summary_call_is_an_event_with_its_tokens(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    script = [reader(i) for i in range(20)] + [summary_or(FINISH)] * 3
    agent, provider, _ = make(
        tmp_path,
        script,
        events,
        max_iterations=40,
        max_total_tokens=60_000,
        compaction=CompactionSettings(keep_recent_observations=2),
    )
    result = await agent.run("read the files")
    summaries = [e for e in events if isinstance(e, ev.SummaryCallMade)]
    sent = [r for r in provider.requests if r.tools == ()]
    assert sent and len(summaries) == len(sent)
    assert all(s.usage == Usage(500, 40) and s.provider == "scripted" for s in summaries)
    assert [s.max_output_tokens for s in summaries] == [r.max_output_tokens for r in sent]
    turns = [e for e in events if isinstance(e, ev.ModelResponseReceived)]
    assert not any(t.text.startswith("summary") for t in turns)  # not mistaken for turns
    store = SessionStore(tmp_path / "sessions")
    try:
        stored = [e for e in store.events(result.session_id) if e["type"] == "summary_call"]
    finally:
        store.close()
    assert len(stored) == len(summaries) and stored[0]["usage"]["output_tokens"] == 40


async def test_without_compaction_the_same_run_overflows_its_token_budget(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    script = [reader(i) for i in range(20)] + [FINISH] * 3
    agent, _, _ = make(
        tmp_path, script, events, max_iterations=40, max_total_tokens=60_000, compaction=None
    )
    result = await agent.run("read the files")
    assert result.finish_reason is FinishReason.MAX_TOKENS
    assert not [e for e in events if isinstance(e, ev.ContextCompacted)]


async def test_an_overflow_error_forces_compaction_and_one_retry(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    overflow = ProviderError(
        "prompt is too long",
        provider="scripted",
        status_code=400,
        retryable=False,
        details={"context_overflow": True},
    )
    script = [reader(0), reader(1), reader(2), overflow, summary_or(FINISH), summary_or(FINISH)]
    agent, provider, _ = make(
        tmp_path,
        script,
        events,
        window=1_000_000,  # never reached: only the provider's refusal compacts
        compaction=CompactionSettings(keep_recent_observations=1),
    )
    result = await agent.run("read")
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    reasons = [e.reason for e in events if isinstance(e, ev.ContextCompacted)]
    assert reasons == ["overflow"], reasons
    before, after = provider.requests[3], provider.requests[-1]
    assert prompt_chars(after) < prompt_chars(before)


async def test_the_summary_after_an_overflow_is_asked_alone(tmp_path: Path) -> None:
    """The provider refused the history as too long: the summary call must not carry it."""
    events: list[ev.Event] = []
    overflow = ProviderError(
        "prompt is too long",
        provider="scripted",
        status_code=400,
        retryable=False,
        details={"context_overflow": True},
    )
    reads = [reader(i) for i in range(8)]
    script = [*reads, overflow, *[summary_or(FINISH)] * 4]
    agent, provider, _ = make(
        tmp_path,
        script,
        events,
        window=1_000_000,  # the estimate says the history fits: only the refusal says no
        compaction=CompactionSettings(keep_recent_observations=1, keep_recent_messages=2),
    )
    result = await agent.run("read")
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    summaries = [r for r in provider.requests if r.tools == ()]
    assert summaries, "the summary stage ran"
    assert all(len(r.messages) == 1 for r in summaries)
    assert any(e.reason == "overflow" for e in events if isinstance(e, ev.ContextCompacted))


async def test_an_overflow_that_compaction_cannot_help_fails_cleanly(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    overflow = ProviderError(
        "prompt is too long",
        provider="scripted",
        status_code=400,
        retryable=False,
        details={"context_overflow": True},
    )
    agent, _, _ = make(tmp_path, [overflow], events)
    result = await agent.run("read")  # only the task: nothing to compact
    assert result.finish_reason is FinishReason.PROVIDER_ERROR
    assert "too long" in (result.error or "")


async def test_compacted_history_is_what_resume_and_the_store_see(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    script = [reader(i) for i in range(12)] + [summary_or(FINISH)] * 3
    agent, provider, _ = make(
        tmp_path,
        script,
        events,
        max_iterations=30,
        compaction=CompactionSettings(keep_recent_observations=1, keep_recent_messages=4),
    )
    result = await agent.run("read")
    assert result.finish_reason is FinishReason.COMPLETED
    store = SessionStore(tmp_path / "sessions")
    try:
        stored = store.messages(result.session_id)
        last_request = [r for r in provider.requests if r.tools][-1]
        assert stored[: len(last_request.messages)] == list(last_request.messages)
        first_compaction_step = next(
            i for i, e in enumerate(events) if isinstance(e, ev.ContextCompacted)
        )
        assert first_compaction_step > 0
        early = store.messages(result.session_id, up_to_step=2)  # before any compaction
        assert len(early) == 1 + 2 * 2
        assert not any(m.content.startswith((MASKED_PREFIX, SUMMARY_PREFIX)) for m in early)
    finally:
        store.close()


async def test_compact_hooks_fire_and_the_baseline_moves(tmp_path: Path) -> None:
    seen: list[tuple[HookEvent, dict[str, Any]]] = []

    def record(event: HookEvent, payload: HookPayload) -> None:
        seen.append((event, dict(payload.extra)))

    events: list[ev.Event] = []
    script = [reader(i) for i in range(10)] + [summary_or(FINISH)] * 3
    agent, _, _ = make(
        tmp_path,
        script,
        events,
        max_iterations=30,
        compaction=CompactionSettings(keep_recent_observations=1),
    )
    agent.hooks.add(HookEvent.PRE_COMPACT, record)
    agent.hooks.add(HookEvent.POST_COMPACT, record)
    baseline_before = agent.economics.baseline_tokens
    await agent.run("read")
    kinds = [event for event, _ in seen]
    assert kinds[:2] == [HookEvent.PRE_COMPACT, HookEvent.POST_COMPACT]
    assert seen[1][1]["tokens_after"] < seen[1][1]["tokens_before"]
    assert agent.economics.baseline_tokens > baseline_before


async def test_stale_observations_are_masked_while_the_window_is_far_away(tmp_path: Path) -> None:
    events: list[ev.Event] = []
    script = [reader(i) for i in range(16)] + [FINISH]
    agent, provider, _ = make(
        tmp_path,
        script,
        events,
        window=1_000_000,
        max_iterations=30,
        compaction=CompactionSettings(keep_recent_observations=2, stale_observation_tokens=3_000),
    )
    result = await agent.run("read the files")
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    compactions = [e for e in events if isinstance(e, ev.ContextCompacted)]
    assert len(compactions) >= 2
    assert {c.reason for c in compactions} == {"stale_observations"}
    assert all(c.stages == ("mask_observations",) for c in compactions)
    # between two batches every request extends the previous one unchanged
    requests = [r.messages for r in provider.requests]
    extended = sum(1 for a, b in itertools.pairwise(requests) if b[: len(a)] == a)
    assert extended == len(requests) - 1 - len(compactions)


LONG_RUN_CALLS = 60


class LongReader:
    """One read of a new file per turn (no call repeats an earlier one), then finish after
    `LONG_RUN_CALLS - 1` reads; compaction's summary calls are answered without using a turn.
    Each call reports the prompt size the request really had as its input tokens."""

    def __init__(self) -> None:
        self.turns = 0

    def __call__(self, request: ModelRequest) -> ModelResponse:
        if request.tools == ():
            return ModelResponse(text="summary of the reads so far", usage=Usage(500, 40))
        step, self.turns = self.turns, self.turns + 1
        if step == LONG_RUN_CALLS - 1:
            return FINISH
        chars = sum(len(m.content) for m in request.messages) + len(request.system)
        call = ToolCall(f"r{step}", "read_file", {"path": f"long{step}.txt"})
        return ModelResponse(text="", tool_calls=(call,), usage=Usage(chars // 4, 20))


async def long_compacting_run(
    tmp_path: Path, *, update_baseline: bool
) -> tuple[RunResult, list[ev.Event]]:
    """59 reads then finish (60 model turns) in a 6,000-token window with a 60,000-token budget:
    the window forces a compaction every few turns, each call's input is its whole prompt."""
    events: list[ev.Event] = []
    reader = LongReader()
    script = [reader] * (3 * LONG_RUN_CALLS)
    agent, _, workspace = make(
        tmp_path,
        script,
        events,
        max_iterations=LONG_RUN_CALLS * 2,
        max_total_tokens=60_000,
        compaction=CompactionSettings(keep_recent_observations=2),
    )
    for i in range(LONG_RUN_CALLS):
        (workspace / f"long{i}.txt").write_text(f"row {i} of text\n" * 330)
    if not update_baseline:  # the seed's bug: compaction shrinks the prompt, the count stays
        agent.economics.update_baseline = lambda tokens_after: None  # type: ignore[method-assign]
    result = await agent.run("read every file")
    return result, events


async def test_a_60_call_run_with_compaction_finishes_within_its_token_budget(
    tmp_path: Path,
) -> None:
    result, events = await long_compacting_run(tmp_path, update_baseline=True)
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert result.iterations == LONG_RUN_CALLS
    assert len([e for e in events if isinstance(e, ev.ContextCompacted)]) >= 5
    assert result.usage.total_tokens > 2 * 60_000  # far more was sent than the budget's size
    budget = [e for e in events if isinstance(e, ev.BudgetUpdated)]
    assert max(e.incremental_tokens for e in budget) < 0.7 * 60_000  # never even warned


async def test_the_same_run_without_the_baseline_update_is_forced_to_stop_early(
    tmp_path: Path,
) -> None:
    result, events = await long_compacting_run(tmp_path, update_baseline=False)
    assert result.finish_reason is FinishReason.MAX_TOKENS
    assert result.iterations < LONG_RUN_CALLS // 2
    budget = [e for e in events if isinstance(e, ev.BudgetUpdated)]
    assert max(e.incremental_tokens for e in budget) <= 60_000  # stopped before the cap
    assert result.usage.total_tokens < 2 * 60_000
