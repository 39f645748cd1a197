"""`journeyman lsp`, and the `--lsp/--no-lsp` option of the commands that start runs.

`lsp_report` prints which language servers are configured, installed, detected for the
workspace, and (after starting the detected ones) running with which capabilities. The servers
a run starts are chosen by `loop.servers.lsp_for_run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from journeyman.core.errors import ConfigurationError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from journeyman.integrations.lsp import LspManager, ServerStatus

LSP_SETTINGS_FILE = ".journeyman/lsp.toml"
"""`integrations.lsp.CONFIG_FILE`, repeated so that the language server machinery loads only
when it is used (the --lsp help names it)."""
LSP_ENV_SWITCH = "JOURNEYMAN_LSP"
"""`integrations.lsp.ENV_SWITCH`, repeated for the same reason."""

EXIT_OK = 0
EXIT_SERVER_FAILED = 1
EXIT_CONFIG = 2

_STATE_STYLE = {"running": "green", "not started": "dim", "not installed": "dim"}

LspOpt = Annotated[
    bool,
    typer.Option(
        "--lsp/--no-lsp",
        help=f"Offer the lsp_* tools and diagnostics after edits when a language server is "
        f"installed (default); --no-lsp starts none. Also {LSP_ENV_SWITCH}=0 or "
        f"'enabled = false' in {LSP_SETTINGS_FILE}.",
    ),
]


def lsp_command(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", "-w", help="Repository to inspect.")
    ] = None,
    start: Annotated[
        bool,
        typer.Option(
            "--start/--no-start",
            help="Start the servers detected for the workspace to show their capabilities, "
            "then stop them (default); --no-start only looks for executables and marker files.",
        ),
    ] = True,
) -> None:
    """Show the language servers: configured, installed, detected, running, capabilities.

    Configured: built in (typescript, pyright with pylsp as the Python fallback,
    rust-analyzer, gopls, json) or declared in the user's lsp.toml (beside
    config.toml; a workspace's .journeyman/lsp.toml may tune and disable
    servers, not add them).
    Installed: its executable is on PATH or beside journeyman's Python.
    Detected: a marker file of its language is at the workspace root
    (pyproject.toml, package.json, Cargo.toml, go.mod...).

    During a run, servers start on first use and only if installed; one that
    crashes or hangs is restarted once, then left off, and the run goes on.
    Turn them off with --no-lsp, JOURNEYMAN_LSP=0 or 'enabled = false' in
    .journeyman/lsp.toml.

    Exit status: 0; 1 when a detected server failed to start; 2 for an invalid
    config file.
    """
    raise typer.Exit(lsp_report(workspace or Path("."), start=start))


def lsp_report(workspace: Path, *, start: bool = True, console: Console | None = None) -> int:
    """Print the servers table (and start/stop the detected servers first when `start`)."""
    import asyncio

    from rich.console import Console
    from rich.markup import escape

    from journeyman.integrations.lsp import CONFIG_FILE, ENV_SWITCH, LspManager
    from journeyman.loop.servers import load_lsp_settings

    out = console or Console(highlight=False, soft_wrap=True)
    if not workspace.is_dir():
        out.print(f"[red]workspace {escape(str(workspace))} is not a directory[/]")
        return EXIT_CONFIG
    try:
        loaded = load_lsp_settings(workspace)
    except ConfigurationError as exc:
        out.print(f"[red]{escape(exc.message)}[/]")
        return EXIT_CONFIG
    for warning in loaded.warnings:
        out.print(f"[yellow]warning: {escape(warning)}[/]")
    config = loaded.config
    manager = LspManager(workspace, config)
    if not config.enabled:
        out.print(f"Language servers are turned off ({ENV_SWITCH} or {CONFIG_FILE}).")
    statuses = asyncio.run(_survey(manager, start=start and config.enabled))
    out.print(_servers_table(statuses))
    for status in statuses:
        if status.capabilities:
            out.print(
                f"[bold]{escape(status.name)}[/] offers: {escape(', '.join(status.capabilities))}"
            )
    if start and any(s.running for s in statuses):
        out.print("[dim]Servers started for this report were stopped again.[/]")
    if not any(s.detected for s in statuses):
        out.print(
            "No language server is detected for this workspace (no pyproject.toml, "
            "package.json, Cargo.toml, go.mod... at its root); installed servers still start "
            "when the agent asks about a file they cover."
        )
    failed = [s for s in statuses if s.state in ("crashed", "unavailable")]
    return EXIT_SERVER_FAILED if failed else EXIT_OK


async def _survey(manager: LspManager, *, start: bool) -> list[ServerStatus]:
    try:
        return await manager.start_detected() if start else manager.status()
    finally:
        await manager.aclose()


def _servers_table(statuses: list[ServerStatus]) -> Table:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Language servers", title_justify="left")
    for column in ("server", "language", "command", "detected", "status"):
        table.add_column(column, overflow="fold")
    for s in statuses:
        command = " ".join(s.command) if s.installed else f"{s.command[0]} (not found)"
        detected = ", ".join(s.markers) if s.detected else "-"
        style = _STATE_STYLE.get(s.state, "red")
        state = f"[{style}]{escape(s.state)}[/]"
        if s.pid is not None:
            state += f" (pid {s.pid})"
        if s.shadowed_by:
            state += f"\n[dim]fallback, unused: {escape(s.shadowed_by)} is installed[/]"
        if s.restarts:
            state += f"\n[dim]restarted {s.restarts}x[/]"
        if s.last_error:
            state += f"\n[dim]{escape(s.last_error)}[/]"
        table.add_row(escape(s.name), s.language, escape(command), escape(detected), state)
    return table
