"""`RunOptions`: how a run was started, beyond its `AgentConfig`, kept with the session.

`resume` and `fork` read them back (`RunOptions.from_settings`) to start the same way. They are
stored under the same keys a session's settings always used, so older sessions still resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from journeyman.core.errors import ConfigurationError

STORED_KEYS = ("base_url", "tool_format", "mcp", "ignored_settings")
"""The keys of a session's settings that `RunOptions` owns."""


class RunOptions(BaseModel):
    """How a run was started besides its config (endpoint, tool format, MCP choice, ...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    """The provider endpoint (an OpenAI-compatible server); None for the provider's default."""
    tool_format: Literal["auto", "native", "json_schema", "grammar", "text"] = "auto"
    """How the model calls tools: detected (auto), the provider's tool API, a reply constrained
    by a JSON schema or a grammar, or fenced blocks in its text."""
    mcp: bool | None = None
    """The `--mcp` choice: True starts the workspace's MCP servers too, False none at all, None
    the user's own servers only."""
    ignored_settings: tuple[dict[str, Any], ...] = Field(default_factory=tuple)
    """Settings the trust rules left out when the run started (key, value, source, reason)."""

    def to_settings(self) -> dict[str, Any]:
        """The options as a session's settings keep them (those left at their default are
        left out: `from_settings` gives them back)."""
        stored = self.model_dump(mode="json", exclude_defaults=True)
        if self.ignored_settings:
            stored["ignored_settings"] = [dict(item) for item in self.ignored_settings]
        return stored

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RunOptions:
        """The options kept in a session's settings (missing keys take their defaults).

        Raises `ConfigurationError` when a stored value is not usable.
        """
        given = {key: settings[key] for key in STORED_KEYS if settings.get(key) is not None}
        try:
            return cls.model_validate(given)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
            )
            raise ConfigurationError(
                f"the stored run options of this session are not usable ({problems}); "
                "give them again with --base-url or --tool-format"
            ) from error
