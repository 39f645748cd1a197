"""The phased mode's working state: step, phase, last error, memory and artifacts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol, TypeVar

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
from journeyman.context.memory.sections import MemorySummary

STATE_FORMAT = 1
"""Version of the `PhasedState.to_dict` layout; bumped when it changes incompatibly."""


class Renderer(Protocol):
    """What renders a state as sections (`formatter.MemoryFormatter`; passed in, so the state
    does not depend on how it is rendered)."""

    def format(self, state: PhasedState) -> MemorySummary: ...


@dataclass
class PhasedState:
    """Everything the phased mode knows about its run; persisted after every step."""

    step: int = 0
    phase: str = ""
    last_error: LastError | None = None
    memory: Memory = field(default_factory=Memory)
    artifacts: Artifacts = field(default_factory=Artifacts)
    _cache: tuple[tuple[object, ...], MemorySummary] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    # rendering

    def memory_summary(self, formatter: Renderer) -> MemorySummary:
        """The rendered memory, recomputed only when something it shows has changed."""
        key = (formatter, *self._rendered_values())
        if self._cache is not None and _same(self._cache[0], key):
            return self._cache[1]
        summary = formatter.format(self)
        self._cache = (key, summary)
        return summary

    def _rendered_values(self) -> tuple[object, ...]:
        """Every value the formatter may read (the debug log is not among them)."""
        parts = (self.memory.facts, self.memory.long_term, self.artifacts)
        return (
            self.step,
            self.phase,
            self.last_error,
            *parts,
            *(getattr(part, f.name) for part in parts for f in fields(part)),
        )

    # recording (each stamps the current step)

    def advance(self, phase: str | None = None) -> None:
        """Move to the next step, and to `phase` when given."""
        self.step += 1
        if phase is not None:
            self.phase = phase

    def record_attempt(
        self, action: str, outcome: str, *, success: bool, error_signature: str = ""
    ) -> None:
        facts = self.memory.facts
        attempt = Attempt(self.step, action, outcome, success, error_signature)
        facts.attempts = (*facts.attempts, attempt)

    def record_tool_result(
        self, tool: str, arguments: str, output: str, *, is_error: bool = False
    ) -> None:
        facts = self.memory.facts
        record = ToolRecord(self.step, tool, arguments, output, is_error)
        facts.tool_results = (*facts.tool_results, record)

    def record_created_file(self, path: str) -> None:
        facts = self.memory.facts
        if path not in facts.created_files:
            facts.created_files = (*facts.created_files, path)

    def record_file_content(self, path: str, content: str) -> None:
        """Remember `path`'s content after an edit; replaces the previous snapshot of `path`."""
        facts = self.memory.facts
        others = tuple(s for s in facts.modified_files if s.path != path)
        facts.modified_files = (*others, FileSnapshot(self.step, path, content))

    def set_plan(self, steps: str | Sequence[str]) -> None:
        """Replace the plan; a single string is one step per non-empty line."""
        lines = steps.splitlines() if isinstance(steps, str) else steps
        self.memory.long_term.plan = tuple(s.strip() for s in lines if s.strip())

    def set_task_summary(self, text: str) -> None:
        """Replace the summary of what the task asks for."""
        self.memory.long_term.task_summary = text.strip()

    def add_decision(self, text: str, reason: str = "") -> None:
        long_term = self.memory.long_term
        long_term.decisions = (*long_term.decisions, DecisionNote(self.step, text, reason))

    def add_milestone(self, text: str) -> None:
        long_term = self.memory.long_term
        long_term.milestones = (*long_term.milestones, Milestone(self.step, text))

    def add_learning(self, text: str) -> None:
        long_term = self.memory.long_term
        long_term.learnings = (*long_term.learnings, text)

    def record_model_response(self, text: str) -> None:
        """Keep a raw model response for debugging; it is never rendered."""
        debug = self.memory.debug
        debug.model_responses = (
            *debug.model_responses,
            ResponseNote(self.step, self.phase, text),
        )

    def record_step_decision(self, text: str) -> None:
        """Log what the workflow decided at this step; debug only, never rendered."""
        debug = self.memory.debug
        debug.decisions = (*debug.decisions, StepDecision(self.step, self.phase, text))

    # persistence

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible data; `from_dict` restores an equal state."""
        return {
            "format": STATE_FORMAT,
            "step": self.step,
            "phase": self.phase,
            "last_error": None if self.last_error is None else asdict(self.last_error),
            "memory": {
                "facts": _dump(self.memory.facts),
                "long_term": _dump(self.memory.long_term),
                "debug": _dump(self.memory.debug),
            },
            "artifacts": _dump(self.artifacts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhasedState:
        version = data.get("format", STATE_FORMAT)
        if version != STATE_FORMAT:
            raise ValueError(
                f"agent state: format {version} is not supported (this version reads "
                f"{STATE_FORMAT}); start a new run or use the journeyman that wrote it"
            )
        memory = data.get("memory", {})
        facts, long_term = memory.get("facts", {}), memory.get("long_term", {})
        debug = memory.get("debug", {})
        error = data.get("last_error")
        return cls(
            step=int(data.get("step", 0)),
            phase=str(data.get("phase", "")),
            last_error=None if error is None else _record(LastError, error),
            memory=Memory(
                facts=Facts(
                    created_files=tuple(facts.get("created_files", ())),
                    attempts=_records(Attempt, facts.get("attempts", ())),
                    tool_results=_records(ToolRecord, facts.get("tool_results", ())),
                    modified_files=_records(FileSnapshot, facts.get("modified_files", ())),
                ),
                long_term=LongTerm(
                    task_summary=long_term.get("task_summary", ""),
                    plan=tuple(long_term.get("plan", ())),
                    decisions=_records(DecisionNote, long_term.get("decisions", ())),
                    milestones=_records(Milestone, long_term.get("milestones", ())),
                    learnings=tuple(long_term.get("learnings", ())),
                    earlier_work=tuple(long_term.get("earlier_work", ())),
                    earlier_summary=long_term.get("earlier_summary", ""),
                ),
                debug=DebugLog(
                    model_responses=_records(ResponseNote, debug.get("model_responses", ())),
                    decisions=_records(StepDecision, debug.get("decisions", ())),
                ),
            ),
            artifacts=_record(Artifacts, data.get("artifacts", {})),
        )


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _dump(part: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(part):  # type: ignore[arg-type]
        value = getattr(part, f.name)
        if isinstance(value, tuple):
            value = [asdict(v) if hasattr(v, "__dataclass_fields__") else v for v in value]
        out[f.name] = value
    return out


R = TypeVar("R")


def _record(cls: Callable[..., R], data: Mapping[str, Any]) -> R:
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in known})


def _records(cls: Callable[..., R], items: Iterable[Mapping[str, Any]]) -> tuple[R, ...]:
    return tuple(_record(cls, item) for item in items)
