"""How `journeyman acp` builds the agent of each session, with the command line's rules.

A new session takes the user's config, then the workspace's file (held to the trust rules:
it may only tighten), then `JOURNEYMAN_*` variables, then the flags `journeyman acp` was
started with. A loaded session keeps the settings it was stored with (only what the trust
rules accept from data, for an imported one), with those flags on top. The client (the
editor) chooses nothing but the folder: no setting, permission or program comes from it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journeyman.core.errors import ConfigurationError
from journeyman.loop.agent import Agent
from journeyman.loop.config import AgentConfig
from journeyman.loop.config_file import session_root
from journeyman.loop.run_options import RunOptions
from journeyman.policy.permissions import PermissionsConfig
from journeyman.protocols.acp.server import BuiltAgent, SessionHooks
from journeyman.session.store import SessionRecord

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaunchOptions:
    """The flags `journeyman acp` was started with (None: not given)."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    tool_format: str | None = None
    session_dir: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    """Config fields set by flags (mode, permission mode, limits, sandbox, verify, ...)."""
    assume_yes: bool | None = None
    lsp: bool = True
    mcp: bool | None = None
    tracing: AgentTracing | None = None
    """OpenTelemetry tracing of every session's runs (`--otel` or an OTLP endpoint)."""


def check_launch_options(options: LaunchOptions) -> None:
    """Say at start-up, not at the editor's first session, that a flag names an unknown
    provider, gives the model twice or an unknown tool format. A missing API key is left to
    each session (its error reaches the editor; a loaded session may use another provider)."""
    from journeyman.providers.factory import DEFAULT_MODELS, parse_spec

    if options.provider is not None:
        name, spec_model = parse_spec(options.provider)
        if name not in DEFAULT_MODELS:
            known = ", ".join(sorted(DEFAULT_MODELS))
            raise ConfigurationError(
                f"--provider {options.provider!r} is not a provider; use one of {known} "
                "(any OpenAI-compatible server is openai with --base-url)"
            )
        if spec_model and options.model and spec_model != options.model:
            raise ConfigurationError(
                f"the model is given twice, as {spec_model!r} in --provider and as --model "
                f"{options.model!r}; give it once"
            )
    if options.model is not None and not options.model.strip():
        raise ConfigurationError("--model is empty; give a model name or leave the flag out")
    AgentLauncher._tool_format(options.tool_format)


class AgentLauncher:
    """Builds a session's `Agent` (an `AgentBuilder` for `JourneymanAcpAgent`)."""

    def __init__(self, options: LaunchOptions) -> None:
        self.options = options

    def __call__(
        self, workspace: Path, hooks: SessionHooks, record: SessionRecord | None
    ) -> BuiltAgent:
        if record is None:
            config, run_options, spec, notes, assume_yes = self._fresh(workspace)
        else:
            config, run_options, spec, notes, assume_yes = self._stored(record)
        if config.permissions is None:  # a session stored before permissions existed
            config = config.model_copy(update={"permissions": PermissionsConfig()})
        return BuiltAgent(
            self._agent(workspace, config, run_options, spec, hooks, assume_yes), tuple(notes)
        )

    def _fresh(
        self, workspace: Path
    ) -> tuple[AgentConfig, RunOptions, dict[str, Any], list[str], bool]:
        from journeyman.loop.config_file import load_config

        flags = dict(self.options.settings)
        loaded = load_config(workspace)
        config = loaded.build(session_dir=self.options.session_dir, stream=True, **flags)
        notes = [item.message for item in loaded.ignored]
        for note in notes:
            log.warning("%s", note)
        run_options = RunOptions(
            base_url=self.options.base_url,
            tool_format=self._tool_format(self.options.tool_format),
            mcp=self.options.mcp,
            ignored_settings=tuple(item.to_dict() for item in loaded.ignored),
        )
        spec = {"provider": self.options.provider, "model": self.options.model}
        return config, run_options, spec, notes, bool(self.options.assume_yes)

    def _stored(
        self, record: SessionRecord
    ) -> tuple[AgentConfig, RunOptions, dict[str, Any], list[str], bool]:
        from journeyman.loop.config_file import restorable_settings
        from journeyman.session.redact import MASK

        settings, ignored = restorable_settings(record)
        stored_options = RunOptions.from_settings(settings)
        values = dict(settings.get("config") or {})
        flags = dict(self.options.settings)
        permission_mode = flags.pop("permission_mode", None)
        values.update({k: v for k, v in flags.items() if v is not None})
        if permission_mode is not None:
            values["permissions"] = {**(values.get("permissions") or {}), "mode": permission_mode}
        values["session_dir"] = session_root(self.options.session_dir)  # where it was found
        values["stream"] = True
        try:
            config = AgentConfig(**values)
        except ValueError as error:
            raise ConfigurationError(
                f"the stored settings of session {record.id} are not usable: {error}"
            ) from None
        base_url = self.options.base_url or stored_options.base_url
        if MASK in str(base_url or ""):
            raise ConfigurationError(
                f"the base URL of session {record.id} held credentials, which are not stored; "
                "start `journeyman acp` with --base-url"
            )
        run_options = RunOptions(
            base_url=base_url,
            tool_format=self._tool_format(self.options.tool_format or stored_options.tool_format),
            mcp=stored_options.mcp if self.options.mcp is None else self.options.mcp,
        )
        spec = {
            "provider": self.options.provider or settings.get("provider"),
            "model": self.options.model or settings.get("model"),
        }
        assume_yes = (
            bool(settings.get("assume_yes", False))
            if self.options.assume_yes is None
            else self.options.assume_yes
        )
        return config, run_options, spec, [item.message for item in ignored], assume_yes

    @staticmethod
    def _tool_format(text: Any) -> Any:
        from journeyman.providers.tool_modes import parse_tool_mode

        try:
            return parse_tool_mode(text or "auto")
        except ValueError as error:
            raise ConfigurationError(f"--tool-format: {error}") from None

    def _agent(
        self,
        workspace: Path,
        config: AgentConfig,
        run_options: RunOptions,
        spec: dict[str, Any],
        hooks: SessionHooks,
        assume_yes: bool,
    ) -> Agent:
        from journeyman.loop.servers import lsp_for_run, mcp_for_run
        from journeyman.providers.factory import create_provider

        provider = create_provider(
            spec.get("provider"),
            spec.get("model"),
            run_options.base_url,
            tool_format=run_options.tool_format,
            on_notice=lambda text: log.warning("note: %s", text),
            discover_local=True,
        )
        agent = Agent(
            provider,
            workspace=workspace,
            config=config,
            on_event=hooks.on_event,
            options=run_options,
            permission_approver=hooks.permission_approver,
            assume_yes=assume_yes,
            lsp=lsp_for_run(workspace, enabled=self.options.lsp),
            mcp=mcp_for_run(workspace, run_options.mcp),
        )
        if self.options.tracing is not None:
            self.options.tracing.attach(agent)  # each prompt's run is a trace of its own
        return agent
