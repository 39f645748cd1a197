"""`journeyman undo` and `journeyman diff`: the file changes a session made."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from journeyman.cli.exits import (
    EXIT_CONFIG,
    EXIT_FAILED,
    fail,
)
from journeyman.cli.options import (
    SessionDirOpt,
    WorkspaceOpt,
)
from journeyman.cli.sessions_cmd import (
    open_store,
    resolve_session,
)
from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError, ToolError
from journeyman.session.undo import FileChangeTracker, UndoResult
from journeyman.session.workspace_lock import WorkspaceLock


def undo(
    turn: Annotated[
        bool, typer.Option("--turn", help="Undo every change of the last step.")
    ] = False,
    file: Annotated[
        str | None, typer.Option("--file", help="Undo the last change to this file.")
    ] = None,
    all_changes: Annotated[
        bool, typer.Option("--all", help="Undo every pending change of the session.")
    ] = False,
    force: Annotated[
        bool, typer.Option(help="Undo even files that were modified since the agent wrote them.")
    ] = False,
    session: Annotated[
        str | None, typer.Option(help="Session id (default: the latest of this workspace).")
    ] = None,
    workspace: WorkspaceOpt = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Undo the agent's most recent file change (or a step's, a file's, or all of them)."""
    if sum([turn, file is not None, all_changes]) > 1:
        fail(EXIT_CONFIG, "choose at most one of --turn, --file and --all")
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, session is None, workspace)
        # a run still writing there would have its next edits reverted under it
        lock = WorkspaceLock(Path(record.workspace), purpose="undo", session_id=record.id)
        lock.acquire()
        tracker = FileChangeTracker(store, record.id, Path(record.workspace))
        if turn:
            result = tracker.undo_turn(force=force)
        elif file is not None:
            result = tracker.undo_file(file, force=force)
        elif all_changes:
            result = tracker.undo_all(force=force)
        else:
            result = tracker.undo_last(force=force)
    except (ConfigurationError, ToolError) as error:  # ToolError: a path outside the workspace
        fail(EXIT_CONFIG, error.message)
    finally:
        store.close()
    _report_undo(result)


def _report_undo(result: UndoResult) -> None:
    if result.nothing_to_undo:
        typer.echo("nothing to undo")
        return
    for change in result.undone:
        action = {"created": "deleted", "deleted": "restored", "modified": "reverted"}[change.kind]
        typer.echo(f"{action} {change.path} (step {change.step}, {change.tool})")
    if result.conflicts:
        conflict = result.conflicts[0]
        sys.stderr.write(
            f"journeyman: {conflict.change.path} changed on disk after the agent wrote it; "
            "not undone (use --force to undo anyway). Changes since the agent's write:\n"
        )
        sys.stderr.write(conflict.diff)
        raise typer.Exit(EXIT_FAILED)


def diff(
    session: Annotated[
        str | None, typer.Option(help="Session id (default: the latest of this workspace).")
    ] = None,
    workspace: WorkspaceOpt = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Unified diff of the session's file changes that have not been undone."""
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, session is None, workspace)
        text = FileChangeTracker(store, record.id, Path(record.workspace)).diff()
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    finally:
        store.close()
    if not text:  # said on stderr: the diff itself (stdout) stays empty for scripts
        sys.stderr.write(f"journeyman: no pending changes in session {record.id}\n")
    # a patch piped to a file or `git apply` stays byte for byte; on a terminal, file contents
    # written by the agent must not be able to drive it
    sys.stdout.write(printable(text) if sys.stdout.isatty() else text)
