"""What a tool can see of the run: the workspace root (with path confinement) and ids."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.core.errors import ToolError
from journeyman.core.text import noted_cut

MAX_ECHO_CHARS = 200
"""Most characters of a model-supplied argument a tool repeats back in its reply."""
MAX_PATH_CHARS = 4096
"""Longest path a tool accepts (PATH_MAX on Linux)."""


def echo(text: str, most: int = MAX_ECHO_CHARS) -> str:
    """`text` quoted for a reply, cut after `most` characters so that a huge argument is not
    sent back to the model."""
    if len(text) <= most:
        return repr(text)
    return noted_cut(repr(text[:most]), f"{len(text):,} characters")


def printable(name: str) -> str:
    """A file name as valid UTF-8 text: bytes that are not UTF-8 (kept by `os.fsdecode` as lone
    surrogates) are shown as backslash escapes, e.g. `bad\\xff.txt`."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return name


class PathOutsideWorkspaceError(ToolError):
    """A path resolved to somewhere outside the workspace root."""


@dataclass(frozen=True)
class FileChangeIntent:
    """A file write a tool is about to make, reported before the bytes hit the disk."""

    path: str
    """Workspace-relative path."""
    before: str | None
    """Content before the change; None when the file is being created."""
    after: str | None
    """Content after the change; None when the file is being deleted."""
    tool: str


GENERATED_DIRS = (
    "node_modules/",
    ".venv/",
    "__pycache__/",
    ".tox/",
    ".nox/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".hypothesis/",
)
"""Gitignore-style patterns of folders that tools fill, not people (dependencies, virtualenvs,
caches): left out of the workspace index and of command snapshots even when no .gitignore
names them."""


def tool_session_id(run_session_id: str) -> str:
    """The session id tools see for the run `run_session_id`: stable across resumes, and never
    the run's own id (the seed keeps the two apart, so that a tool keying its own state on it
    holds no handle on the session store)."""
    return f"{run_session_id}.tools" if run_session_id else ""


@dataclass
class LeftOut:
    """What one listing or search left out because a read rule covers it.

    Call it with a workspace-relative path: True means leave the path out (it is counted).
    """

    check: Callable[[str], str | None] | None
    """The context's `unreadable`."""
    paths: dict[str, set[str]] = field(default_factory=dict)
    """Rule text -> the paths it kept out."""

    def __call__(self, rel: str) -> bool:
        rule = self.check(rel) if self.check is not None else None
        if rule is None:
            return False
        self.paths.setdefault(rule, set()).add(rel)
        return True

    def note(self) -> str:
        """A line for the tool's reply saying what was left out, or "" when nothing was."""
        if not self.paths:
            return ""
        parts = [
            f"{len(paths)} path{'s' if len(paths) != 1 else ''} the deny rule `{rule}` covers"
            for rule, paths in self.paths.items()
        ]
        return f"[left out {'; '.join(parts)}: the user does not let you read them]"


@dataclass
class ToolContext:
    workspace: Path
    session_id: str = ""
    """The id tools see (`tool_session_id` of the run): key a tool's own state on it."""
    run_session_id: str = ""
    """The run's id in the session store, as the loop, hooks and storage use it; the harness's
    own tools (the command journal, spawn_agent) key on it."""
    iteration: int = 0
    call_id: str = ""
    """The id of the call being run (set per call by `ToolRegistry.execute`)."""
    env_passthrough: tuple[str, ...] = ()
    """Environment variables passed to commands even though they look secret."""
    extra: dict[str, object] = field(default_factory=dict)
    journal: Callable[[FileChangeIntent], None] | None = None
    """Called before every file write so a crash between write and step end loses nothing."""
    offered: frozenset[str] | None = None
    """The names of the tools the run offers the model; None when not known (then a message
    may suggest any built-in tool)."""

    unreadable: Callable[[str], str | None] | None = None
    """The user's rule that keeps a workspace-relative path from the model, or None (set from
    the permission policy): listing and search tools leave such paths out of what they show."""

    def offers(self, tool: str) -> bool:
        """Whether a message may suggest `tool` to the model: it is offered, or who knows."""
        return self.offered is None or tool in self.offered

    def __post_init__(self) -> None:
        self.workspace = Path(os.path.realpath(self.workspace))

    def resolve(self, path: str, *, tool: str = "tool") -> Path:
        """Resolve a model-supplied path inside the workspace, following symlinks.

        Relative paths are taken from the workspace root. `..` segments, absolute paths outside
        the root and symlinks (of the file or of any parent) that lead outside are refused.
        """
        if not path or "\x00" in path:
            raise ToolError(f"{tool}: empty or invalid path {echo(path)}")
        if len(path) > MAX_PATH_CHARS:
            raise ToolError(
                f"{tool}: path {echo(path)} is longer than {MAX_PATH_CHARS} characters; pass "
                "the file's real path"
            )
        raw = Path(path)
        if any(part == ".." for part in raw.parts):
            raise PathOutsideWorkspaceError(
                f"{tool}: path {echo(path)} contains '..'; use a path inside the workspace"
            )
        candidate = raw if raw.is_absolute() else self.workspace / raw
        resolved = Path(os.path.realpath(candidate))
        if resolved != self.workspace and self.workspace not in resolved.parents:
            how = "leads (through a symlink) outside" if not raw.is_absolute() else "is outside"
            raise PathOutsideWorkspaceError(
                f"{tool}: path {echo(path)} {how} the workspace {self.workspace}"
            )
        return resolved

    def relative(self, path: Path) -> str:
        """Workspace-relative display form of a resolved path."""
        try:
            return printable(path.relative_to(self.workspace).as_posix() or ".")
        except ValueError:
            return printable(str(path))

    def left_out(self) -> LeftOut:
        """A fresh filter for one listing or search, going by `unreadable`."""
        return LeftOut(self.unreadable)

    def record_change(self, path: str, before: str | None, after: str | None, tool: str) -> None:
        """Report an imminent write to the journal, if the run keeps one."""
        if self.journal is not None:
            self.journal(FileChangeIntent(path, before, after, tool))
