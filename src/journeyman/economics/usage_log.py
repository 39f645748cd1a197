"""Per-call usage records and their aggregation per provider and model.

The rows are stored by the session store (`session.store`, table `usage_logs`); this module
holds only the record type and the pure arithmetic over rows.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from journeyman.core.messages import Usage


@dataclass(frozen=True)
class UsageRow:
    session_id: str
    call_index: int
    provider: str
    model: str
    usage: Usage
    cost_usd: float | None
    """None when the model's price is unknown."""
    latency_s: float
    created_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class ModelUsage:
    """Usage of one provider/model, summed over the selected rows."""

    provider: str
    model: str
    calls: int
    usage: Usage
    cost_usd: float | None
    """None when any of the calls could not be priced."""


def summarize(rows: Iterable[UsageRow]) -> list[ModelUsage]:
    """Rows summed per (provider, model), sorted by provider then model."""
    totals: dict[tuple[str, str], ModelUsage] = {}
    for row in rows:
        key = (row.provider, row.model)
        seen = totals.get(key)
        if seen is None:
            totals[key] = ModelUsage(row.provider, row.model, 1, row.usage, row.cost_usd)
            continue
        priced = seen.cost_usd is not None and row.cost_usd is not None
        cost = (seen.cost_usd or 0.0) + (row.cost_usd or 0.0) if priced else None
        totals[key] = ModelUsage(
            row.provider, row.model, seen.calls + 1, seen.usage + row.usage, cost
        )
    return [totals[key] for key in sorted(totals)]
