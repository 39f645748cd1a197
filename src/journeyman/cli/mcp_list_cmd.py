"""`journeyman mcp` and `mcp list`, apart from `mcp_cmd` so that the MCP SDK loads only when
it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from journeyman.cli.options import (
    MCP_CONFIG,
    WorkspaceOpt,
)

mcp_app = typer.Typer(
    help="MCP servers declared in your mcp.json and the workspace's .journeyman/mcp.json.",
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
