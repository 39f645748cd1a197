"""How a run may spawn subagents: the limits of its subagent tree (`AgentConfig.subagents`,
the ``[subagents]`` table of a config file). The spawn tool itself is `swarm.spawn`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from journeyman.economics.ledger import DEFAULT_MAX_SHARE, DEFAULT_RESERVE_SHARE


class SubagentConfig(BaseModel):
    """Limits of the subagent tree under one root run."""

    model_config = ConfigDict(extra="forbid")

    max_depth: int = Field(default=2, ge=1)
    """Levels of subagents below the root: 2 lets children spawn children of their own, whose
    children may not spawn further."""
    max_children_per_turn: int = Field(default=4, ge=1)
    """Subagents one turn of one agent may spawn; further calls in that turn are refused."""
    max_parallel: int = Field(default=3, ge=1)
    """Subagents of one agent that may run at the same time; the others wait their turn."""
    reserve_share: float = Field(default=DEFAULT_RESERVE_SHARE, ge=0.0, lt=1.0)
    """Share of the agent's budget kept for itself (to act on its children's reports)."""
    max_child_share: float = Field(default=DEFAULT_MAX_SHARE, gt=0.0, le=1.0)
    """Largest share of the remaining pool one child may take."""
    min_child_tokens: int = Field(default=2_000, ge=0)
    """Smallest token allocation a child is started with; below it the spawn is refused."""
    min_child_usd: float = Field(default=0.0, ge=0.0)
    """Smallest USD allocation a child is started with; below it the spawn is refused."""
    child_max_iterations: int = Field(default=30, ge=1)
    """Turns a child may take unless the call asks for fewer."""
    child_timeout_s: float = Field(default=1_800.0, gt=0)
    """Seconds one child may run (its tool call's timeout, instead of `tool_timeout_s`)."""
