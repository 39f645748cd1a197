"""Structured memory of one run: the agent state the phased mode threads through its steps.

`PhasedState` holds the step number, the phase, the last error, the memory and the artifacts.
`Memory` splits what the agent knows into three parts:

- **facts**: files created, attempts made, recent tool results, the content of modified files;
- **long-term**: the plan, a summary of the task, decisions, milestones, learnings, and a
  digest (then a model-written summary) of entries compression moved out of the facts;
- **debug-only**: the raw model responses and the workflow's log of its own decisions. They are
  persisted for inspection and are never rendered, so they never reach the model.

`MemoryFormatter` renders the facts, the long-term memory and the artifacts as titled sections
(each with a priority saying how long it should survive when a context pack must shrink).
`PhasedState.memory_summary(formatter)` caches that rendering. Every value the formatter reads is
immutable (strings, numbers, tuples of frozen records), so the cache key is simply the identity
of each of those values: assigning a field, which is the only way to change one, invalidates it.

Compression runs in three stages once the rendering outgrows `compress_above_chars`:
1. rules: each category keeps its most recent entries; older ones become one-line digests;
2. the model: when the digests outgrow `summarise_above_chars`, a summariser folds them (and the
   previous summary) into one summary;
3. near-duplicates among decisions, milestones, learnings and digests are dropped, the newest
   of each group kept.

The state is persisted every step, so `to_dict` / `from_dict` round-trip through plain JSON.
"""

from __future__ import annotations

from journeyman.context.memory.compression import (
    SUMMARY_REQUEST,
    CompressionReport,
    apply_rules,
    compress,
    remove_duplicates,
    summarise_earlier,
)
from journeyman.context.memory.formatter import DEFAULT_FORMATTER, MemoryFormatter
from journeyman.context.memory.records import (
    Artifacts,
    Attempt,
    DebugLog,
    DecisionNote,
    Facts,
    FileSnapshot,
    LastError,
    LongTerm,
    Memory,
    Milestone,
    ResponseNote,
    StepDecision,
    ToolRecord,
)
from journeyman.context.memory.sections import (
    OLD_MEMORY_BELOW,
    PRIORITY_ACTIVITY,
    PRIORITY_CONTEXT,
    PRIORITY_EARLIER,
    PRIORITY_FILES,
    PRIORITY_GUIDANCE,
    PRIORITY_PLAN,
    PRIORITY_STATE,
    PRIORITY_TASK,
    PRIORITY_TOOL_RESULTS,
    MemorySection,
    MemorySummary,
)
from journeyman.context.memory.settings import MemorySettings
from journeyman.context.memory.similarity import (
    drop_near_duplicates,
    error_signature,
    near_duplicate,
    normalise,
)
from journeyman.context.memory.state import STATE_FORMAT, PhasedState

__all__ = [
    "DEFAULT_FORMATTER",
    "OLD_MEMORY_BELOW",
    "PRIORITY_ACTIVITY",
    "PRIORITY_CONTEXT",
    "PRIORITY_EARLIER",
    "PRIORITY_FILES",
    "PRIORITY_GUIDANCE",
    "PRIORITY_PLAN",
    "PRIORITY_STATE",
    "PRIORITY_TASK",
    "PRIORITY_TOOL_RESULTS",
    "STATE_FORMAT",
    "SUMMARY_REQUEST",
    "Artifacts",
    "Attempt",
    "CompressionReport",
    "DebugLog",
    "DecisionNote",
    "Facts",
    "FileSnapshot",
    "LastError",
    "LongTerm",
    "Memory",
    "MemoryFormatter",
    "MemorySection",
    "MemorySettings",
    "MemorySummary",
    "Milestone",
    "PhasedState",
    "ResponseNote",
    "StepDecision",
    "ToolRecord",
    "apply_rules",
    "compress",
    "drop_near_duplicates",
    "error_signature",
    "near_duplicate",
    "normalise",
    "remove_duplicates",
    "summarise_earlier",
]
