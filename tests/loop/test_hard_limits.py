"""max_iterations and max_budget_usd are hard limits in every budget mode, counted per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from journeyman import Agent, FinishReason
from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Usage
from journeyman.economics.budget import BudgetMode
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from tests.fakes.agents import Probe, call, make_agent, turn

PRICEY = Usage(input_tokens=100_000, output_tokens=10_000)  # $0.45 a call for this model


def agent_for(
    tmp_path: Path, script: list[Any], *, priced: bool = False, **config: Any
) -> tuple[Agent, ScriptedProvider]:
    """An agent with the probe's tools; `priced` names a model whose price is known."""
    named = {"name": "anthropic", "model": "claude-sonnet-4-5"} if priced else {}
    tools = Probe().tools()
    return make_agent(tmp_path, script, tools=tools, sessions="s", provider_options=named, **config)


def echoes(count: int, usage: Usage | None = None) -> list[Any]:
    return [turn(call("echo", text=str(i)), usage=usage) for i in range(count)]


@pytest.mark.parametrize("mode", list(BudgetMode))
async def test_max_iterations_stops_every_budget_mode(tmp_path: Path, mode: BudgetMode) -> None:
    agent, _ = agent_for(tmp_path, echoes(5), max_iterations=2, budget_mode=mode)
    result = await agent.run("keep going")
    assert result.finish_reason is FinishReason.MAX_ITERATIONS
    assert result.iterations == 2 and not result.success


@pytest.mark.parametrize("mode", list(BudgetMode))
async def test_max_budget_usd_stops_every_budget_mode(tmp_path: Path, mode: BudgetMode) -> None:
    script = echoes(5, PRICEY)
    agent, _ = agent_for(tmp_path, script, priced=True, max_budget_usd=1.0, budget_mode=mode)
    result = await agent.run("spend")
    assert result.finish_reason is FinishReason.MAX_BUDGET_USD
    # up to $0.45 a call: after two a third could pass the cap, so it is never sent
    assert result.iterations == 2 and result.cost_usd is not None and result.cost_usd <= 1.0


async def test_a_zero_usd_budget_allows_no_call(tmp_path: Path) -> None:
    agent, provider = agent_for(tmp_path, echoes(2, PRICEY), priced=True, max_budget_usd=0)
    result = await agent.run("spend nothing")
    assert result.finish_reason is FinishReason.MAX_BUDGET_USD
    assert provider.requests == []


async def test_a_usd_limit_on_an_unpriced_model_is_refused_at_start(tmp_path: Path) -> None:
    agent, provider = agent_for(tmp_path, echoes(2), max_budget_usd=1.0)
    with pytest.raises(ConfigurationError, match="price") as refused:
        await agent.run("spend")
    assert "--price-per-mtok" in refused.value.message
    assert provider.requests == []
    store = SessionStore(agent.session_root)
    try:
        assert store.list_sessions() == []  # refused before anything was stored
    finally:
        store.close()


async def test_a_given_price_costs_the_calls_and_enforces_the_limit(tmp_path: Path) -> None:
    million = Usage(input_tokens=1_000_000, output_tokens=2_000)
    agent, _ = agent_for(
        tmp_path, echoes(3, million), max_budget_usd=5.0, price_per_mtok=(1.0, 500.0)
    )
    result = await agent.run("spend")
    assert result.finish_reason is FinishReason.MAX_BUDGET_USD
    # $2 a call: after two, the third would pass $5, so it is never sent
    assert result.cost_usd == pytest.approx(4.0)


async def test_a_reused_agent_counts_iterations_per_run(tmp_path: Path) -> None:
    script = [*echoes(1), turn(text="first done"), *echoes(1), turn(text="second done")]
    agent, _ = agent_for(tmp_path, script, max_iterations=3)
    first = await agent.run("one")
    second = await agent.run("two")
    assert first.finish_reason is second.finish_reason is FinishReason.ANSWERED
    assert second.iterations == 2
