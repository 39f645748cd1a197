"""How a run ended: typed finish reasons in four groups, and the run's summary record."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from journeyman.core.messages import Message, Usage


class FinishCategory(StrEnum):
    SUCCESS = "success"
    CAPACITY = "capacity"
    """A limit was reached; a bigger budget could let the run go on."""
    RETRYABLE = "retryable"
    """The run stopped for a reason that another attempt may not hit."""
    FATAL = "fatal"


class FinishReason(StrEnum):
    COMPLETED = "completed"
    """The model called `finish`."""
    ANSWERED = "answered"
    """The model replied with text and no tool calls."""
    MAX_ITERATIONS = "max_iterations"
    MAX_BUDGET_USD = "max_budget_usd"
    MAX_TOKENS = "max_tokens"
    MAX_DURATION = "max_duration"
    MAX_CONSECUTIVE_MISTAKES = "max_consecutive_mistakes"
    NO_PROGRESS = "no_progress"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    """Retryable provider faults outlasted the retry budget and every fallback."""
    PROVIDER_ERROR = "provider_error"
    """The provider refused the request for good (authentication, bad request)."""
    CONFIGURATION_ERROR = "configuration_error"
    CANCELLED = "cancelled"
    HALTED = "halted"
    """A hook stopped the run, or refused its task."""
    REFUSED = "refused"
    """The model finished, but edit or command calls it made were refused (permissions) and
    never succeeded later, and no passing check shows they were not needed."""
    UNVERIFIED = "unverified"
    """The model finished, but no check could confirm it: none was configured (`--verify`)
    and none was found in the workspace (`--no-verify` accepts the model's word)."""
    VERIFICATION_FAILED = "verification_failed"
    """The model finished, but the check command kept failing after the harness sent its
    failures back (or the run ended before a check passed after the last change)."""
    INTERNAL_ERROR = "internal_error"

    @property
    def category(self) -> FinishCategory:
        return _CATEGORIES[self]

    @property
    def is_success(self) -> bool:
        return self.category is FinishCategory.SUCCESS


_CATEGORIES: dict[FinishReason, FinishCategory] = {
    FinishReason.COMPLETED: FinishCategory.SUCCESS,
    FinishReason.ANSWERED: FinishCategory.SUCCESS,
    FinishReason.MAX_ITERATIONS: FinishCategory.CAPACITY,
    FinishReason.MAX_BUDGET_USD: FinishCategory.CAPACITY,
    FinishReason.MAX_TOKENS: FinishCategory.CAPACITY,
    FinishReason.MAX_DURATION: FinishCategory.CAPACITY,
    FinishReason.MAX_CONSECUTIVE_MISTAKES: FinishCategory.RETRYABLE,
    FinishReason.NO_PROGRESS: FinishCategory.RETRYABLE,
    FinishReason.PROVIDER_UNAVAILABLE: FinishCategory.RETRYABLE,
    FinishReason.PROVIDER_ERROR: FinishCategory.FATAL,
    FinishReason.CONFIGURATION_ERROR: FinishCategory.FATAL,
    FinishReason.CANCELLED: FinishCategory.FATAL,
    FinishReason.HALTED: FinishCategory.FATAL,
    # the same permissions refuse the same calls again: the user must allow them first
    FinishReason.REFUSED: FinishCategory.FATAL,
    # another attempt (or a stronger model) may well make the check pass
    FinishReason.VERIFICATION_FAILED: FinishCategory.RETRYABLE,
    # the user must name a check (or waive it): another attempt finds none either
    FinishReason.UNVERIFIED: FinishCategory.FATAL,
    FinishReason.INTERNAL_ERROR: FinishCategory.FATAL,
}


@dataclass(frozen=True)
class RefusedCall:
    """An edit or command call the permission policy refused, and that never succeeded later."""

    tool: str
    argument: str | None
    """The call's key argument (the path of an edit, the command line of a command)."""
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "argument": self.argument, "reason": self.reason}


@dataclass(frozen=True)
class CheckEvidence:
    """The receipt of a run: the harness's last run of the check, what it ran, and on which
    tree. A success carries one whose check passed, ran at least one test, with the test
    infrastructure as it was at the start, on the tree the run ended with."""

    command: str
    passed: bool
    exit_code: int | None
    """None when the command did not run to an exit code (refused, timed out, not startable)."""
    after_last_change: bool
    """The workspace was the same when the check ran and when the run ended (equal
    fingerprints; before fingerprints existed, per the undo journal)."""
    duration_s: float
    output_tail: str
    """The last lines of the command's output."""
    timed_out: bool = False
    timeout_s: float | None = None
    """The check's own time limit (`--verify-timeout`), never the tool timeout."""
    not_run: str | None = None
    """Why the command did not run at all (e.g. a deny rule), None when it ran."""
    source: str | None = None
    """Where the check came from: "--verify" (the user's), or what the project profile found
    it in (e.g. "Makefile target 'test'")."""
    runner: str | None = None
    """The test runner whose summary was read (pytest, unittest, make, tox, ...), if known."""
    sandbox: str | None = None
    """Where the check ran, as the sandbox describes itself."""
    tests: dict[str, Any] | None = None
    """Tests counted in the runner's summary (passed, failed, errors, skipped, ran, failing
    names); None when the output held no summary."""
    before: dict[str, Any] | None = None
    """The same check before the model's first turn: exit_code, tests, duration_s."""
    problem: str | None = None
    """Why a check that ran is not a pass: "failed", "no_tests", "no_summary",
    "tests_removed", "test_changes" or "new_tests_interfere" (the old tests pass only with the
    new test files); None when it passed."""
    test_changes: tuple[dict[str, Any], ...] = ()
    """Test files and settings that differ from the start (path, change, role, allowed)."""
    tests_removed: bool = False
    """Fewer tests ran than before the model's first turn."""
    fingerprint: str | None = None
    """The workspace's fingerprint when the check ran."""
    final_fingerprint: str | None = None
    """The workspace's fingerprint when the run ended (equal to `fingerprint` when the check
    ran on the final tree)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "after_last_change": self.after_last_change,
            "duration_s": round(self.duration_s, 3),
            "timed_out": self.timed_out,
            "timeout_s": self.timeout_s,
            "not_run": self.not_run,
            "source": self.source,
            "runner": self.runner,
            "sandbox": self.sandbox,
            "tests": self.tests,
            "before": self.before,
            "problem": self.problem,
            "test_changes": list(self.test_changes),
            "tests_removed": self.tests_removed,
            "fingerprint": self.fingerprint,
            "final_fingerprint": self.final_fingerprint,
            "output_tail": self.output_tail,
        }


@dataclass
class RunResult:
    """The outcome of one run, as returned by the library and printed by `--output-format json`."""

    final_text: str
    finish_reason: FinishReason
    iterations: int
    tool_calls_made: int
    usage: Usage
    cost_usd: float | None
    """None when the price of at least one call is unknown (never a silent 0)."""
    duration_s: float
    session_id: str
    parent_session_id: str | None = None
    error: str | None = None
    """One-line reason when the run did not succeed."""
    no_progress_snapshot: list[Message] | None = None
    store_path: str | None = None
    """The session database holding this run's steps and events."""
    refused_calls: list[RefusedCall] = field(default_factory=list)
    """Edit and command calls that were refused and never succeeded later in the run."""
    files_changed: list[str] = field(default_factory=list)
    """Workspace files the session changed and did not undo (from the undo journal)."""
    verification: CheckEvidence | None = None
    """The harness's last run of the check command; None when no check ran."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.finish_reason.is_success

    def to_dict(self) -> dict[str, Any]:
        return {
            "success": self.success,
            "final_text": self.final_text,
            "finish_reason": self.finish_reason.value,
            "finish_category": self.finish_reason.category.value,
            "iterations": self.iterations,
            "tool_calls_made": self.tool_calls_made,
            "usage": self.usage.to_dict(),
            "cost_usd": self.cost_usd,
            "duration_s": round(self.duration_s, 3),
            "session_id": self.session_id,
            "parent_session_id": self.parent_session_id,
            "error": self.error,
            "no_progress_snapshot": (
                [m.to_dict() for m in self.no_progress_snapshot]
                if self.no_progress_snapshot is not None
                else None
            ),
            "store_path": self.store_path,
            "refused_calls": [call.to_dict() for call in self.refused_calls],
            "files_changed": list(self.files_changed),
            "verification": None if self.verification is None else self.verification.to_dict(),
            **({"extra": self.extra} if self.extra else {}),
        }
