"""Subagents (the spawn tool, sidechain sessions, the shared budget pool), the swarm's shared
state (`swarm.shared`) and the swarm mode (`Swarm`). This layer sits above `loop`: the loop
never imports it."""

from journeyman.swarm.config import SubagentConfig
from journeyman.swarm.orchestrator import Swarm, SwarmConfig, SwarmResult
from journeyman.swarm.spawn import SpawnAgentArgs, SpawnAgentTool, enable_subagents

__all__ = [
    "SpawnAgentArgs",
    "SpawnAgentTool",
    "SubagentConfig",
    "Swarm",
    "SwarmConfig",
    "SwarmResult",
    "enable_subagents",
]
