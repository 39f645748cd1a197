"""Usage rows summed per provider and model (the rows themselves are stored by the session
store, see tests/session/test_store_usage.py)."""

from __future__ import annotations

import pytest

from journeyman.core.messages import Usage
from journeyman.economics.usage_log import ModelUsage, UsageRow, summarize


def row(
    session: str,
    index: int,
    model: str,
    usage: Usage,
    cost: float | None,
    provider: str = "anthropic",
) -> UsageRow:
    return UsageRow(
        session_id=session,
        call_index=index,
        provider=provider,
        model=model,
        usage=usage,
        cost_usd=cost,
        latency_s=0.5,
        created_at=1_700_000_000.0 + index,
    )


ROWS = [
    row("s1", 1, "a", Usage(100, 10, 1_000, 50), 0.01),
    row("s1", 2, "a", Usage(200, 20, 2_000, 0), 0.02),
    row("s1", 3, "b", Usage(300, 30, 0, 0), 0.10),
    row("s2", 1, "a", Usage(1, 2, 3, 4), 0.5),
    row("s2", 2, "b", Usage(5, 6, 0, 0), None),
]


def by_model(summary: list[ModelUsage]) -> dict[str, ModelUsage]:
    return {m.model: m for m in summary}


def test_rows_are_summed_per_model() -> None:
    overall = by_model(summarize(ROWS))
    assert set(overall) == {"a", "b"}
    assert overall["a"].calls == 3
    assert overall["a"].usage == Usage(301, 32, 3_003, 54)
    assert overall["a"].cost_usd == pytest.approx(0.53)
    assert overall["b"].calls == 2
    assert overall["b"].usage == Usage(305, 36, 0, 0)


def test_one_unpriced_call_makes_the_total_unknown_whatever_its_position() -> None:
    unpriced_first = [row("s", 1, "m", Usage(1, 1), None), row("s", 2, "m", Usage(1, 1), 0.2)]
    unpriced_last = list(reversed(unpriced_first))
    assert summarize(unpriced_first)[0].cost_usd is None
    assert summarize(unpriced_last)[0].cost_usd is None


def test_the_same_model_name_of_two_providers_stays_apart_sorted_by_provider() -> None:
    summary = summarize(
        [row("s", 1, "m", Usage(1, 1), 0.1, "openai"), row("s", 2, "m", Usage(2, 2), 0.2)]
    )
    assert [(m.provider, m.model, m.calls) for m in summary] == [
        ("anthropic", "m", 1),
        ("openai", "m", 1),
    ]


def test_zero_cost_is_priced_not_unknown() -> None:
    (free,) = summarize([row("s", 1, "free", Usage(10, 10), 0.0)])
    assert free.cost_usd == 0.0


def test_no_rows_no_summary() -> None:
    assert summarize([]) == []
