"""The rendered memory: titled sections with survival priorities for the context pack."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MemorySection:
    """One titled part of the rendered memory."""

    title: str
    body: str
    priority: int
    """Higher survives longer when a context pack is cut; see the `PRIORITY_*` constants."""

    def render(self) -> str:
        return f"## {self.title}\n{self.body}"


PRIORITY_EARLIER = 0
"""Digests and the summary of old work: the first memory a context pack gives up."""
PRIORITY_TOOL_RESULTS = 1
PRIORITY_ACTIVITY = 2
PRIORITY_FILES = 3
PRIORITY_CONTEXT = 4
PRIORITY_PLAN = 5
PRIORITY_TASK = 6
PRIORITY_STATE = 7
PRIORITY_GUIDANCE = 8
OLD_MEMORY_BELOW = PRIORITY_FILES
"""Sections with a lower priority hold older history ("old memory" for the context pack)."""


@dataclass(frozen=True, slots=True)
class MemorySummary:
    """The rendered memory: its sections in reading order, and their text."""

    sections: tuple[MemorySection, ...]

    @property
    def text(self) -> str:
        return "\n\n".join(section.render() for section in self.sections)

    def __str__(self) -> str:
        return self.text
