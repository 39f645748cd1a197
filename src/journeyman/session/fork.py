"""Forking a session at step K: its first K steps of history, and the files as they were."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message
from journeyman.session.store import SessionStore
from journeyman.session.undo import read_text_or_none
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
) -> ForkPlan:
    """Copy the session's workspace to `into` (or work in place) and roll back every file change
    made after step `at_step`, newest first; return the history to continue from."""
    record = store.load_session(session_id)
    steps = store.summary(session_id).steps
    if not 0 <= at_step <= steps:
        raise ConfigurationError(f"--at-step must be between 0 and {steps} for {session_id}")
    source = Path(record.workspace)
    if in_place:
        target = source
    else:
        if into is None:
            into = source.with_name(f"{source.name}-fork-{session_id[-8:]}-{at_step}")
        if into.exists() and any(into.iterdir()):
            raise ConfigurationError(f"fork target {into} exists and is not empty")
        shutil.copytree(source, into, symlinks=True, dirs_exist_ok=True)
        target = into
    ctx = ToolContext(target)
    later = [c for c in store.file_changes(session_id) if c.step > at_step and not c.undone]
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
