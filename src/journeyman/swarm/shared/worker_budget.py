"""One swarm worker's limits, and how a call is named across the swarm.

A worker's limits are its loop's own: `WorkerBudgetConfig` only caps the worker's
`AgentConfig` (`max_iterations`, `max_total_tokens` as a hard limit, `loop_threshold`), so a
worker ends the way any run ends at the same limit (`max_iterations` after its last turn, not
a halt before it). The swarm itself counts only repeats across workers
(`SharedEconomicsState`, fed by `worker_hooks.attach_worker`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from journeyman.core.messages import ToolCall
from journeyman.core.text import one_line
from journeyman.loop.config import AgentConfig
from journeyman.loop.progress import call_fingerprint as loop_call_fingerprint


class WorkerBudgetConfig(BaseModel):
    """Caps of one swarm worker, applied to its loop's own limits."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(default=300_000, ge=1)
    """Tokens the worker may be billed over its whole run (its hard token limit at most)."""
    max_iterations: int = Field(default=50, ge=1)
    """Model turns the worker may take (its `max_iterations` at most)."""
    doom_loop_threshold: int = Field(default=3, ge=2)
    """Identical calls with the same result that make a loop for the worker's loop detector
    (its `loop_threshold` at most)."""


def worker_limits(
    base: AgentConfig, budget: WorkerBudgetConfig, granted_tokens: int | None
) -> dict[str, Any]:
    """The `AgentConfig` fields that carry a worker's limits: the tighter of the swarm's
    agent config and the worker budget, the tokens further capped by the allocation granted."""
    tokens = min(granted_tokens or budget.max_tokens, budget.max_tokens)
    return {
        "max_iterations": min(base.max_iterations, budget.max_iterations),
        "max_total_tokens": tokens,
        "hard_token_limit": True,  # an allocation from the swarm's pool: never passed
        "loop_threshold": min(base.loop_threshold, budget.doom_loop_threshold),
    }


def call_fingerprint(tool: str, args: Mapping[str, Any] | None) -> str:
    """The loop's fingerprint of a call (tool and sorted-key JSON arguments, hashed)."""
    return loop_call_fingerprint(ToolCall("", tool, dict(args or {})))


def call_label(tool: str, args: Mapping[str, Any] | None) -> str:
    """A short readable form of a call, for notices and failure records."""
    return one_line(f"{tool} {json.dumps(dict(args or {}), sort_keys=True, default=str)}", 200)
