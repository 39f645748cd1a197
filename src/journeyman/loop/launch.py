"""The one way an agent is built, for every surface.

`run`, `resume`, `fork`, `run --continue`, `chat`, `acp`, `mcp serve`, the swarm's planner and
workers, batch and eval tasks and subagents all get their `Agent` here, so each inherits the
same guarantees instead of re-assembling them:

1. `settle` turns what a surface asks for (`LaunchRequest`) into settings: the user's config,
   the workspace's file held to the trust rules (it may only tighten), `JOURNEYMAN_*`
   variables, then the surface's flags; or, for a stored session, the settings it was stored
   with (only what the trust rules accept from data, for an imported one) with the flags on
   top. It is the only reader of the config files.
2. `open_provider` builds the provider (the only caller of `create_provider` besides `Agent`
   given a spec string).
3. `build_agent` constructs the `Agent` (its sandbox, tools, check, redaction, pricing and
   caps are the agent's own), hides the run's secrets from the process environment block,
   attaches tracing and collects what the user must be told.

Surfaces differ only in what they pass as `Surface`: where events go, who answers questions,
how a notice is shown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError
from journeyman.economics.approval import ExtensionApprover, deny_extensions
from journeyman.loop.agent import Agent
from journeyman.loop.config import AgentConfig
from journeyman.loop.run_options import RunOptions
from journeyman.policy.permissions import Approver, PermissionsConfig
from journeyman.policy.settings import IgnoredSetting
from journeyman.providers.base import Provider
from journeyman.providers.resilient import RetryPolicy
from journeyman.tools.sandbox.environ_guard import hide_run_secrets

if TYPE_CHECKING:
    from journeyman.context.rules import RulesLoader
    from journeyman.core.events import EventHandler
    from journeyman.integrations.lsp import LspManager
    from journeyman.integrations.mcp import McpManager
    from journeyman.integrations.otel.tracing import AgentTracing
    from journeyman.providers.tool_modes import ToolModeChoice
    from journeyman.session.store import SessionRecord
    from journeyman.tools.base import Tool

log = logging.getLogger(__name__)

Notice = Callable[[str], None]


@dataclass(frozen=True)
class ProviderChoice:
    """The provider a surface's flags name (None: not given: stored, configured or detected)."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    tool_format: str | None = None


@dataclass(frozen=True)
class LaunchRequest:
    """What a surface asks for: the workspace, the provider and its flags (None: not given)."""

    workspace: Path
    chosen: ProviderChoice = field(default_factory=ProviderChoice)
    flags: Mapping[str, Any] = field(default_factory=dict)
    """`AgentConfig` fields set by the surface's flags, the top layer (None values: not
    given). `permission_mode` sets the permissions' mode; `pass_env` and `sandbox_hidden`
    add to the configured ones."""
    session_dir: Path | None = None
    stream: bool | None = None
    """Whether the model's text streams, when the surface decides it."""
    stream_by_default: bool = False
    """Stream when neither the surface nor the settings say (a terminal)."""
    assume_yes: bool | None = None
    lsp: bool = True
    mcp: bool | None = None
    project_hooks: bool = False
    """Keep the hooks of the workspace's config file (the user said to trust them)."""
    record: SessionRecord | None = None
    """A stored session to go on with: its settings are the base instead of the config files."""


@dataclass
class Launch:
    """Settled settings: everything an agent is built from, before anything starts."""

    workspace: Path
    config: AgentConfig
    options: RunOptions
    provider: str | None
    model: str | None
    assume_yes: bool
    lsp: bool
    ignored: tuple[IgnoredSetting, ...] = ()
    """Settings the trust rules left out; each surface shows them."""


@dataclass
class Surface:
    """How a surface hears from and talks to its agents."""

    on_event: EventHandler | None = None
    approver: ExtensionApprover = deny_extensions
    """Answers a budget extension request (None of the surface's business: refused)."""
    permission_approver: Approver | None = None
    """Asks the user about calls that need approval; None refuses them (unless assume_yes)."""
    notice: Notice = field(default=lambda text: log.warning("%s", printable(text)))
    """Shows one line to the user (`note: ...` or `warning: ...`)."""
    tracing: AgentTracing | None = None
    """OpenTelemetry tracing of every agent built for this surface."""
    start_servers: bool = True
    """Start the workspace's language and MCP servers as the settings say."""


def settle(request: LaunchRequest) -> Launch:
    """The settings of a launch under the trust rules (see the module docstring).

    Raises `ConfigurationError` for unusable config files, stored settings or flags.
    """
    launch = _fresh(request) if request.record is None else _stored(request, request.record)
    if launch.config.permissions is None:  # a session stored before permissions existed
        launch.config = launch.config.model_copy(update={"permissions": PermissionsConfig()})
    return launch


def _fresh(request: LaunchRequest) -> Launch:
    from journeyman.loop.config_file import load_config

    loaded = load_config(request.workspace, project_hooks=request.project_hooks)
    flags = {key: value for key, value in request.flags.items() if value is not None}
    for additive in ("pass_env", "sandbox_hidden"):  # the flags add to the configured ones
        if additive in flags:
            flags[additive] = [*loaded.values.get(additive, []), *flags[additive]]
    if request.stream is not None:
        flags["stream"] = request.stream
    elif request.stream_by_default and "stream" not in loaded.values:
        flags["stream"] = True
    if request.session_dir is not None:
        flags["session_dir"] = request.session_dir
    config = loaded.build(**flags)
    options = RunOptions(
        base_url=request.chosen.base_url,
        tool_format=tool_format(request.chosen.tool_format),
        mcp=request.mcp,
        ignored_settings=tuple(item.to_dict() for item in loaded.ignored),
    )
    return Launch(
        request.workspace,
        config,
        options,
        request.chosen.provider,
        request.chosen.model,
        bool(request.assume_yes),
        request.lsp,
        tuple(loaded.ignored),
    )


def _stored(request: LaunchRequest, record: SessionRecord) -> Launch:
    from journeyman.loop.config_file import restorable_settings, set_permission_mode
    from journeyman.session.redact import MASK

    settings, ignored = restorable_settings(record)
    stored = RunOptions.from_settings(settings)
    values = dict(settings.get("config") or {})
    flags = dict(request.flags)
    permission_mode = flags.pop("permission_mode", None)
    values.update({key: value for key, value in flags.items() if value is not None})
    if permission_mode is not None:
        set_permission_mode(values, permission_mode)
    values["session_dir"] = request.session_dir
    values["stream"] = request.stream if request.stream is not None else request.stream_by_default
    try:
        config = AgentConfig(**values)
    except ValueError as error:
        raise ConfigurationError(
            f"the stored settings of session {record.id} are not usable: {error}"
        ) from None
    chosen = request.chosen
    base_url = chosen.base_url or stored.base_url
    if MASK in str(base_url or ""):
        raise ConfigurationError(
            f"the base URL of session {record.id} held credentials, which are not stored; "
            "give it again with --base-url"
        )
    options = RunOptions(
        base_url=base_url,
        tool_format=tool_format(chosen.tool_format or stored.tool_format),
        mcp=stored.mcp if request.mcp is None else request.mcp,
        ignored_settings=tuple(item.to_dict() for item in ignored),
    )
    assume_yes = (
        settings.get("assume_yes", False) if request.assume_yes is None else request.assume_yes
    )
    return Launch(
        request.workspace,
        config,
        options,
        chosen.provider or settings.get("provider"),
        chosen.model or settings.get("model"),
        bool(assume_yes),
        request.lsp,
        tuple(ignored),
    )


def tool_format(text: str | None) -> ToolModeChoice:
    """A tool format named by a flag or a stored session, checked."""
    from journeyman.providers.tool_modes import parse_tool_mode

    try:
        return parse_tool_mode(text or "auto")
    except ValueError as error:
        raise ConfigurationError(f"--tool-format: {error}") from None


def open_provider(
    provider: str | None,
    model: str | None,
    *,
    base_url: str | None = None,
    tool_format: ToolModeChoice = "auto",
    api_key: str | None = None,
    notice: Notice | None = None,
    discover_local: bool = True,
) -> Provider:
    """The provider a launch names (None: detected from the environment, or a local server).

    Raises `ConfigurationError` saying what to set when something is missing or unknown.
    """
    from journeyman.providers.factory import create_provider

    return create_provider(
        provider,
        model,
        base_url,
        api_key=api_key,
        tool_format=tool_format,
        on_notice=None if notice is None else (lambda text: notice(f"note: {text}")),
        discover_local=discover_local,
    )


def launch(launch: Launch, surface: Surface, *, provider: Provider | None = None) -> Agent:
    """A ready agent for `launch`: its provider (`provider` when the surface already has one),
    sandbox, tools, check, caps and tracing; what the user must be told goes to
    `surface.notice`. Raises `ConfigurationError` (e.g. a sandbox that cannot start)."""
    if provider is None:
        provider = open_provider(
            launch.provider,
            launch.model,
            base_url=launch.options.base_url,
            tool_format=launch.options.tool_format,
            notice=surface.notice,
        )
    lsp: LspManager | None = None
    mcp: McpManager | None = None
    if surface.start_servers:
        from journeyman.loop.servers import lsp_for_run, mcp_for_run

        lsp = lsp_for_run(launch.workspace, enabled=launch.lsp, say=surface.notice)
        mcp = mcp_for_run(launch.workspace, launch.options.mcp, say=surface.notice)
    agent = build_agent(
        provider,
        launch.workspace,
        launch.config,
        surface,
        options=launch.options,
        assume_yes=launch.assume_yes,
        lsp=lsp,
        mcp=mcp,
    )
    for warning in [*agent.rules.warnings, *agent.skills.warnings]:
        surface.notice(f"warning: {warning}")
    for note in (_minimal_tools(agent), _outside_the_sandbox(agent, mcp)):
        if note:
            surface.notice(f"note: {note}")
    return agent


def _minimal_tools(agent: Agent) -> str | None:
    """The line saying that the model was offered the minimal tool set, and how to change it."""
    if not agent.minimal_tools:
        return None
    names = ", ".join(agent.registry.names)
    if agent.config.tool_set == "auto":
        why = f"{printable(agent.provider.model)} is a tiny model"
    else:
        why = 'tool_set = "minimal"'
    return f'{why}: it is offered only {names} (tool_set = "full" offers every tool)'


def _outside_the_sandbox(agent: Agent, mcp: McpManager | None) -> str | None:
    """The line saying which MCP servers run outside the sandbox, when the run has a sandbox
    and starts any (all but those whose config asks for the sandbox): "network off" in the
    sandbox line does not hold for them."""
    from journeyman.tools.choices import SandboxKind

    if mcp is None or agent.minimal_tools or agent.sandbox.kind is SandboxKind.LOCAL:
        return None
    names = mcp.server_names(sandboxed=False)
    if not names:
        return None
    listed = ", ".join(printable(name) for name in names)
    return (
        f"MCP servers run outside the sandbox, as you, with your network and files: {listed} "
        '(docs/security.md; `"sandbox": true` in its entry starts one inside)'
    )


def build_agent(
    provider: Provider,
    workspace: Path,
    config: AgentConfig,
    surface: Surface,
    *,
    options: RunOptions | None = None,
    assume_yes: bool = False,
    tools: Iterable[Tool] | None = None,
    rules: RulesLoader | None = None,
    retry_policy: RetryPolicy | None = None,
    lsp: LspManager | None = None,
    mcp: McpManager | None = None,
) -> Agent:
    """Construct the agent and give it what every surface owes it: the run's secrets out of the
    process environment block, tracing, the surface's handlers."""
    agent = Agent(
        provider,
        workspace=workspace,
        config=config,
        tools=tools,
        on_event=surface.on_event,
        retry_policy=retry_policy,
        approver=surface.approver,
        options=options,
        permission_approver=surface.permission_approver,
        assume_yes=assume_yes,
        rules=rules,
        lsp=lsp,
        mcp=mcp,
    )
    exposed = hide_run_secrets(agent.sandbox.kind)
    if exposed is not None:
        surface.notice(f"warning: {exposed}")
    if surface.tracing is not None:
        surface.tracing.attach(agent)
    return agent
