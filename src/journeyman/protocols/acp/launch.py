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
from journeyman.loop.config_file import session_root
from journeyman.loop.launch import (
    LaunchRequest,
    ProviderChoice,
    Surface,
    launch,
    settle,
    tool_format,
)
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
    tool_format(options.tool_format)


class AgentLauncher:
    """Builds a session's `Agent` (an `AgentBuilder` for `JourneymanAcpAgent`)."""

    def __init__(self, options: LaunchOptions) -> None:
        self.options = options

    def __call__(
        self, workspace: Path, hooks: SessionHooks, record: SessionRecord | None
    ) -> BuiltAgent:
        options = self.options
        # a loaded session goes on in the store it was found in
        stored_in = session_root(options.session_dir) if record else options.session_dir
        request = LaunchRequest(
            workspace,
            ProviderChoice(options.provider, options.model, options.base_url, options.tool_format),
            flags=options.settings,
            session_dir=stored_in,
            stream=True,
            assume_yes=options.assume_yes,
            lsp=options.lsp,
            mcp=options.mcp,
            record=record,
        )
        settled = settle(request)
        notes = [item.message for item in settled.ignored]
        if record is None:
            for note in notes:
                log.warning("%s", note)
        surface = Surface(
            on_event=hooks.on_event,
            permission_approver=hooks.permission_approver,
            tracing=options.tracing,  # each prompt's run is a trace of its own
        )
        return BuiltAgent(launch(settled, surface), tuple(notes))
