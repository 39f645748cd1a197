"""Undo and diff of the agent's file changes, from the journal in the session store.

Each change holds the file's full content before and after. Undoing a created file deletes
it, a deleted file is written back, a modified file gets its old content. Each change is undone
at most once, and a change whose file was modified on disk after the agent wrote it is refused
unless forced, with the difference shown — that edit is somebody else's work.
"""

from __future__ import annotations

import difflib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.core.errors import ToolError
from journeyman.session.store import FileChange, SessionStore
from journeyman.tools.context import ToolContext
from journeyman.tools.fileio import write_text

DEFAULT_HISTORY = 100


@dataclass(frozen=True)
class UndoConflict:
    change: FileChange
    diff: str
    """What changed on disk since the agent's write (agent's version -> current file)."""


@dataclass
class UndoResult:
    undone: list[FileChange] = field(default_factory=list)
    conflicts: list[UndoConflict] = field(default_factory=list)
    nothing_to_undo: bool = False


class FileChangeTracker:
    """The undo history of one session: the last `max_history` changes, kept in the store."""

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        workspace: Path,
        max_history: int = DEFAULT_HISTORY,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.ctx = ToolContext(workspace)
        self.max_history = max_history

    @property
    def history(self) -> list[FileChange]:
        """The most recent `max_history` changes, undone or not (for display)."""
        return self.store.file_changes(self.session_id)[-self.max_history :]

    def pending(self) -> list[FileChange]:
        """Every change not undone yet, however old: the store keeps them all, so undo and diff
        are not limited to the last `max_history`."""
        return self.store.file_changes(self.session_id, pending_only=True)

    # --- undo -----------------------------------------------------------------------------

    def undo_last(self, *, force: bool = False) -> UndoResult:
        pending = self.pending()
        return self._undo(pending[-1:], force)

    def undo_turn(self, step: int | None = None, *, force: bool = False) -> UndoResult:
        """All pending changes of one step (the latest step with changes by default)."""
        pending = self.pending()
        if step is None and pending:
            step = pending[-1].step
        return self._undo([c for c in pending if c.step == step], force)

    def undo_file(self, path: str, *, force: bool = False) -> UndoResult:
        """The most recent pending change to `path`."""
        rel = self.ctx.relative(self.ctx.resolve(path, tool="undo"))
        matching = [c for c in self.pending() if c.path == rel]
        return self._undo(matching[-1:], force)

    def undo_all(self, *, force: bool = False) -> UndoResult:
        return self._undo(self.pending(), force)

    def _undo(self, changes: list[FileChange], force: bool) -> UndoResult:
        result = UndoResult(nothing_to_undo=not changes)
        for change in reversed(changes):  # newest first, so each file walks back in order
            path = self.ctx.resolve(change.path, tool="undo")
            current = read_text_or_none(path)
            conflict = check_conflict(change, current, force=force)
            if conflict is not None:
                result.conflicts.append(conflict)
                break  # older changes to the same file build on this one
            if current != change.before:
                if change.before is None:
                    path.unlink(missing_ok=True)
                else:
                    write_text(path, change.before)
            self.store.mark_undone(change.id)
            result.undone.append(change)
        return result

    # --- diff -----------------------------------------------------------------------------

    def diff(self) -> str:
        """Unified diff of every pending change, per file from its first before to its last
        after."""
        spans: OrderedDict[str, tuple[str | None, str | None]] = OrderedDict()
        for change in self.pending():
            first = spans[change.path][0] if change.path in spans else change.before
            spans[change.path] = (first, change.after)
        return "".join(_diff(path, before, after) for path, (before, after) in spans.items())


def check_conflict(
    change: FileChange, current: str | None, *, force: bool = False
) -> UndoConflict | None:
    """Why `change` must not be rolled back while its file holds `current`, or None.

    The file changed on disk since the agent wrote it (somebody else's work; `force` overrides),
    or only a redacted copy of the old text is left (restoring it would lose data; never forced).
    """
    edited = current != change.after and current != change.before
    if change.unrecoverable or (edited and not force):
        return UndoConflict(change, _diff(change.path, change.after, current))
    return None


def read_text_or_none(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (UnicodeDecodeError, IsADirectoryError) as error:
        raise ToolError(f"undo: {path} is no longer a text file ({error})") from None


def _diff(path: str, before: str | None, after: str | None) -> str:
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"a/{path}",
        tofile="/dev/null" if after is None else f"b/{path}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
