"""`journeyman rules`: the rules files the agent reads into its system prompt."""

from __future__ import annotations

from pathlib import Path

import typer

from journeyman.cli.exits import (
    EXIT_CONFIG,
    fail,
)
from journeyman.cli.options import (
    WorkspaceOpt,
)
from journeyman.context.rules import RulesLoader, describe_sources
from journeyman.core.display import printable


def rules(workspace: WorkspaceOpt = None) -> None:
    """Show the rules files the agent reads into its system prompt: which exist, which were
    loaded, and their priority (the highest is listed first and wins a conflict)."""
    root = (workspace or Path(".")).resolve()
    if not root.is_dir():
        fail(EXIT_CONFIG, f"workspace {root} is not a directory")
    loader = RulesLoader(root)
    for line in describe_sources(loader.sources):
        typer.echo(line)
    for warning in loader.warnings:
        typer.echo(printable(f"warning: {warning}"), err=True)
    loaded = loader.loaded
    typer.echo(
        f"{len(loaded)} file(s) loaded, {len(loader.text):,} characters in the system prompt"
        if loaded
        else "no rules loaded: add .journeyman/rules.md or AGENTS.md to the workspace"
    )
