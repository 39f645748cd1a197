"""Structured memory of one run: the agent state the phased mode threads through its steps.

`AgentState` holds the step number, the phase, the last error, the memory and the artifacts.
`Memory` splits what the agent knows into three parts:

- **facts**: files created, attempts made, recent tool results, the content of modified files;
- **long-term**: the plan, a summary of the task, decisions, milestones, learnings, and a
  digest (then a model-written summary) of entries compression moved out of the facts;
- **debug-only**: the raw model responses. They are persisted for inspection and are never
  rendered, so they never reach the model.

`MemoryFormatter` renders the facts, the long-term memory and the artifacts as titled sections
(each with a priority saying how long it should survive when a context pack must shrink).
`AgentState.memory_summary()` caches that rendering. Every value the formatter reads is
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

import difflib
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from journeyman.context.compaction import Summariser, cap_text

STATE_FORMAT = 1
"""Version of the `AgentState.to_dict` layout; bumped when it changes incompatibly."""


class MemorySettings(BaseModel):
    """How much memory is kept verbatim, when it is compressed and how much of it is rendered."""

    model_config = ConfigDict(extra="forbid")

    keep_attempts: int = Field(default=8, ge=1)
    """Most recent attempts kept verbatim by the rule stage; older ones become digests."""
    keep_tool_results: int = Field(default=6, ge=1)
    """Most recent tool results kept verbatim by the rule stage."""
    keep_modified_files: int = Field(default=5, ge=1)
    """Most recently modified files whose content is kept (one snapshot per path)."""
    keep_created_files: int = Field(default=50, ge=1)
    """Most recently created file paths kept; older ones are folded into a digest."""
    keep_decisions: int = Field(default=10, ge=1)
    """Most recent important decisions kept verbatim."""
    keep_milestones: int = Field(default=10, ge=1)
    """Most recent milestones kept verbatim."""
    keep_learnings: int = Field(default=12, ge=1)
    """Most recent learnings kept verbatim."""
    keep_model_responses: int = Field(default=20, ge=0)
    """Raw model responses kept in the debug-only part (older ones are dropped, not digested)."""
    compress_above_chars: int = Field(default=12_000, ge=0)
    """Compression runs only when the rendered memory is longer than this, in characters."""
    summarise_above_chars: int = Field(default=3_000, ge=0)
    """The model summarises the digests of older entries once they pass this many characters."""
    duplicate_similarity: float = Field(default=0.9, gt=0, le=1)
    """Two entries whose normalised texts are at least this similar (0..1) are duplicates."""
    tool_output_chars: int = Field(default=800, ge=100)
    """Characters of each tool result shown in the rendering (head and tail)."""
    file_content_chars: int = Field(default=3_000, ge=100)
    """Characters of each modified file's content shown in the rendering."""


# --- records (immutable) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LastError:
    """The error the agent is working on: what failed, how to reproduce it, and its output."""

    summary: str
    repro_command: str = ""
    """A command that reproduces the failure, when there is one."""
    stderr_tail: str = ""
    """The end of the failing command's error output."""
    signature: str = ""
    """Stable identity of the error (see `error_signature`), to spot the same failure again."""

    @classmethod
    def from_failure(
        cls, summary: str, *, repro_command: str = "", stderr: str = "", tail_chars: int = 2_000
    ) -> LastError:
        """A `LastError` with the stderr tail cut to `tail_chars` and the signature computed."""
        return cls(
            summary=summary,
            repro_command=repro_command,
            stderr_tail=stderr[-tail_chars:] if tail_chars else "",
            signature=error_signature(stderr or summary),
        )


@dataclass(frozen=True, slots=True)
class Attempt:
    """One thing the agent tried (an edit, a command) and how it went."""

    step: int
    action: str
    outcome: str
    success: bool
    error_signature: str = ""


@dataclass(frozen=True, slots=True)
class ToolRecord:
    """One tool call and its (possibly long) result."""

    step: int
    tool: str
    arguments: str
    """The call's arguments, rendered as short text (JSON is fine)."""
    output: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class FileSnapshot:
    """The content of a file the agent modified, as it was after the modification."""

    step: int
    path: str
    content: str


@dataclass(frozen=True, slots=True)
class Decision:
    step: int
    text: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Milestone:
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A raw model response, kept for debugging only."""

    step: int
    phase: str
    text: str


# --- the mutable parts (every field holds an immutable value) ------------------------------


@dataclass
class Facts:
    created_files: tuple[str, ...] = ()
    attempts: tuple[Attempt, ...] = ()
    tool_results: tuple[ToolRecord, ...] = ()
    modified_files: tuple[FileSnapshot, ...] = ()
    """At most one snapshot per path, oldest first."""


@dataclass
class LongTerm:
    task_summary: str = ""
    plan: tuple[str, ...] = ()
    """The plan's steps in order."""
    decisions: tuple[Decision, ...] = ()
    milestones: tuple[Milestone, ...] = ()
    learnings: tuple[str, ...] = ()
    earlier_work: tuple[str, ...] = ()
    """One-line digests of entries the rule stage moved out of the other categories."""
    earlier_summary: str = ""
    """The model's summary of digests folded in by the summarisation stage."""


@dataclass
class DebugLog:
    """Never rendered, never shown to the model."""

    model_responses: tuple[ModelResponse, ...] = ()


@dataclass
class Memory:
    facts: Facts = field(default_factory=Facts)
    long_term: LongTerm = field(default_factory=LongTerm)
    debug: DebugLog = field(default_factory=DebugLog)


@dataclass
class Artifacts:
    current_diff: str = ""
    test_results: str = ""
    verification_success: bool | None = None
    """None until a verification has run."""


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


# --- the state -----------------------------------------------------------------------------


@dataclass
class AgentState:
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

    def memory_summary(self, formatter: MemoryFormatter | None = None) -> MemorySummary:
        """The rendered memory, recomputed only when something it shows has changed."""
        formatter = formatter or DEFAULT_FORMATTER
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

    def add_decision(self, text: str, reason: str = "") -> None:
        long_term = self.memory.long_term
        long_term.decisions = (*long_term.decisions, Decision(self.step, text, reason))

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
            ModelResponse(self.step, self.phase, text),
        )

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
    def from_dict(cls, data: Mapping[str, Any]) -> AgentState:
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
                    decisions=_records(Decision, long_term.get("decisions", ())),
                    milestones=_records(Milestone, long_term.get("milestones", ())),
                    learnings=tuple(long_term.get("learnings", ())),
                    earlier_work=tuple(long_term.get("earlier_work", ())),
                    earlier_summary=long_term.get("earlier_summary", ""),
                ),
                debug=DebugLog(_records(ModelResponse, debug.get("model_responses", ()))),
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


# --- rendering -----------------------------------------------------------------------------


class MemoryFormatter:
    """Renders the state as titled sections; subclass and override a section to change it."""

    def __init__(self, settings: MemorySettings | None = None) -> None:
        self.settings = settings or MemorySettings()

    def format(self, state: AgentState) -> MemorySummary:
        built = [
            ("Warnings", self.warnings(state), PRIORITY_GUIDANCE),
            ("Task", state.memory.long_term.task_summary.strip(), PRIORITY_TASK),
            ("Plan", self.plan(state), PRIORITY_PLAN),
            ("Key context", self.key_context(state), PRIORITY_CONTEXT),
            ("Earlier work", self.earlier_work(state), PRIORITY_EARLIER),
            ("Recent activity", self.recent_activity(state), PRIORITY_ACTIVITY),
            ("Tool results", self.tool_results(state), PRIORITY_TOOL_RESULTS),
            ("Modified files", self.modified_files(state), PRIORITY_FILES),
            ("Current state", self.current_state(state), PRIORITY_STATE),
            ("Next step", self.next_step(state), PRIORITY_GUIDANCE),
        ]
        return MemorySummary(tuple(MemorySection(t, b, p) for t, b, p in built if b))

    def warnings(self, state: AgentState) -> str:
        lines = []
        error = state.last_error
        if error is not None and error.signature:
            repeats = sum(
                1 for a in state.memory.facts.attempts if a.error_signature == error.signature
            )
            if repeats >= 2:
                lines.append(
                    f"- The same error has come back {repeats} times. Repeating the last fix "
                    "will not help: re-read the failing code and try a different approach."
                )
        if state.artifacts.verification_success is False:
            lines.append("- The last verification failed; the task is not done until it passes.")
        return "\n".join(lines)

    def plan(self, state: AgentState) -> str:
        return "\n".join(f"{n}. {step}" for n, step in enumerate(state.memory.long_term.plan, 1))

    def key_context(self, state: AgentState) -> str:
        long_term = state.memory.long_term
        lines = [
            f"- decision (step {d.step}): {d.text}" + (f" because {d.reason}" if d.reason else "")
            for d in long_term.decisions
        ]
        lines += [f"- milestone (step {m.step}): {m.text}" for m in long_term.milestones]
        lines += [f"- learned: {text}" for text in long_term.learnings]
        return "\n".join(lines)

    def earlier_work(self, state: AgentState) -> str:
        long_term = state.memory.long_term
        parts = [long_term.earlier_summary.strip()] if long_term.earlier_summary.strip() else []
        parts += [f"- {line}" for line in long_term.earlier_work]
        return "\n".join(parts)

    def recent_activity(self, state: AgentState) -> str:
        return "\n".join(
            f"- step {a.step}: {a.action} -> {'ok' if a.success else 'FAILED'}"
            + (f": {a.outcome}" if a.outcome else "")
            for a in state.memory.facts.attempts
        )

    def tool_results(self, state: AgentState) -> str:
        limit = self.settings.tool_output_chars
        blocks = []
        for record in state.memory.facts.tool_results:
            status = "error" if record.is_error else "ok"
            output = (
                record.output if len(record.output) <= limit else cap_text(record.output, limit)
            )
            blocks.append(
                f"### step {record.step}: {record.tool}({_clip(record.arguments, 200)}) "
                f"[{status}]\n{output}"
            )
        return "\n".join(blocks)

    def modified_files(self, state: AgentState) -> str:
        limit = self.settings.file_content_chars
        blocks = []
        for snapshot in state.memory.facts.modified_files:
            content = snapshot.content
            if len(content) > limit:
                content = (
                    f"{content[:limit]}\n[... {len(content) - limit:,} more characters; "
                    "read the file for the rest ...]"
                )
            blocks.append(f"### {snapshot.path} (after step {snapshot.step})\n{content}")
        return "\n".join(blocks)

    def current_state(self, state: AgentState) -> str:
        facts, artifacts = state.memory.facts, state.artifacts
        verified = {None: "not run yet", True: "passed", False: "failed"}
        lines = [f"- step {state.step}" + (f", phase {state.phase}" if state.phase else "")]
        if facts.created_files:
            lines.append(f"- created: {', '.join(facts.created_files)}")
        if facts.modified_files:
            lines.append(f"- modified: {', '.join(s.path for s in facts.modified_files)}")
        if state.last_error is not None:
            lines.append(f"- last error: {state.last_error.summary}")
        lines.append(f"- verification: {verified[artifacts.verification_success]}")
        return "\n".join(lines)

    def next_step(self, state: AgentState) -> str:
        error = state.last_error
        if error is not None:
            how = f" (reproduce it with `{error.repro_command}`)" if error.repro_command else ""
            return f"Fix the last error first{how}, then verify again."
        if state.artifacts.verification_success is False:
            return "Read the failing tests in the test results, fix the cause, then verify again."
        if not state.memory.long_term.plan:
            return "Write a short plan before changing files."
        if state.artifacts.verification_success:
            return "Verification passed: finish if the task is complete, else continue the plan."
        return "Carry out the next step of the plan, then verify."


DEFAULT_FORMATTER = MemoryFormatter()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- error signatures and near-duplicates ---------------------------------------------------

_HEX = re.compile(r"0x[0-9a-f]+")
_NUMBER = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Lower case, numbers and addresses masked, whitespace collapsed: the text's gist."""
    text = _HEX.sub("#", text.lower())
    return _SPACE.sub(" ", _NUMBER.sub("#", text)).strip(" .;:,")


def error_signature(text: str) -> str:
    """A short stable identity of an error: its last non-empty line (for a Python traceback,
    the exception and its message), normalised, then hashed. Line numbers do not change it."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    gist = normalise(lines[-1]) if lines else ""
    return hashlib.sha256(gist.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]


def near_duplicate(a: str, b: str, similarity: float = 0.9) -> bool:
    """Whether two texts say the same thing: the same words once case, spacing and punctuation
    are ignored, or word sequences at least `similarity` alike. Comparing words rather than
    characters keeps "edit f1.py" and "edit f2.py" apart."""
    wa, wb = _words(a), _words(b)
    if wa == wb:
        return True
    return difflib.SequenceMatcher(None, wa, wb, autojunk=False).ratio() >= similarity


def _words(text: str) -> list[str]:
    words = (word.strip(_EDGE_PUNCTUATION) for word in text.lower().split())
    return [word for word in words if word]


_EDGE_PUNCTUATION = ".,;:!?\"'()[]{}`"


T = TypeVar("T")


def drop_near_duplicates(
    items: Sequence[T], text: Callable[[T], str], similarity: float = 0.9
) -> tuple[T, ...]:
    """`items` without near-duplicates; of each group the newest (last) one stays, in place."""
    kept: list[T] = []
    for item in reversed(items):
        if not any(near_duplicate(text(item), text(k), similarity) for k in kept):
            kept.append(item)
    return tuple(reversed(kept))


# --- compression ---------------------------------------------------------------------------


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


def apply_rules(state: AgentState, settings: MemorySettings) -> int:
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
                f"step {a.step}: {_clip(a.action, 120)} -> "
                + ("ok" if a.success else f"failed: {_clip(a.outcome, 120)}"),
            )
            for a in old_attempts
        ]
    if len(facts.tool_results) > settings.keep_tool_results:
        old_tools, facts.tool_results = split(facts.tool_results, settings.keep_tool_results)
        moved += len(old_tools)
        digests += [
            (
                r.step,
                f"step {r.step}: {r.tool}({_clip(r.arguments, 80)}) "
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
    state: AgentState, settings: MemorySettings, summarise: Summariser
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


def remove_duplicates(state: AgentState, settings: MemorySettings) -> int:
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
    state: AgentState,
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
