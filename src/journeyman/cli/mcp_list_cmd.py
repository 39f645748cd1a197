"""`journeyman mcp`, `mcp list` and `mcp serve`, apart from `mcp_cmd` and the MCP server's
package so that the MCP SDK loads only when one of them runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from journeyman.cli.exits import EXIT_CONFIG, fail
from journeyman.cli.mcp_serve_options import (
    DEFAULT_HTTP_PORT,
    ApprovalTimeoutOpt,
    PortOpt,
    RootOpt,
    ServeLspOpt,
    ServeTransport,
    ServeWorkspaceOpt,
    ServeYesOpt,
    TransportOpt,
)
from journeyman.cli.options import (
    MCP_CONFIG,
    AllowNetworkOpt,
    AllowTestEditsOpt,
    BaseUrlOpt,
    BudgetModeOpt,
    EditToolOpt,
    MaxBudgetOpt,
    MaxDurationOpt,
    MaxIterationsOpt,
    MaxTokensOpt,
    ModelOpt,
    NoVerifyOpt,
    OtelOpt,
    PermissionModeOpt,
    PricePerMtokOpt,
    ProviderOpt,
    SandboxOpt,
    SessionDirOpt,
    ToolFormatOpt,
    ToolTimeoutOpt,
    VerifyOpt,
    WorkspaceOpt,
    given_limits,
)

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing
    from journeyman.protocols.mcp_server import ServerPolicy

mcp_app = typer.Typer(
    help="MCP servers declared in your mcp.json and the workspace's .journeyman/mcp.json, "
    "and journeyman itself as an MCP server (`mcp serve`).",
    no_args_is_help=True,
)


@mcp_app.command("list")
def mcp_list_cmd(
    workspace: WorkspaceOpt = None,
    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp",
            help=f"Also start the servers of the workspace's {MCP_CONFIG}; without it only "
            "your own mcp.json's servers start (a repository does not choose programs to run).",
        ),
    ] = False,
) -> None:
    """Start the MCP servers, show their status and tools, and stop them."""
    from journeyman.cli.mcp_cmd import mcp_list  # the MCP SDK loads only for this command

    raise typer.Exit(mcp_list(workspace or Path("."), include_workspace=mcp))


@mcp_app.command("serve")
def mcp_serve_cmd(
    workspace: ServeWorkspaceOpt = None,
    root: RootOpt = None,
    transport: TransportOpt = ServeTransport.STDIO,
    port: PortOpt = None,
    yes: ServeYesOpt = False,
    approval_timeout: ApprovalTimeoutOpt = 60.0,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    tool_format: ToolFormatOpt = None,
    max_iterations: MaxIterationsOpt = None,
    max_budget_usd: MaxBudgetOpt = None,
    price_per_mtok: PricePerMtokOpt = None,
    max_total_tokens: MaxTokensOpt = None,
    max_duration: MaxDurationOpt = None,
    budget_mode: BudgetModeOpt = None,
    tool_timeout: ToolTimeoutOpt = None,
    permission_mode: PermissionModeOpt = None,
    sandbox: SandboxOpt = None,
    edit_tool: EditToolOpt = None,
    allow_network: AllowNetworkOpt = False,
    session_dir: SessionDirOpt = None,
    verify: VerifyOpt = None,
    no_verify: NoVerifyOpt = False,
    allow_test_edits: AllowTestEditsOpt = False,
    lsp: ServeLspOpt = True,
    otel: OtelOpt = False,
) -> None:
    """Serve journeyman as an MCP server: clients start runs, continue sessions, read status
    and diffs, and undo. Runs obey this command's limits, permission mode and sandbox (and the
    user and workspace config files, under the same trust rules as `run`); a client may only
    tighten them. See docs/mcp-server.md."""
    if port is not None and transport is not ServeTransport.HTTP:
        fail(EXIT_CONFIG, "--port needs --transport http (stdio has no port)")
    limits = given_limits(
        max_iterations,
        max_budget_usd,
        max_total_tokens,
        max_duration,
        budget_mode,
        tool_timeout,
        price_per_mtok,
    )
    flags = {
        **limits,
        "permission_mode": permission_mode,
        "sandbox": sandbox,
        "edit_tool": edit_tool,
        "allow_network": True if allow_network else None,
        "session_dir": session_dir,
        "verify_command": verify,
        "verify": False if no_verify else None,
        "allow_test_edits": True if allow_test_edits else None,
    }
    serve_command(
        roots=[workspace or Path("."), *(root or [])],
        provider_settings={
            "provider": provider,
            "model": model,
            "base_url": base_url,
            "tool_format": tool_format,
        },
        flags={key: value for key, value in flags.items() if value is not None},
        assume_yes=yes,
        approval_timeout_s=approval_timeout,
        lsp=lsp,
        transport=transport.value,
        port=DEFAULT_HTTP_PORT if port is None else port,
        otel=otel,
    )


def serve_command(
    *,
    roots: list[Path],
    provider_settings: dict[str, Any],
    flags: dict[str, Any],
    assume_yes: bool,
    lsp: bool,
    transport: str,
    approval_timeout_s: float = 60.0,
    port: int,
    otel: bool = False,
) -> None:
    """Check what the user gave (folders, config files, provider), then serve until the client
    goes away or the process is interrupted."""
    from journeyman.cli.sessions_cmd import usable_session_folder
    from journeyman.core.errors import ConfigurationError
    from journeyman.loop.launch import open_provider
    from journeyman.loop.launch import tool_format as checked_tool_format
    from journeyman.protocols.mcp_server import ClientLimits, ServerPolicy
    from journeyman.protocols.mcp_server.policy import run_settings
    from journeyman.protocols.mcp_server.serve import note

    _refuse_unusable_roots(roots)
    try:
        tool_format = checked_tool_format(provider_settings.get("tool_format"))
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    policy = ServerPolicy(
        roots=tuple(roots),
        provider=provider_settings.get("provider"),
        model=provider_settings.get("model"),
        base_url=provider_settings.get("base_url"),
        tool_format=tool_format,
        flags=flags,
        assume_yes=assume_yes,
        approval_timeout_s=approval_timeout_s,
        lsp=lsp,
    )

    def provider_factory() -> Any:
        return open_provider(
            policy.provider,
            policy.model,
            base_url=policy.base_url,
            tool_format=tool_format,
            notice=note,
        )

    try:
        settings = run_settings(policy, policy.resolved_roots()[0], ClientLimits())
        provider_factory()  # a missing key or an unknown provider is said now, not per run
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    usable_session_folder(flags.get("session_dir"))  # the folder the runs' tools read too
    tracing = _tracing(otel, note)
    for item in settings.ignored:
        note(f"warning: {item.message}")
    permissions = settings.config.permissions
    mode = permissions.mode.value if permissions is not None else "default"
    note(_serving_line(transport, policy.resolved_roots(), mode, assume_yes))
    _serve_until_closed(policy, provider_factory, transport, port, tracing)


def _refuse_unusable_roots(roots: list[Path]) -> None:
    """Exit 2 unless every folder clients may name exists and is not the file system's root."""
    for folder in roots:
        if not folder.is_dir():
            fail(EXIT_CONFIG, f"{folder} is not a directory; -w and --root take existing folders")
        if folder.resolve() == Path(folder.resolve().anchor):
            # a client starts the server in a folder of its choosing, often /: never all of it
            fail(
                EXIT_CONFIG,
                f"{folder} is the root of the file system; pass -w (and --root) the folders "
                "clients may work in",
            )


def _serving_line(transport: str, roots: Sequence[Path], mode: str, assume_yes: bool) -> str:
    """The note that says, as the server starts, what clients may do and how calls are
    approved."""
    approvals = (
        "approved (--yes)"
        if assume_yes
        else (
            "asked through elicitation when the client supports it (runs with wait=true), "
            "else refused (see --yes)"
        )
    )
    return (
        f"MCP server over {transport}; workspaces under "
        f"{', '.join(str(root) for root in roots)}; permission mode {mode}; "
        f"calls that need approval are {approvals}"
    )


def _serve_until_closed(
    policy: ServerPolicy,
    provider_factory: Callable[[], Any],
    transport: str,
    port: int,
    tracing: AgentTracing | None,
) -> None:
    """Serve until the client goes away or the process is interrupted; the last spans are sent
    on the way out."""
    from journeyman.protocols.mcp_server import serve
    from journeyman.protocols.mcp_server.serve import note

    try:
        serve(
            policy,
            provider_factory,
            transport="http" if transport == "http" else "stdio",
            port=port,
            on_listening=lambda url: note(f"listening on {url}"),
            tracing=tracing,
        )
    except OSError as error:
        fail(EXIT_CONFIG, str(error))
    except KeyboardInterrupt:
        pass
    finally:
        if tracing is not None:
            tracing.close()  # sends the last spans


def _tracing(explicit: bool, note: Callable[[str], None]) -> AgentTracing | None:
    """The runs' tracing; its notes and warnings go to stderr only (stdout may be the
    protocol)."""
    from journeyman.core.errors import ConfigurationError
    from journeyman.integrations.otel.command_line import tracing_for_run

    try:
        return tracing_for_run(
            explicit,
            note=lambda text: note(f"note: {text}"),
            warn=lambda text: note(f"warning: {text}"),
        )
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
