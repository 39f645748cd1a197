"""Forking a session at step K: its first K steps of history, and the files as they were."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message
from journeyman.session.store import FileChange, SessionStore, short_id
from journeyman.session.undo import UndoConflict, check_conflict, read_text_or_none
from journeyman.tools.context import ToolContext
from journeyman.tools.fileio import write_text


@dataclass(frozen=True)
class ForkPlan:
    parent_id: str
    at_step: int
    history: list[Message]
    workspace: Path
    reverted_files: int


def prepare_fork(
    store: SessionStore,
    session_id: str,
    at_step: int,
    *,
    into: Path | None = None,
    in_place: bool = False,
    force: bool = False,
    source: Path | None = None,
) -> ForkPlan:
    """Copy the session's workspace to `into` (or work in place) and roll back every file change
    made after step `at_step`, newest first; return the history to continue from.

    In place, a file edited on disk after the agent's change is not overwritten: the fork is
    refused, naming the files, unless `force` (undo's conflict check). An imported session has
    no file history, so only a fork at its last step is possible; its files are taken from
    `source` (the folder the user named), not from the workspace it records.
    """
    record = store.load_session(session_id)
    steps = store.summary(session_id).steps
    if not 0 <= at_step <= steps:
        raise ConfigurationError(f"--at-step must be between 0 and {steps} for {session_id}")
    imported_from = record.settings.get("imported_from")
    if imported_from and at_step < steps:
        raise ConfigurationError(
            f"session {session_id} was imported from {imported_from} and has no file history: "
            f"a fork at step {at_step} cannot give the files as they were then. Fork at its last "
            f"step (--at-step {steps}) to continue from the files as they are now."
        )
    source = Path(record.workspace) if source is None else source
    if not source.is_dir():
        raise ConfigurationError(
            f"the workspace of session {session_id}, {printable(str(source))}, is not a folder "
            "here"
        )
    if not source.resolve().name:  # "/": neither copied nor rolled back, whatever a file said
        raise ConfigurationError(
            f"the workspace of session {session_id} is the filesystem root {source}; a fork "
            "copies or rolls back a project folder, never the whole filesystem (import the "
            "session again with --workspace naming the project's folder)"
        )
    later = [c for c in store.file_changes(session_id) if c.step > at_step and not c.undone]
    if in_place:
        target = source
        _refuse_conflicts(ToolContext(source), later, force)
    else:
        if into is None:
            into = source.with_name(f"{source.name}-fork-{short_id(session_id)}-{at_step}")
        if into.resolve().is_relative_to(source.resolve()):
            raise ConfigurationError(
                f"fork target {into} is inside the workspace {source}, which would be copied "
                "into itself; choose a folder outside it"
            )
        if into.exists() and not into.is_dir():
            raise ConfigurationError(f"fork target {into} exists and is not a folder")
        if into.exists() and any(into.iterdir()):
            raise ConfigurationError(f"fork target {into} exists and is not empty")
        shutil.copytree(source, into, symlinks=True, dirs_exist_ok=True)
        target = into
    ctx = ToolContext(target)
    for change in reversed(later):
        path = ctx.resolve(change.path, tool="fork")
        if read_text_or_none(path) == change.before:
            continue
        if change.before is None:
            path.unlink(missing_ok=True)
        else:
            write_text(path, change.before)
    return ForkPlan(
        parent_id=session_id,
        at_step=at_step,
        history=store.messages(session_id, up_to_step=at_step),
        workspace=target,
        reverted_files=len(later),
    )


def _refuse_conflicts(ctx: ToolContext, later: list[FileChange], force: bool) -> None:
    """Walk the roll-back newest first, as undo would, without writing; raise when a file was
    edited after the agent's change (unless `force`)."""
    state: dict[str, str | None] = {}
    conflicts: list[UndoConflict] = []
    for change in reversed(later):
        if change.path not in state:
            state[change.path] = read_text_or_none(ctx.resolve(change.path, tool="fork"))
        conflict = check_conflict(change, state[change.path], force=force)
        if conflict is not None:
            if all(c.change.path != change.path for c in conflicts):
                conflicts.append(conflict)
            continue
        state[change.path] = change.before
    if conflicts:
        names = ", ".join(c.change.path for c in conflicts)
        raise ConfigurationError(
            f"fork --in-place would overwrite changes made after the agent's: {names}; nothing "
            "was rolled back. Pass --force to roll back anyway, or fork into a copy (--into).\n"
            + "".join(c.diff for c in conflicts)
        )
