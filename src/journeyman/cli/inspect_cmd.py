"""`journeyman inspect ID|--last [-o FILE.html] [--open]`: a session as one offline HTML page."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from journeyman.cli.exits import EXIT_CONFIG, fail
from journeyman.cli.options import SessionDirOpt, WorkspaceOpt
from journeyman.cli.sessions_cmd import open_store, resolve_session, session_folder
from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError


def inspect(
    session: Annotated[
        str | None,
        typer.Argument(help="Session id, or its end or beginning (or --last).", show_default=False),
    ] = None,
    last: Annotated[
        bool, typer.Option("--last", help="The latest session of the workspace.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Where to write the page (default: journeyman-<id>.html in the current "
            "folder; a folder puts that name in it).",
        ),
    ] = None,
    open_page: Annotated[
        bool, typer.Option("--open", help="Open the page in the default web browser.")
    ] = False,
    workspace: WorkspaceOpt = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Write a session as one self-contained HTML page (timeline, diffs, token and cost
    charts, subagents) that opens offline and can be attached to a bug report."""
    from journeyman.inspector import load_report, render_html

    if session and last:
        fail(EXIT_CONFIG, "give a session id or --last, not both")
    from journeyman.session.store import DATABASE_FILE

    root = session_folder(session_dir)
    if not (root / DATABASE_FILE).is_file():  # inspect only reads: it creates no store
        fail(
            EXIT_CONFIG,
            f"no sessions in {root} (it holds no {DATABASE_FILE}); pass --session-dir the "
            "folder your runs were stored in",
        )
    store = open_store(root)
    try:
        record = resolve_session(store, session, last, workspace)
        report = load_report(store, record.id)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    finally:
        store.close()
    page = render_html(report)
    target = _target(output, record.id)
    _write(target, page)
    size = target.stat().st_size
    typer.echo(printable(f"wrote {target} ({_size(size)}, {len(report.steps):,} steps)"))
    if open_page:
        import webbrowser

        if not webbrowser.open(target.resolve().as_uri()):
            typer.echo(printable(f"no web browser found; open {target} yourself"), err=True)


def _target(output: Path | None, session_id: str) -> Path:
    name = f"journeyman-{session_id}.html"
    if output is None:
        return Path(name)
    if output.is_dir():
        return output / name
    return output


def _write(target: Path, page: str) -> None:
    """Write `page` whole or not at all (a temporary file renamed over the target)."""
    folder = target.parent if str(target.parent) else Path(".")
    try:
        if target.exists() and not target.is_file():
            raise IsADirectoryError(21, "not a regular file")
        fd, temporary = tempfile.mkstemp(prefix=".journeyman-inspect-", dir=folder)
    except OSError as error:
        fail(EXIT_CONFIG, _cannot_write(target, error))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(page)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        fail(EXIT_CONFIG, _cannot_write(target, error))


def _cannot_write(target: Path, error: OSError) -> str:
    reason = error.strerror or str(error)
    return (
        f"cannot write the report to {target} ({reason}); pass -o a file in a folder you can "
        "write to"
    )


def _size(size: int) -> str:
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KiB"
    return f"{size / 1024 / 1024:.1f} MiB"
