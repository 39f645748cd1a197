"""The context pack: what the phased mode shows the model about the task at the start of a step.

A `ContextPack` gathers the goal, the project profile, snippets of the files most relevant to
the goal and the latest error, that error, the current diff, the test results, the verification
status and the rendered memory. `to_string(max_size)` renders it within `max_size` characters,
giving things up in a fixed order, least valuable first (each part is cut short only once
everything before it is gone):

1. file snippets, the least relevant file first;
2. old memory (digests of earlier work, old tool results, the activity log);
3. the test results (their tail is kept, where failures are reported), then the diff;
4. the project profile;
5. the rest of the memory, lowest priority first.

The goal, the recent error and the verification status are never cut. Whatever is cut leaves a
visible note starting with `CUT_MARKER`: inline where a part was cut short, and one note at
the end naming the parts left out whole, so the model knows what to fetch again.

`ContextPackBuilder.for_step(state)` assembles one pack per step: asking again during the same
step (DISCOVER then PLAN, say) returns the pack already built, without searching again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from journeyman.context.memory import (
    DEFAULT_FORMATTER,
    OLD_MEMORY_BELOW,
    LastError,
    MemoryFormatter,
    MemorySection,
    PhasedState,
)

CUT_MARKER = "[cut to fit"
"""How every note about something left out of a rendered pack begins."""
MIN_KEPT = 64
"""A part cut to fewer characters than this is left out whole."""


# --- what the builder needs from the workspace ---------------------------------------------


class SnippetLike(Protocol):
    """An excerpt of one file (`context.index.Snippet`)."""

    @property
    def path(self) -> str: ...

    def render(self) -> str: ...


class FileIndex(Protocol):
    """The part of the workspace index the builder uses (`context.index.WorkspaceIndexer`)."""

    def extract_keywords(self, text: str) -> Sequence[str]: ...

    def rank_files(self, goal: str, errors: Sequence[str]) -> Sequence[str]:
        """Files by relevance, best first: those named in an error, then by keyword matches."""
        ...

    def read_snippets(self, paths: Sequence[str], keywords: Sequence[str]) -> Sequence[SnippetLike]:
        """Excerpts of `paths` around the keywords (several per file, in file order)."""
        ...


class ProjectDescription(Protocol):
    """The part of the project profile the builder uses (`context.profile.ProjectProfile`)."""

    def to_text(self) -> str: ...


class PackSettings(BaseModel):
    """How the builder picks the files a pack shows."""

    model_config = ConfigDict(extra="forbid")

    max_files: int = Field(default=8, ge=0)
    """Files whose snippets go into the pack, most relevant first."""
    stderr_chars: int = Field(default=2_000, ge=0)
    """Characters of the error's output shown in the pack (its tail)."""


# --- the pack ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileSnippet:
    path: str
    text: str


@dataclass(frozen=True)
class ContextPack:
    """A snapshot of what the model needs to know at one step."""

    goal: str
    step: int = 0
    project_profile: str = ""
    relevant_files: tuple[FileSnippet, ...] = ()
    """Most relevant first."""
    recent_error: str = ""
    current_diff: str = ""
    test_results: str = ""
    verification_success: bool | None = None
    memory: tuple[MemorySection, ...] = ()

    @property
    def memory_summary(self) -> str:
        return "\n\n".join(section.render() for section in self.memory)

    def to_string(self, max_size: int | None = None) -> str:
        """The pack as text of at most `max_size` characters, cut by priority (see the module
        docstring). Parts cut short end (or, for test results, start) with a note; parts left
        out whole are listed in one note at the end. When the goal, the error and the
        verification status alone are longer than `max_size`, only they and that note remain."""
        layout = _Layout(_parts(self))
        full = layout.render()
        if max_size is None or len(full) <= max_size:
            return full
        for part in layout.cut_order():
            part.kept = 0
            if len(layout.render()) > max_size:
                continue  # removing it whole is not enough: move on to the next
            low, high = 0, len(part.text)  # keep as much of it as still fits
            while low < high:
                middle = (low + high + 1) // 2
                part.kept = middle
                if len(layout.render()) <= max_size:
                    low = middle
                else:
                    high = middle - 1
            # a few characters of something are noise: leave it out whole instead
            part.kept = low if low >= MIN_KEPT else 0
            return layout.render()
        # only the essentials are left; the note goes too if it alone breaks the limit
        if len(layout.render(with_note=False)) <= max_size < len(layout.render()):
            return layout.render(with_note=False)
        return layout.render()

    def essential_text(self) -> str:
        """The parts that are never cut, as `to_string` renders them."""
        layout = _Layout(_parts(self))
        for part in layout.parts:
            if part.rank is not None:
                part.kept = 0
        return layout.render(with_note=False)


# --- rendering within a size -----------------------------------------------------------------

Unit = Literal["file", "memory section", "diff", "test results", "project profile"]


class CutOrder(IntEnum):
    """When each kind of part is given up; lower goes first."""

    SNIPPETS = 0
    OLD_MEMORY = 1
    TEST_RESULTS = 2
    DIFF = 3
    PROFILE = 4
    MEMORY = 5


@dataclass(eq=False)
class _Part:
    section: str
    text: str
    rank: CutOrder | None
    """When it is cut; None: never."""
    unit: Unit | None = None
    label: str = ""
    keep_tail: bool = False
    priority: int = 0
    """A memory section's priority (lower goes first)."""
    kept: int = -1
    """Characters kept; -1: all of them."""

    def render(self) -> str:
        if self.kept < 0 or self.kept >= len(self.text):
            return self.text
        cut = len(self.text) - self.kept
        note = f"{CUT_MARKER}: {cut:,} characters of {self.label or self.unit} left out]"
        if self.keep_tail:
            return f"{note}\n{self.text[len(self.text) - self.kept :]}"
        return f"{self.text[: self.kept]}\n{note}"

    @property
    def removed(self) -> bool:
        return self.kept == 0


SECTION_ORDER = (
    "Goal",
    "Project",
    "Relevant files",
    "Memory",
    "Current diff",
    "Test results",
    "Recent error",
    "Verification",
)
"""Reading order: the parts that change least come first, which keeps prompt prefixes stable."""


def _parts(pack: ContextPack) -> list[_Part]:
    parts = [_Part("Goal", pack.goal.strip(), None)]
    if pack.project_profile.strip():
        parts.append(
            _Part("Project", pack.project_profile.strip(), CutOrder.PROFILE, "project profile")
        )
    for snippet in pack.relevant_files:
        text = f"### {snippet.path}\n{snippet.text.rstrip()}"
        parts.append(_Part("Relevant files", text, CutOrder.SNIPPETS, "file", snippet.path))
    for section in pack.memory:
        old = section.priority < OLD_MEMORY_BELOW
        rank = CutOrder.OLD_MEMORY if old else CutOrder.MEMORY
        parts.append(
            _Part(
                "Memory",
                section.render(),
                rank,
                "memory section",
                section.title,
                priority=section.priority,
            )
        )
    if pack.current_diff.strip():
        parts.append(_Part("Current diff", pack.current_diff.rstrip(), CutOrder.DIFF, "diff"))
    if pack.test_results.strip():
        parts.append(
            _Part(
                "Test results",
                pack.test_results.rstrip(),
                CutOrder.TEST_RESULTS,
                "test results",
                keep_tail=True,
            )
        )
    if pack.recent_error.strip():
        parts.append(_Part("Recent error", pack.recent_error.strip(), None))
    status = {None: "not run yet", True: "passed", False: "failed"}[pack.verification_success]
    parts.append(_Part("Verification", status, None))
    return parts


class _Layout:
    def __init__(self, parts: list[_Part]) -> None:
        self.parts = parts

    def cut_order(self) -> list[_Part]:
        """Cuttable parts, first to go first: by rank; files from the least relevant; memory
        sections from the lowest priority (their order in `pack.memory` breaks ties)."""
        cuttable = [(i, p) for i, p in enumerate(self.parts) if p.rank is not None]

        def key(item: tuple[int, _Part]) -> tuple[int, int, int]:
            i, part = item
            assert part.rank is not None
            if part.unit == "file":
                return (part.rank, 0, -i)
            return (part.rank, part.priority, i)

        return [part for _, part in sorted(cuttable, key=key)]

    def render(self, *, with_note: bool = True) -> str:
        """Sections with what is kept of them; a section with nothing left is not shown, and
        one note at the end lists every part that was left out whole."""
        blocks = []
        for title in SECTION_ORDER:
            kept = [p.render() for p in self.parts if p.section == title and not p.removed]
            if kept:
                blocks.append(f"# {title}\n" + "\n".join(kept))
        removed = [p for p in self.parts if p.removed]
        if removed and with_note:
            blocks.append(_left_out_note(removed))
        return "\n\n".join(blocks)


def _left_out_note(removed: Sequence[_Part]) -> str:
    groups: dict[str, list[str]] = {}
    for part in removed:
        groups.setdefault(part.unit or "part", []).append(part.label)
    phrases = []
    for unit, labels in groups.items():
        if unit in ("file", "memory section"):
            plural = unit + ("s" if len(labels) > 1 else "")
            phrases.append(f"{plural} {', '.join(labels)}")
        else:
            phrases.append(f"the {unit}")
    return f"{CUT_MARKER}: left out {'; '.join(phrases)}]"


# --- assembly --------------------------------------------------------------------------------


def render_error(error: LastError | None, stderr_chars: int = 2_000) -> str:
    if error is None:
        return ""
    lines = [error.summary.strip()]
    if error.repro_command:
        lines.append(f"Reproduce with: {error.repro_command}")
    tail = error.stderr_tail[-stderr_chars:] if stderr_chars else ""
    if tail.strip():
        lines.append(tail.rstrip())
    return "\n".join(lines)


@dataclass
class ContextPackBuilder:
    """Builds the pack for a step, once: `for_step` returns the same pack until the step moves.

    The index ranks the files (those named in the latest error first, then by the keywords of
    the goal and the error) and cuts the snippets around those keywords.
    """

    goal: str
    files: FileIndex | None = None
    profile: ProjectDescription | None = None
    settings: PackSettings = field(default_factory=PackSettings)
    formatter: MemoryFormatter | None = None
    _current: ContextPack | None = field(default=None, init=False, repr=False)

    def for_step(self, state: PhasedState) -> ContextPack:
        """The pack for `state.step`, assembled on the first call of the step only."""
        if self._current is None or self._current.step != state.step:
            self._current = self._assemble(state)
        return self._current

    def _assemble(self, state: PhasedState) -> ContextPack:
        error = render_error(state.last_error, self.settings.stderr_chars)
        return ContextPack(
            goal=self.goal,
            step=state.step,
            project_profile=self.profile.to_text() if self.profile is not None else "",
            relevant_files=self._relevant_files(error),
            recent_error=error,
            current_diff=state.artifacts.current_diff,
            test_results=state.artifacts.test_results,
            verification_success=state.artifacts.verification_success,
            memory=state.memory_summary(self.formatter or DEFAULT_FORMATTER).sections,
        )

    def _relevant_files(self, error: str) -> tuple[FileSnippet, ...]:
        index, limit = self.files, self.settings.max_files
        if index is None or limit == 0:
            return ()
        paths = list(index.rank_files(self.goal, [error] if error else []))[:limit]
        keywords = index.extract_keywords(f"{self.goal}\n{error}")
        excerpts: dict[str, list[str]] = {}
        for snippet in index.read_snippets(paths, keywords):
            excerpts.setdefault(snippet.path, []).append(snippet.render())
        return tuple(FileSnippet(p, "\n".join(excerpts[p])) for p in paths if p in excerpts)
