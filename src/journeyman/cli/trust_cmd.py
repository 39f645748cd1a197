"""`journeyman trust`: review what a repository brings (rules files, skills, hooks, MCP
servers) and approve it by content hash (`core.pins`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from journeyman.cli.exits import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, fail
from journeyman.cli.options import WorkspaceOpt
from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError
from journeyman.core.pins import Pins, PinVerdict, RepoItem


def trust(
    workspace: WorkspaceOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve what is listed without asking.")
    ] = False,
    list_only: Annotated[
        bool, typer.Option("--list", help="Only show what the repository brings; change nothing.")
    ] = False,
    revoke: Annotated[
        bool,
        typer.Option(
            "--revoke", help="Forget the approvals of this workspace: it is used as before."
        ),
    ] = False,
) -> None:
    """Review what the workspace's repository brings and approve it by content hash.

    Listed: rules files (AGENTS.md, CLAUDE.md, ...), skills (.journeyman/skills/,
    .claude/skills/, .agents/skills/), hooks of the workspace's config file (run only with
    --project-hooks) and MCP servers of .journeyman/mcp.json (started only with --mcp), each
    with its state: approved, changed, new.

    Approving records each item's hash in your own config folder, never in the repository.
    From then on the workspace is pinned: an item is used only while it is as you approved it.
    One that changes (a git pull, an edit) or appears later is not run or read, and the run
    says which, until you approve again here. A workspace never approved is used as before.

    Exit status: 0 approved or listed; 1 not approved (you said no); 2 bad input."""
    from journeyman.loop.repo_content import repository_items

    root = (workspace or Path(".")).resolve()
    if not root.is_dir():
        fail(EXIT_CONFIG, f"workspace {root} is not a directory")
    try:
        pins = Pins.load()
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    if revoke:
        done = pins.revoke(root)
        typer.echo(f"{root}: approvals forgotten" if done else f"{root}: nothing was approved")
        raise typer.Exit(EXIT_OK)
    items = repository_items(root)
    verdicts = [(item, pins.verdict(root, item.item, item.digest)) for item in items]
    _show(root, verdicts, pins.pinned(root))
    pending = [item for item, verdict in verdicts if verdict is not PinVerdict.APPROVED]
    gone = set(pins.approved(root)) - {item.item for item in items}
    if list_only or (not pending and not gone and pins.pinned(root)):
        raise typer.Exit(EXIT_OK)
    if not yes and not _confirm(len(items)):
        typer.echo("nothing approved")
        raise typer.Exit(EXIT_FAILED)
    pins.approve(root, items)
    typer.echo(f"approved {len(items)} item(s); recorded in {printable(str(pins.path))}")


def _show(root: Path, verdicts: list[tuple[RepoItem, PinVerdict]], pinned: bool) -> None:
    state = "pinned" if pinned else "not pinned: everything is used as the flags say"
    typer.echo(f"{printable(str(root))} ({state})")
    if not verdicts:
        typer.echo("  the repository brings no rules files, skills, hooks or MCP servers")
    for item, verdict in verdicts:
        label = "" if verdict is PinVerdict.UNPINNED else f"{verdict.value:<8} "
        line = f"  {label}{printable(item.item)}"
        if item.shown:
            line += f": {printable(item.shown)}"
        typer.echo(line[:200])


def _confirm(count: int) -> bool:
    if not sys.stdin.isatty():
        fail(EXIT_CONFIG, "approving needs a terminal to ask you; pass --yes to approve as listed")
    return typer.confirm(f"Approve these {count} item(s) as they are now?", default=False)
