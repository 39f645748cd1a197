"""Rules: instruction files from the project and the user, injected into the system prompt.

Where rules come from, lowest priority first (the order they appear in the prompt):

1. ``<workspace>/.agent/rules.md`` (legacy): the old project location, a fallback.
2. ``~/.journeyman/rules.md`` (user): where personal rules used to live; still read, with a
   warning saying to move the file into the user's config folder.
3. ``<user config folder>/rules.md`` (user): personal habits that apply to every project, in
   the one folder of the user's settings (``~/.config/journeyman/`` on Linux; see
   `core.user_folder`).
4. ``<workspace>/CLAUDE.md`` (project): another agent's file, read for compatibility.
5. ``<workspace>/AGENTS.md`` (project): the convention shared by coding agents.
6. ``<workspace>/.journeyman/rules.md`` (project): this agent's own project rules, highest.

Highest priority comes last: when two files disagree, the model reads the more specific
instruction after the general one, and models tend to follow the later of two conflicting
instructions. Project files outrank the user file because they describe the repository at
hand; the user file outranks the legacy location, as in the seed.

Behaviour: nothing is read until `.text` or `.sources` is first used; empty (or whitespace-only)
files are skipped; a file that cannot be read is skipped and logged, never raised. A project
file is read only if it is a regular file inside the workspace (a link to elsewhere, a FIFO or
a device is skipped), and no rules file over `MAX_RULES_BYTES` is read: each skipped file is
listed in `warnings` with the reason (see `tools.host_read`). Bytes are
decoded as UTF-8 with replacement characters; the same file reached twice (``CLAUDE.md`` as a
symlink to ``AGENTS.md``, or a workspace that is the home directory) is read once, at its
highest priority.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from journeyman.core.pins import PinCheck, content_digest, refusal
from journeyman.core.user_folder import user_config_folder
from journeyman.tools.host_read import RefusedFile, read_host_file

log = logging.getLogger(__name__)

SEPARATOR = "\n\n---\n\n"
"""Placed between the contents of two rules files."""
MAX_RULES_BYTES = 256 * 1024
"""A rules file larger than this is skipped (with a warning)."""


class RuleScope(StrEnum):
    PROJECT = "project"
    USER = "user"
    LEGACY = "legacy"


class RuleStatus(StrEnum):
    LOADED = "loaded"
    EMPTY = "empty"
    ERROR = "error"
    MISSING = "missing"
    DUPLICATE = "duplicate"
    """The same file as one with a higher priority (a symlink, or the workspace is home)."""
    SKIPPED = "skipped"
    """Not read: a link out of the workspace, not a regular file, or too large."""


class RuleBase(StrEnum):
    WORKSPACE = "workspace"
    HOME = "home"
    """The home folder: only the retired place of the user's rules."""
    CONFIG = "config"
    """The user's config folder."""


@dataclass(frozen=True)
class RuleFile:
    """Where to look for one rules file."""

    relative_path: str
    base: RuleBase
    scope: RuleScope


DEFAULT_RULE_FILES: tuple[RuleFile, ...] = (
    RuleFile(".agent/rules.md", RuleBase.WORKSPACE, RuleScope.LEGACY),
    RuleFile(".journeyman/rules.md", RuleBase.HOME, RuleScope.USER),
    RuleFile("rules.md", RuleBase.CONFIG, RuleScope.USER),
    RuleFile("CLAUDE.md", RuleBase.WORKSPACE, RuleScope.PROJECT),
    RuleFile("AGENTS.md", RuleBase.WORKSPACE, RuleScope.PROJECT),
    RuleFile(".journeyman/rules.md", RuleBase.WORKSPACE, RuleScope.PROJECT),
)
"""Lowest priority first; the last entry wins a conflict."""


@dataclass(frozen=True)
class RuleSource:
    """What happened to one candidate rules file."""

    path: Path
    scope: RuleScope
    priority: int
    """1 is the lowest; sources are listed, and rendered, in ascending priority."""
    status: RuleStatus
    size: int = 0
    """Bytes on disk (0 when missing, unreadable or a duplicate)."""
    display: str = ""
    """Short form for prompts and listings: workspace-relative, or ``~/...`` for the user's."""
    error: str | None = None
    """Why the file could not be read, when `status` is ERROR."""
    content: str = ""
    """Decoded text without surrounding blank space, when `status` is LOADED."""
    raw: bytes = field(default=b"", repr=False)
    """The bytes read (what `journeyman trust` approves by hash)."""
    move_to: str = ""
    """Where the file belongs now, when it was read from a retired place (shown as ``~/...``)."""


class RulesLoader:
    """Finds and reads the rules files of one workspace, once, on first access."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        home: str | os.PathLike[str] | None = None,
        *,
        user_folder: str | os.PathLike[str] | None = None,
        files: Sequence[RuleFile] = DEFAULT_RULE_FILES,
    ) -> None:
        """`home` holds the retired ``.journeyman/rules.md`` (default: the home folder);
        `user_folder` is the user's config folder (default: `user_config_folder()`)."""
        self._workspace = Path(workspace)
        self._pins = PinCheck(self._workspace)
        self._home = Path(home) if home is not None else None
        self._user_folder = Path(user_folder) if user_folder is not None else None
        self._files = tuple(files)
        self._sources: list[RuleSource] | None = None

    @property
    def sources(self) -> list[RuleSource]:
        """Every candidate file with its status, lowest priority first (loads on first use)."""
        if self._sources is None:
            self._sources = self._load()
        return list(self._sources)

    @property
    def loaded(self) -> list[RuleSource]:
        """Only the sources whose text is used, lowest priority first."""
        return [s for s in self.sources if s.status is RuleStatus.LOADED]

    @property
    def text(self) -> str:
        """The loaded files' contents joined by `SEPARATOR`; empty when there are none."""
        return SEPARATOR.join(s.content for s in self.loaded)

    @property
    def warnings(self) -> list[str]:
        """One line per rules file that was skipped or could not be read, naming it and why."""
        lines = []
        for s in self.sources:
            if s.status in (RuleStatus.SKIPPED, RuleStatus.ERROR) and s.error:
                lines.append(f"rules file {s.display or s.path} skipped: {s.error}")
            elif s.move_to and s.status is RuleStatus.LOADED:
                lines.append(
                    f"your rules file {s.display} is read from its old place; move it to "
                    f"{s.move_to} (the old place will stop being read in a later release)"
                )
        return lines

    def reload(self) -> None:
        """Forget what was read; the next access reads the files again."""
        self._sources = None

    def _load(self) -> list[RuleSource]:
        home = self._home if self._home is not None else Path.home()
        bases = {
            RuleBase.HOME: home,
            RuleBase.CONFIG: self._user_folder or user_config_folder(),
            RuleBase.WORKSPACE: self._workspace,
        }
        candidates = [
            (priority, spec, bases[spec.base]) for priority, spec in enumerate(self._files, start=1)
        ]
        # The same file may be reachable twice; keep it at its highest priority only.
        owner: dict[str, int] = {}
        for priority, spec, base in candidates:
            owner[os.path.realpath(base / spec.relative_path)] = priority
        sources = []
        for priority, spec, base in candidates:
            path = base / spec.relative_path
            display = _display(base / spec.relative_path, spec)
            inside = [self._workspace] if spec.base is RuleBase.WORKSPACE else None
            if owner[os.path.realpath(path)] != priority and _allowed(path, inside):
                status = RuleStatus.DUPLICATE if path.exists() else RuleStatus.MISSING
                sources.append(RuleSource(path, spec.scope, priority, status, display=display))
                continue
            source = _read(path, spec.scope, priority, display, inside)
            if spec.base is RuleBase.WORKSPACE and source.status is RuleStatus.LOADED:
                source = self._pinned(source)
            if spec.base is RuleBase.HOME:
                new_place = _display(bases[RuleBase.CONFIG] / "rules.md", spec)
                source = replace(source, move_to=new_place)
            sources.append(source)
        return sources

    def _pinned(self, source: RuleSource) -> RuleSource:
        """`source` unless the workspace is pinned and this file is not as approved."""
        verdict = self._pins.verdict(rules_item(source.display), content_digest(source.raw))
        if verdict.usable:
            return source
        return replace(source, status=RuleStatus.SKIPPED, error=refusal(verdict), content="")


def _allowed(path: Path, inside: list[Path] | None) -> bool:
    """Whether `path` resolves inside `inside` (always, when None): only then may it count as
    a duplicate of another rules file instead of being reported as skipped."""
    if inside is None:
        return True
    resolved = Path(os.path.realpath(path))
    return any(resolved.is_relative_to(os.path.realpath(root)) for root in inside)


def _display(path: Path, spec: RuleFile) -> str:
    """Workspace files by their relative path; the user's as ``~/...`` when under the home
    folder, else in full."""
    if spec.base is RuleBase.WORKSPACE:
        return spec.relative_path
    home = Path.home()
    return f"~/{path.relative_to(home).as_posix()}" if path.is_relative_to(home) else str(path)


def _read(
    path: Path, scope: RuleScope, priority: int, display: str, inside: list[Path] | None
) -> RuleSource:
    try:
        raw = read_host_file(path, limit=MAX_RULES_BYTES, inside=inside)
    except FileNotFoundError:
        return RuleSource(path, scope, priority, RuleStatus.MISSING, display=display)
    except RefusedFile as refused:
        log.info("rules file %s skipped: %s", path, refused.reason)  # `warnings` tells the user
        return RuleSource(
            path, scope, priority, RuleStatus.SKIPPED, display=display, error=refused.reason
        )
    except OSError as exc:
        reason = f"{type(exc).__name__}: {exc.strerror or exc}"
        log.warning("rules file %s skipped: could not be read (%s)", path, reason)
        return RuleSource(path, scope, priority, RuleStatus.ERROR, display=display, error=reason)
    content = raw.decode("utf-8", errors="replace").strip()
    status = RuleStatus.LOADED if content else RuleStatus.EMPTY
    return RuleSource(path, scope, priority, status, len(raw), display, content=content, raw=raw)


def rules_item(display: str) -> str:
    """A workspace rules file's name among the content `journeyman trust` approves."""
    return f"rules {display}"


RULES_HEADING = "# Rules and instructions for this project"

RULES_INTRO = (
    "The files below were written by the people you work for. Follow them unless the task "
    "says otherwise. They are listed from the most general to the most specific; where two "
    "disagree, the later one wins."
)


def render_rules_section(rules: RulesLoader | Sequence[RuleSource]) -> str:
    """The system prompt section for the loaded rules, or "" when no rules file has text.

    Each file's text is preceded by a line naming it, and files are joined with `SEPARATOR`.
    The output depends only on the files' contents, so the prompt prefix stays cacheable.
    """
    sources = rules.sources if isinstance(rules, RulesLoader) else list(rules)
    blocks = [
        f"From {s.display or s.path} ({s.scope.value}):\n\n{s.content}"
        for s in sources
        if s.status is RuleStatus.LOADED
    ]
    if not blocks:
        return ""
    return f"{RULES_HEADING}\n\n{RULES_INTRO}\n\n{SEPARATOR.join(blocks)}"


def describe_sources(sources: Sequence[RuleSource]) -> list[str]:
    """One line per candidate file for `journeyman rules`: priority, status, scope, size, path."""
    lines = []
    for s in reversed(sources):  # highest priority first reads naturally in a listing
        detail = (
            f"{s.size} byte{'' if s.size == 1 else 's'}"
            if s.status in (RuleStatus.LOADED, RuleStatus.EMPTY)
            else ""
        )
        if s.error:
            detail = s.error
        lines.append(
            f"{s.priority}  {s.status.value:<9}  {s.scope.value:<7}  {s.path}"
            + (f"  ({detail})" if detail else "")
        )
    return lines
