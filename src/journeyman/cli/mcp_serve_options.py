"""The options of `journeyman mcp serve` alone (typer `Annotated` types); those it shares with
`run` are in `options`."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer


class ServeTransport(StrEnum):
    """How `mcp serve` talks to its client."""

    STDIO = "stdio"
    HTTP = "http"


DEFAULT_HTTP_PORT = 8765
"""The port of `mcp serve --transport http` when none is given."""


ServeWorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="The folder runs work in by default; clients may name it or folders inside it "
        "(default: the current folder).",
    ),
]
RootOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--root",
        help="Another folder clients may name as a workspace (or any folder inside it); "
        "repeat for more. Nothing outside these folders and -w is reachable.",
    ),
]
TransportOpt = Annotated[
    ServeTransport,
    typer.Option(
        help="stdio (default): the client starts this command and talks over its stdin "
        "and stdout; http: streamable HTTP on 127.0.0.1 only (any local program can "
        "connect: there is no authentication)."
    ),
]
PortOpt = Annotated[
    int | None,
    typer.Option(
        min=0,
        max=65535,
        help=f"With --transport http: the port (default {DEFAULT_HTTP_PORT}; 0 takes a free one).",
    ),
]
ServeYesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Approve every call that would need asking (deny rules and plan mode still "
        "refuse). Without it such calls are refused, as nobody is there to answer; use "
        "--permission-mode accept_edits to let runs edit files while commands stay refused.",
    ),
]
ApprovalTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--approval-timeout",
        min=0.001,
        help="Seconds to wait for the client's answer when a call that needs approval is "
        "asked through MCP elicitation; no answer refuses the call.",
    ),
]
ServeLspOpt = Annotated[
    bool, typer.Option("--lsp/--no-lsp", help="Offer runs the configured language servers.")
]
