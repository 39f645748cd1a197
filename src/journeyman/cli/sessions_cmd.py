"""`journeyman sessions list|show|export|delete|import`, and session lookup for other commands."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from journeyman.core.errors import ConfigurationError
from journeyman.loop.kernel import new_session_id
from journeyman.session.store import SessionRecord, SessionStore, default_session_root
from journeyman.session.trajectory import export_jsonl, import_file

sessions_app = typer.Typer(
    help="List, inspect, export, import and delete sessions.", no_args_is_help=True
)

SessionDirOpt = Annotated[
    Path | None,
    typer.Option(help="Session root (default: the per-user data dir or JOURNEYMAN_SESSION_DIR)."),
]


def _fail(message: str, code: int = 2) -> NoReturn:
    sys.stderr.write(f"journeyman: {message}\n")
    raise typer.Exit(code)


def open_store(session_dir: Path | None) -> SessionStore:
    try:
        return SessionStore(session_dir or default_session_root(), check_integrity=True)
    except ConfigurationError as error:
        _fail(error.message)


def resolve_session(
    store: SessionStore, session: str | None, last: bool, workspace: Path | None
) -> SessionRecord:
    """The session named by id/prefix, or with `last` the newest one of the workspace."""
    try:
        if session:
            return store.load_session(store.resolve_id(session))
        if last:
            where = str((workspace or Path(".")).resolve())
            record = store.latest_session(where)
            if record is None:
                _fail(f"no session for workspace {where} in {store.path}")
            return record
    except ConfigurationError as error:
        _fail(error.message)
    _fail("name a session id, or pass --last for the latest session of this workspace")


@sessions_app.command("list")
def list_sessions(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", "-w", help="Only sessions of this workspace.")
    ] = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Every stored session, oldest first."""
    store = open_store(session_dir)
    try:
        rows = store.list_sessions(str(workspace.resolve()) if workspace else None)
    finally:
        store.close()
    table = Table("id", "created", "steps", "status", "model", "workspace", "task")
    for row in rows:
        rec = row.record
        table.add_row(
            rec.id,
            time.strftime("%Y-%m-%d %H:%M", time.localtime(rec.created_at)),
            str(row.steps),
            row.finish_reason or "unfinished",
            str(rec.settings.get("model", "?")),
            escape(rec.workspace),
            escape(rec.task if len(rec.task) < 50 else rec.task[:49] + "…"),
        )
    Console().print(table)


@sessions_app.command("show")
def show(
    session: Annotated[str, typer.Argument(help="Session id or prefix.")],
    session_dir: SessionDirOpt = None,
) -> None:
    """A session's settings, outcome, messages and file changes."""
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
        summary = store.summary(record.id)
        messages = store.messages(record.id)
        changes = store.file_changes(record.id)
    finally:
        store.close()
    out = Console(highlight=False)
    out.print(
        f"[bold]session {record.id}[/]"
        + (
            f"  (forked from {record.parent_id} at step {record.forked_at_step})"
            if record.parent_id
            else ""
        )
    )
    out.print(f"workspace {escape(record.workspace)}")
    out.print(f"model {record.settings.get('provider')}:{record.settings.get('model')}")
    out.print(
        f"steps {summary.steps}, status {summary.finish_reason or 'unfinished'}"
        + (f" — {escape(summary.error)}" if summary.error else "")
    )
    out.print(f"task: {escape(record.task)}")
    for message in messages:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        text = message.content.strip().replace("\n", " ")
        shown = text if len(text) < 160 else text[:159] + "…"
        out.print(
            f"[dim]{message.role.value:>9}[/] {escape(shown)}"
            + (f" [bold]→ {escape(calls)}[/]" if calls else "")
        )
    for change in changes:
        state = "undone" if change.undone else "pending"
        out.print(
            f"[dim]change[/] step {change.step} {change.kind} {escape(change.path)} "
            f"({change.tool}, {state})"
        )


@sessions_app.command("export")
def export(
    session: Annotated[str, typer.Argument(help="Session id or prefix.")],
    format: Annotated[str, typer.Option("--format", help="Export format (jsonl).")] = "jsonl",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File (default stdout).")
    ] = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Write a session as JSON lines: a header, then every message and event."""
    if format != "jsonl":
        _fail(f"unknown export format {format!r}; only jsonl is supported")
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
        if output is None:
            export_jsonl(store, record.id, sys.stdout)
        else:
            with output.open("w", encoding="utf-8") as handle:
                count = export_jsonl(store, record.id, handle)
            sys.stderr.write(f"wrote {count} lines to {output}\n")
    finally:
        store.close()


@sessions_app.command("import")
def import_(
    file: Annotated[
        Path,
        typer.Argument(
            help="A journeyman JSONL export or a mini-swe-agent trajectory (.traj.json)."
        ),
    ],
    session_dir: SessionDirOpt = None,
) -> None:
    """Store a session from a file so it can be inspected and forked."""
    if not file.is_file():
        _fail(f"{file} is not a file")
    store = open_store(session_dir)
    try:
        new_id = import_file(store, file, new_session_id())
    except ConfigurationError as error:
        _fail(error.message)
    finally:
        store.close()
    typer.echo(new_id)


@sessions_app.command("delete")
def delete(
    session: Annotated[str, typer.Argument(help="Session id or prefix.")],
    session_dir: SessionDirOpt = None,
) -> None:
    """Remove a session and everything stored for it (files on disk are not touched)."""
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
        store.delete_session(record.id)
    finally:
        store.close()
    typer.echo(f"deleted {record.id}")
