"""How a run may spawn subagents (`SubagentConfig`, defined with the run's settings in
`loop.subagent_config` so that a config file's ``[subagents]`` table can set it)."""

from journeyman.loop.subagent_config import SubagentConfig

__all__ = ["SubagentConfig"]
