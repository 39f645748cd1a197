"""`journeyman acp`: serve the Agent Client Protocol on stdio, for editors such as Zed. The
protocol package and the agent load only when the command runs."""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from journeyman.cli.exits import EXIT_CANCELLED, EXIT_CONFIG, EXIT_OK, fail
from journeyman.cli.lsp_cmd import LspOpt
from journeyman.cli.options import (
    AllowTestEditsOpt,
    BaseUrlOpt,
    EditToolOpt,
    MaxBudgetOpt,
    MaxDurationOpt,
    MaxIterationsOpt,
    MaxTokensOpt,
    McpOpt,
    ModelOpt,
    ModeOpt,
    NoVerifyOpt,
    OtelOpt,
    PermissionModeOpt,
    ProviderOpt,
    SandboxOpt,
    SessionDirOpt,
    ToolFormatOpt,
    VerifyOpt,
    YesOpt,
    given_limits,
)

if TYPE_CHECKING:
    from journeyman.integrations.otel.tracing import AgentTracing
    from journeyman.protocols.acp.launch import LaunchOptions

INSTALL_HINT = (
    "`journeyman acp` needs the Agent Client Protocol package, which is not installed; "
    "install it with: pip install 'journeyman[acp]'  (or: pip install agent-client-protocol)"
)


def acp_command(
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    tool_format: ToolFormatOpt = None,
    session_dir: SessionDirOpt = None,
    permission_mode: PermissionModeOpt = None,
    yes: YesOpt = None,
    mode: ModeOpt = None,
    verify: VerifyOpt = None,
    no_verify: NoVerifyOpt = False,
    allow_test_edits: AllowTestEditsOpt = False,
    sandbox: SandboxOpt = None,
    edit_tool: EditToolOpt = None,
    max_iterations: MaxIterationsOpt = None,
    max_budget_usd: MaxBudgetOpt = None,
    max_total_tokens: MaxTokensOpt = None,
    max_duration: MaxDurationOpt = None,
    lsp: LspOpt = True,
    mcp: McpOpt = None,
    otel: OtelOpt = False,
) -> None:
    """Serve the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim
    plugins): the editor opens sessions on a folder, sends prompts, answers permission
    questions, cancels, and reopens stored sessions.

    Settings work as for `run`: the user config, the workspace's file (which may only
    tighten), JOURNEYMAN_* variables, then these flags; the editor chooses only the folder.
    Calls that need approval (default permission mode: edits and commands) are asked in the
    editor. Logs go to stderr; stdout carries only the protocol. See docs/acp.md.
    """
    if importlib.util.find_spec("acp") is None:
        fail(EXIT_CONFIG, INSTALL_HINT)
    from journeyman.cli.run_cmd import _tracing
    from journeyman.cli.sessions_cmd import usable_session_folder
    from journeyman.core.errors import ConfigurationError
    from journeyman.protocols.acp.launch import LaunchOptions, check_launch_options

    # one folder for the sessions it runs and the ones the editor reopens
    session_dir = usable_session_folder(session_dir)
    limits = given_limits(
        max_iterations, max_budget_usd, max_total_tokens, max_duration, None, None
    )
    settings = _flag_settings(
        limits, permission_mode, mode, verify, no_verify, allow_test_edits, sandbox
    )
    if edit_tool is not None:
        settings["edit_tool"] = edit_tool
    try:
        check_launch_options(LaunchOptions(provider=provider, model=model, tool_format=tool_format))
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    tracing = _tracing(otel)  # before stdout is taken: its notes go to stderr, as all do here
    options = LaunchOptions(
        provider=provider,
        model=model,
        base_url=base_url,
        tool_format=tool_format,
        session_dir=session_dir,
        settings=settings,
        assume_yes=yes,
        lsp=lsp,
        mcp=mcp,
        tracing=tracing,
    )
    _serve(options, tracing)


def _flag_settings(
    limits: dict[str, Any],
    permission_mode: PermissionModeOpt,
    mode: ModeOpt,
    verify: VerifyOpt,
    no_verify: bool,
    allow_test_edits: bool,
    sandbox: SandboxOpt,
) -> dict[str, Any]:
    """The settings the flags give; those not given are left to the configuration's layers."""
    settings: dict[str, Any] = {
        **limits,
        "permission_mode": permission_mode,
        "mode": mode,
        "verify_command": verify,
        "verify": False if no_verify else None,
        "allow_test_edits": True if allow_test_edits else None,
        "sandbox": sandbox,
    }
    return {k: v for k, v in settings.items() if v is not None}


def _serve(options: LaunchOptions, tracing: AgentTracing | None) -> NoReturn:
    """Serve the protocol on stdout until the editor closes it (or ^C), then exit."""
    import asyncio

    from journeyman.core.package import package_version
    from journeyman.protocols.acp.stdio import configure_logging, serve, take_stdout

    configure_logging()
    protocol_fd = take_stdout()
    try:
        asyncio.run(serve(options, package_version(), protocol_fd))
    except KeyboardInterrupt:
        sys.stderr.write("journeyman acp: interrupted\n")
        raise typer.Exit(EXIT_CANCELLED) from None
    finally:
        if tracing is not None:
            tracing.close()  # sends the last spans
    raise typer.Exit(EXIT_OK)
