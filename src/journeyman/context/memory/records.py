"""The parts of the structured memory: immutable records and the containers that hold them."""

from __future__ import annotations

from dataclasses import dataclass, field

from journeyman.context.memory.similarity import error_signature


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
class DecisionNote:
    """An important decision the model took (long-term memory, shown to the model)."""

    step: int
    text: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Milestone:
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ResponseNote:
    """A raw model response, kept for debugging only."""

    step: int
    phase: str
    text: str


@dataclass(frozen=True, slots=True)
class StepDecision:
    """What the workflow decided at a step (e.g. a phase change and why), for debugging only."""

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
    decisions: tuple[DecisionNote, ...] = ()
    milestones: tuple[Milestone, ...] = ()
    learnings: tuple[str, ...] = ()
    earlier_work: tuple[str, ...] = ()
    """One-line digests of entries the rule stage moved out of the other categories."""
    earlier_summary: str = ""
    """The model's summary of digests folded in by the summarisation stage."""


@dataclass
class DebugLog:
    """Never rendered, never shown to the model."""

    model_responses: tuple[ResponseNote, ...] = ()
    decisions: tuple[StepDecision, ...] = ()
    """The workflow's own decisions, step by step."""


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
