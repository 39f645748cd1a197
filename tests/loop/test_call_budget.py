"""Each model call is priced before it is sent: its reply is shortened to fit what is left of the
USD limit, or the call is not made, so a run's spending never passes its cap."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journeyman import Agent, AgentConfig
from journeyman.core.errors import BudgetExhaustedError
from journeyman.core.messages import Message, ToolCall, ToolSpec, Usage
from journeyman.core.result import FinishReason
from journeyman.loop.call_budget import (
    MIN_REPLY_TOKENS,
    PromptBound,
    Remaining,
    fit_request,
    least_call,
    request_ceiling,
)
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.providers.scripted import (
    ScriptedProvider,
    ScriptStep,
    billed_prompt_tokens,
)
from journeyman.tools.builtin import default_tools

PRICE = (3.0, 15.0)


def price(usage: Usage) -> float:
    return (usage.input_tokens * PRICE[0] + usage.output_tokens * PRICE[1]) / 1e6


def request(max_output_tokens: int = 4_096) -> ModelRequest:
    return ModelRequest(
        system="s", messages=(Message.user("hi"),), max_output_tokens=max_output_tokens
    )


def test_a_call_that_fits_is_sent_as_it_is() -> None:
    sent = request()
    assert fit_request(sent, 1_000, Remaining(usd=1.0), price) is sent


def test_the_reply_is_shortened_to_what_is_left() -> None:
    # $0.003 of prompt leaves $0.0045: 300 reply tokens at $15 a million
    fitted = fit_request(request(), 1_000, Remaining(usd=0.0075), price)
    assert fitted.max_output_tokens in (299, 300)  # float rounding may cost one token
    assert price(Usage(1_000, fitted.max_output_tokens)) <= 0.0075


def test_a_call_without_room_for_a_useful_reply_is_not_made() -> None:
    left = price(Usage(1_000, MIN_REPLY_TOKENS - 1))
    with pytest.raises(BudgetExhaustedError) as raised:
        fit_request(request(), 1_000, Remaining(usd=left), price)
    assert raised.value.details["finish_reason"] == "max_budget_usd"
    assert "not made" in raised.value.message


def test_tokens_left_bound_the_reply_too() -> None:
    fitted = fit_request(request(), 1_000, Remaining(tokens=1_500), price)
    assert fitted.max_output_tokens == 500
    with pytest.raises(BudgetExhaustedError):
        fit_request(request(), 1_000, Remaining(tokens=1_010), price)


def test_the_prompt_bound_learns_from_the_reported_size() -> None:
    bound = PromptBound()
    tool = ToolSpec("read_file", "Read a file.", {"type": "object"})
    first = ModelRequest(system="sys", messages=(Message.user("fix it"),), tools=(tool,))
    assert bound.of(first) == request_ceiling(first)  # nothing reported yet: one token a byte
    bound.learn(first, reported=120)
    reply = Message.assistant("", [ToolCall("c1", "read_file", {"path": "a.py"})])
    result = Message.user("print('hi')\n" * 10)
    grown = dataclasses.replace(first, messages=(*first.messages, reply, result))
    added = reply.token_ceiling + result.token_ceiling
    assert bound.of(grown) == 120 + added < request_ceiling(grown)
    # a request without the tools (the closing report) and without a part: never more
    closing = dataclasses.replace(grown, tools=(), messages=grown.messages[1:])
    assert bound.of(closing) == min(120 + added, request_ceiling(closing))
    # a request seen before costs what was reported
    assert bound.of(first) == 120


@pytest.mark.parametrize(
    "text",
    [
        "请把这个函数改成异步的，并且为它写一个测试。" * 20,  # CJK: 3 bytes a character
        "done 🎉🚀✅ " * 40,  # emoji: 4 bytes
        "def f(x):\n    return {k: v for k, v in x.items() if v}\n" * 20,  # code
        "Ünïcödé façade naïve résumé " * 20,
    ],
    ids=["cjk", "emoji", "code", "accents"],
)
def test_the_first_bound_covers_a_tokenizer_that_makes_a_token_a_byte(text: str) -> None:
    request = ModelRequest(system="s", messages=(Message.user(text),))
    assert PromptBound().of(request) >= len(text.encode()) + len(b"s")


def _billed_like_a_provider(calls: int, replies: list[int]) -> list[ScriptStep]:
    """Replies that bill the prompt they were sent (more tokens than the harness estimates)
    and a reply of the scripted size, cut at the request's limit; each reads another file."""

    def step(i: int) -> ScriptStep:
        def respond(sent: ModelRequest) -> ModelResponse:
            usage = Usage(billed_prompt_tokens(sent), replies[i % len(replies)])
            read = ToolCall(f"c{i}", "read_file", {"path": f"f{i % 7}.txt"})
            return ModelResponse("", tool_calls=(read,), usage=usage)

        return respond

    return [step(i) for i in range(calls)]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    cap=st.floats(min_value=0.005, max_value=0.2),
    replies=st.lists(st.integers(min_value=1, max_value=8_000), min_size=1, max_size=6),
)
def test_a_run_never_spends_more_than_its_cap(
    tmp_path_factory: pytest.TempPathFactory, cap: float, replies: list[int]
) -> None:
    import asyncio

    root = tmp_path_factory.mktemp("run")
    (root / "ws").mkdir()
    for n in range(7):
        (root / "ws" / f"f{n}.txt").write_text(f"file {n}\n" * (n * 40 + 1))
    provider = ScriptedProvider(_billed_like_a_provider(60, replies))
    agent = Agent(
        provider,
        workspace=root / "ws",
        tools=default_tools(journal_commands=False),
        config=AgentConfig(
            session_dir=root / "s",
            max_budget_usd=cap,
            price_per_mtok=PRICE,
            max_iterations=60,
            sandbox="local",
            verify=False,
        ),
    )
    result = asyncio.run(agent.run("list the files, again and again"))
    assert result.cost_usd is not None and result.cost_usd <= cap, result.error


async def test_the_agent_reports_the_stop_before_the_call(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    provider = ScriptedProvider(_billed_like_a_provider(5, [4_000]))
    agent = Agent(
        provider,
        workspace=tmp_path / "ws",
        tools=default_tools(journal_commands=False),
        config=AgentConfig(
            session_dir=tmp_path / "s", max_budget_usd=0.01, price_per_mtok=PRICE, verify=False
        ),
    )
    result = await agent.run("spend")
    assert result.finish_reason is FinishReason.MAX_BUDGET_USD
    assert result.cost_usd is not None and result.cost_usd <= 0.01
    assert "was not made" in (result.error or "")
    assert len(provider.requests) == result.iterations  # the refused call never reached it


async def test_the_request_event_carries_the_reply_limit_it_was_sent_with(
    tmp_path: Path,
) -> None:
    from journeyman.core import events as ev

    (tmp_path / "ws").mkdir()
    provider = ScriptedProvider([ModelResponse(text="ok", usage=Usage(10, 5))])
    seen: list[ev.Event] = []
    agent = Agent(
        provider,
        workspace=tmp_path / "ws",
        tools=[],
        config=AgentConfig(
            session_dir=tmp_path / "s",
            max_budget_usd=0.003,
            price_per_mtok=PRICE,
            max_output_tokens=8_000,
            system_prompt="Be brief.",  # a prompt small enough for a $0.003 call
            verify=False,
        ),
        on_event=seen.append,
    )
    await agent.run("say ok")
    (sent,) = [e for e in seen if isinstance(e, ev.ModelRequestSent)]
    (request,) = provider.requests
    assert request.max_output_tokens < 8_000  # the budget shortened the reply
    assert sent.max_output_tokens == request.max_output_tokens


@given(prompt=st.integers(0, 200_000), reply=st.integers(MIN_REPLY_TOKENS, 100_000))
@settings(max_examples=200, deadline=None)
def test_a_call_is_refused_exactly_below_its_floor(prompt: int, reply: int) -> None:
    floor = least_call(prompt, price)
    assert floor.tokens == prompt + MIN_REPLY_TOKENS
    assert floor.usd == pytest.approx(price(Usage(prompt, MIN_REPLY_TOKENS)))
    sent = request(reply)
    assert fit_request(sent, prompt, Remaining(tokens=floor.tokens), price).max_output_tokens >= (
        MIN_REPLY_TOKENS
    )
    fitted = fit_request(sent, prompt, Remaining(usd=floor.usd), price)
    assert fitted.max_output_tokens == MIN_REPLY_TOKENS
    with pytest.raises(BudgetExhaustedError):
        fit_request(sent, prompt, Remaining(tokens=floor.tokens - 1), price)
    with pytest.raises(BudgetExhaustedError):
        fit_request(sent, prompt, Remaining(usd=(floor.usd or 0) * (1 - 1e-9) - 1e-12), price)


def _grant_steps(
    calls: int, replies: list[int], missing: list[bool], billed: list[Usage]
) -> list[ScriptStep]:
    """Like `_billed_like_a_provider`, with the reply cut at the request's limit as a model's
    is, and some replies reporting no usage; `billed` gets what each call really cost."""

    def step(i: int) -> ScriptStep:
        def respond(sent: ModelRequest) -> ModelResponse:
            usage = Usage(
                billed_prompt_tokens(sent), min(replies[i % len(replies)], sent.max_output_tokens)
            )
            billed.append(usage)
            read = ToolCall(f"c{i}", "read_file", {"path": f"f{i % 7}.txt"})
            if missing[i % len(missing)]:
                return ModelResponse("", tool_calls=(read,), usage_missing=True)
            return ModelResponse("", tool_calls=(read,), usage=usage)

        return respond

    return [step(i) for i in range(calls)]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    usd=st.floats(min_value=0.005, max_value=0.2),
    tokens=st.integers(min_value=2_000, max_value=60_000),
    replies=st.lists(st.integers(min_value=1, max_value=8_000), min_size=1, max_size=6),
    missing=st.lists(st.booleans(), min_size=1, max_size=6),
)
def test_a_hard_grant_holds_in_dollars_and_tokens_with_or_without_usage(
    tmp_path_factory: pytest.TempPathFactory,
    usd: float,
    tokens: int,
    replies: list[int],
    missing: list[bool],
) -> None:
    """A batch task's or a subagent's grant: the hard limits count every billed token and
    dollar, a reply without usage is charged its worst case, and neither is ever passed."""
    import asyncio

    root = tmp_path_factory.mktemp("grant")
    (root / "ws").mkdir()
    for n in range(7):
        (root / "ws" / f"f{n}.txt").write_text(f"file {n}\n" * (n * 40 + 1))
    billed: list[Usage] = []
    provider = ScriptedProvider(_grant_steps(60, replies, missing, billed))
    agent = Agent(
        provider,
        workspace=root / "ws",
        tools=default_tools(journal_commands=False),
        config=AgentConfig(
            session_dir=root / "s",
            max_budget_usd=usd,
            max_total_tokens=tokens,
            hard_token_limit=True,
            price_per_mtok=PRICE,
            max_iterations=60,
            sandbox="local",
            verify=False,
        ),
    )
    result = asyncio.run(agent.run("list the files, again and again"))
    spent = agent.economics
    assert spent.cost_usd is not None and spent.cost_usd <= usd, result.error
    assert spent.total_tokens <= tokens, result.error
    # what was charged covers what the provider really billed: a reply is never free
    assert sum(u.total_tokens for u in billed) <= spent.total_tokens
    assert sum(price(u) for u in billed) <= spent.cost_usd + 1e-12
    assert result.finish_reason in (FinishReason.MAX_BUDGET_USD, FinishReason.MAX_TOKENS)
