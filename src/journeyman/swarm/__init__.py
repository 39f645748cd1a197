"""Subagents (the spawn tool, sidechain sessions, the shared budget pool); shared state and the
swarm mode come later. This layer sits above `loop`: the loop never imports it."""

from journeyman.swarm.config import SubagentConfig
from journeyman.swarm.spawn import SpawnAgentArgs, SpawnAgentTool, enable_subagents

__all__ = ["SpawnAgentArgs", "SpawnAgentTool", "SubagentConfig", "enable_subagents"]
