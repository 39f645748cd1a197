"""The three compression stages: rules, the model's summary, near-duplicates."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeVar

from journeyman.context.compaction import Summariser
from journeyman.context.memory.formatter import DEFAULT_FORMATTER, MemoryFormatter
from journeyman.context.memory.records import LongTerm
from journeyman.context.memory.settings import MemorySettings
from journeyman.context.memory.similarity import drop_near_duplicates
from journeyman.context.memory.state import PhasedState
from journeyman.core.text import clip

T = TypeVar("T")


@dataclass
class CompressionReport:
    size_before: int
    size_after: int
    digested: int = 0
    """Entries the rule stage moved into one-line digests (or dropped, for debug-only ones)."""
    summarised: bool = False
    """Whether the model folded the digests into the summary."""
    duplicates: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.digested or self.summarised or self.duplicates)


def apply_rules(state: PhasedState, settings: MemorySettings) -> int:
    """Stage 1: every category keeps its newest entries; older ones become digests in
    `earlier_work` (oldest first). Returns how many entries were moved or dropped."""
    facts, long_term, debug = state.memory.facts, state.memory.long_term, state.memory.debug
    digests: list[tuple[int, str]] = []

    def split(items: tuple[T, ...], keep: int) -> tuple[tuple[T, ...], tuple[T, ...]]:
        cut = len(items) - keep
        return ((), items) if cut <= 0 else (items[:cut], items[cut:])

    moved = 0
    if len(facts.attempts) > settings.keep_attempts:
        old_attempts, facts.attempts = split(facts.attempts, settings.keep_attempts)
        moved += len(old_attempts)
        digests += [
            (
                a.step,
                f"step {a.step}: {clip(a.action, 120)} -> "
                + ("ok" if a.success else f"failed: {clip(a.outcome, 120)}"),
            )
            for a in old_attempts
        ]
    if len(facts.tool_results) > settings.keep_tool_results:
        old_tools, facts.tool_results = split(facts.tool_results, settings.keep_tool_results)
        moved += len(old_tools)
        digests += [
            (
                r.step,
                f"step {r.step}: {r.tool}({clip(r.arguments, 80)}) "
                + ("failed" if r.is_error else f"ok, {len(r.output):,} characters"),
            )
            for r in old_tools
        ]
    if len(facts.modified_files) > settings.keep_modified_files:
        old_files, facts.modified_files = split(facts.modified_files, settings.keep_modified_files)
        moved += len(old_files)
        digests += [(s.step, f"step {s.step}: modified {s.path}") for s in old_files]
    if len(facts.created_files) > settings.keep_created_files:
        old_created, facts.created_files = split(facts.created_files, settings.keep_created_files)
        moved += len(old_created)
        digests.append((-1, f"created earlier: {', '.join(old_created)}"))
    if len(long_term.decisions) > settings.keep_decisions:
        old_decisions, long_term.decisions = split(long_term.decisions, settings.keep_decisions)
        moved += len(old_decisions)
        digests += [(d.step, f"step {d.step}: decided {d.text}") for d in old_decisions]
    if len(long_term.milestones) > settings.keep_milestones:
        old_milestones, long_term.milestones = split(long_term.milestones, settings.keep_milestones)
        moved += len(old_milestones)
        digests += [(m.step, f"step {m.step}: reached {m.text}") for m in old_milestones]
    if len(long_term.learnings) > settings.keep_learnings:
        old_learnings, long_term.learnings = split(long_term.learnings, settings.keep_learnings)
        moved += len(old_learnings)
        digests += [(-1, f"learned {text}") for text in old_learnings]
    if len(debug.model_responses) > settings.keep_model_responses:
        dropped, debug.model_responses = split(debug.model_responses, settings.keep_model_responses)
        moved += len(dropped)
    if len(debug.decisions) > settings.keep_step_decisions:
        dropped_decisions, debug.decisions = split(debug.decisions, settings.keep_step_decisions)
        moved += len(dropped_decisions)

    if digests:
        digests.sort(key=lambda d: d[0])  # stable: same-step entries keep their category order
        long_term.earlier_work = (*long_term.earlier_work, *(text for _, text in digests))
    return moved


SUMMARY_REQUEST = (
    "Summarise this record of a coding agent's earlier work in a few lines: what was tried, "
    "what failed and why, what was learned. Keep file names and commands exact."
)
"""Put before the digests handed to the summariser."""


async def summarise_earlier(
    state: PhasedState, settings: MemorySettings, summarise: Summariser
) -> bool:
    """Stage 2: once the digests outgrow `summarise_above_chars`, the model folds them and the
    previous summary into a new summary. An empty answer leaves the memory as it was."""
    long_term = state.memory.long_term
    digest_text = "\n".join(long_term.earlier_work)
    if not long_term.earlier_work or len(digest_text) <= settings.summarise_above_chars:
        return False
    previous = (
        f"Summary so far:\n{long_term.earlier_summary}\n\n" if long_term.earlier_summary else ""
    )
    summary = await summarise(f"{SUMMARY_REQUEST}\n\n{previous}Since then:\n{digest_text}")
    if not summary.strip():
        return False
    long_term.earlier_summary = summary.strip()
    long_term.earlier_work = ()
    return True


def remove_duplicates(state: PhasedState, settings: MemorySettings) -> int:
    """Stage 3: near-duplicate decisions, milestones, learnings and digests are dropped,
    keeping the newest of each group. Returns how many went."""
    long_term, similarity = state.memory.long_term, settings.duplicate_similarity
    before = _long_term_count(long_term)
    decisions = drop_near_duplicates(long_term.decisions, lambda d: d.text, similarity)
    milestones = drop_near_duplicates(long_term.milestones, lambda m: m.text, similarity)
    learnings = drop_near_duplicates(long_term.learnings, lambda s: s, similarity)
    earlier = drop_near_duplicates(long_term.earlier_work, _without_step, similarity)
    # assign only what changed, so an unchanged memory keeps its cached rendering
    if len(decisions) != len(long_term.decisions):
        long_term.decisions = decisions
    if len(milestones) != len(long_term.milestones):
        long_term.milestones = milestones
    if len(learnings) != len(long_term.learnings):
        long_term.learnings = learnings
    if len(earlier) != len(long_term.earlier_work):
        long_term.earlier_work = earlier
    return before - _long_term_count(long_term)


def _long_term_count(long_term: LongTerm) -> int:
    return (
        len(long_term.decisions)
        + len(long_term.milestones)
        + len(long_term.learnings)
        + len(long_term.earlier_work)
    )


_STEP_PREFIX = re.compile(r"^step \d+: ")


def _without_step(digest: str) -> str:
    return _STEP_PREFIX.sub("", digest)


async def compress(
    state: PhasedState,
    settings: MemorySettings | None = None,
    summarise: Summariser | None = None,
    *,
    force: bool = False,
    formatter: MemoryFormatter | None = None,
) -> CompressionReport:
    """Run the three stages when the rendered memory is longer than `compress_above_chars`
    (always with `force`). Without `summarise` the model stage is skipped."""
    settings = settings or MemorySettings()
    formatter = formatter or DEFAULT_FORMATTER
    before = len(state.memory_summary(formatter).text)
    report = CompressionReport(before, before)
    if not force and before <= settings.compress_above_chars:
        return report
    report.digested = apply_rules(state, settings)
    if summarise is not None:
        report.summarised = await summarise_earlier(state, settings, summarise)
    report.duplicates = remove_duplicates(state, settings)
    report.size_after = len(state.memory_summary(formatter).text)
    return report
