"""What swarm workers learn from each other: the failures they hit and the references they found.

One `SharedContextState` is shared by every worker of a swarm. Its methods never await, so a
plain `threading.Lock` makes it safe both from threads and from tasks of one event loop (a
task cannot be switched out while it holds the lock). Every text that enters is clipped, so a
worker that records a megabyte of traceback cannot grow the other workers' prompts.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from journeyman.core.display import printable
from journeyman.core.redact import redact_own_secrets
from journeyman.core.text import clip, one_line

SNAPSHOT_VERSION = 1


class SharedContextConfig(BaseModel):
    """Caps of the shared failure and reference pools."""

    model_config = ConfigDict(extra="forbid")

    max_references: int = Field(default=200, ge=1)
    """References kept in the pool; adding more drops the least recently added."""
    max_failures_per_worker: int = Field(default=50, ge=1)
    """Failures kept per worker; a worker's oldest failure is dropped past this."""
    max_error_chars: int = Field(default=2_000, ge=40)
    """Longest error text kept from one failure (the rest is cut)."""
    max_input_chars: int = Field(default=500, ge=40)
    """Longest description of what failed (a tool call, a command, a subtask)."""
    max_reference_chars: int = Field(default=1_000, ge=40)
    """Longest single reference kept."""


@dataclass(frozen=True)
class WorkerFailure:
    """One failure a worker recorded: what it tried and what went wrong."""

    worker_id: str
    input: str
    """What failed: a tool call, a command, a subtask (clipped)."""
    error: str
    """What went wrong (clipped)."""
    sequence: int
    """Order of recording within this state; later failures have larger numbers."""
    timestamp: float

    @property
    def signature(self) -> str:
        """The error reduced to its kind: first line, numbers and hex ids blanked."""
        return error_signature(self.error)


def error_signature(error: str) -> str:
    """An error's first non-empty line with numbers, hex ids and quoted paths made generic, so
    "line 12" and "line 40" of the same failure count as one pattern."""
    first = next((line.strip() for line in error.splitlines() if line.strip()), "")
    first = _HEX.sub("<id>", first)
    first = _NUMBER.sub("<n>", first)
    return one_line(first, 160)


_HEX = re.compile(r"\b(?:0x)?[0-9a-f]{8,}\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")

_ADVICE: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"no such file|not found|does not exist|filenotfound", re.IGNORECASE),
        "Paths that do not exist were tried: list or search the workspace before reading or "
        "editing a file.",
    ),
    (
        re.compile(r"timed? ?out|timeout", re.IGNORECASE),
        "Commands timed out: run narrower commands (one test file, a smaller search) or raise "
        "their timeout.",
    ),
    (
        re.compile(r"permission denied|not permitted|refused", re.IGNORECASE),
        "Calls were refused: do not retry them as they are; find a way that needs no extra "
        "permission or report the blocker.",
    ),
    (
        re.compile(r"modulenotfound|no module named|importerror|cannot import", re.IGNORECASE),
        "Imports failed: check the package layout and how the project runs its code before "
        "changing imports.",
    ),
    (
        re.compile(r"syntaxerror|indentationerror", re.IGNORECASE),
        "Edits left invalid Python: read the file again after each edit and run it.",
    ),
    (
        re.compile(r"matched \d+ times|did not match|not unique|old_string", re.IGNORECASE),
        "Edits did not match the file exactly: read the current text first and quote enough "
        "surrounding lines to match once.",
    ),
    (
        re.compile(r"merge conflict|conflict", re.IGNORECASE),
        "Workers collided on the same files: keep to the files of your own subtask.",
    ),
)


class SharedContextState:
    """Failures and references pooled across the workers of one swarm.

    >>> shared = SharedContextState(SharedContextConfig())
    >>> shared.record_failure("w1", "run_command pytest", "ImportError: no module named app")
    """

    def __init__(self, config: SharedContextConfig | None = None) -> None:
        self.config = config or SharedContextConfig()
        self._lock = threading.Lock()
        self._failures: dict[str, deque[WorkerFailure]] = {}
        self._references: OrderedDict[str, None] = OrderedDict()
        self._sequence = 0

    # --- failures -------------------------------------------------------------------------

    def record_failure(self, worker_id: str, input: str, error: str) -> WorkerFailure:
        """Remember that `worker_id` tried `input` and got `error` (both clipped)."""
        with self._lock:
            self._sequence += 1
            # what a store keeps is read by later workers: never the agent's own secrets
            failure = WorkerFailure(
                worker_id=one_line(str(worker_id), 120),
                input=clip(redact_own_secrets(str(input)), self.config.max_input_chars),
                error=clip(redact_own_secrets(str(error)), self.config.max_error_chars),
                sequence=self._sequence,
                timestamp=time.time(),
            )
            self._append(failure)
            return failure

    def _append(self, failure: WorkerFailure) -> None:
        pool = self._failures.get(failure.worker_id)
        if pool is None:
            pool = self._failures[failure.worker_id] = deque(
                maxlen=self.config.max_failures_per_worker
            )
        pool.append(failure)

    def failures(self, worker_id: str | None = None) -> list[WorkerFailure]:
        """The kept failures (of one worker, or of all), oldest first."""
        with self._lock:
            return self._sorted_failures(worker_id)

    def _sorted_failures(self, worker_id: str | None = None) -> list[WorkerFailure]:
        if worker_id is not None:
            return list(self._failures.get(worker_id, ()))
        every = [f for pool in self._failures.values() for f in pool]
        return sorted(every, key=lambda f: (f.sequence, f.timestamp, f.worker_id))

    @property
    def failure_count(self) -> int:
        with self._lock:
            return sum(len(pool) for pool in self._failures.values())

    def get_failure_context(
        self,
        max_failures: int = 10,
        *,
        exclude_worker: str | None = None,
        current_swarm: str | None = None,
    ) -> str:
        """The most recent `max_failures` failures as text for a worker's prompt ("" if none):
        each one quoted as an observation, with where it comes from (`current_swarm`'s own
        workers, or an earlier swarm that used the same store), terminal controls escaped.

        `exclude_worker` leaves out that worker's own failures (it already has them in its
        conversation).
        """
        with self._lock:
            failures = [f for f in self._sorted_failures() if f.worker_id != exclude_worker]
        if max_failures <= 0 or not failures:
            return ""
        recent = failures[-max_failures:]
        lines = [
            f"- worker {printable(f.worker_id)} tried: {printable(one_line(f.input, 200))}\n"
            f"  and got ({_origin(f.worker_id, current_swarm)}):\n{_quoted(f.error)}"
            for f in recent
        ]
        return "\n".join(lines)

    def get_failure_insights(self) -> list[str]:
        """Rules drawn from the pooled failures: errors several workers hit, inputs that kept
        failing, and advice for common kinds of failure. Stable order for identical state."""
        failures = self.failures()
        insights: list[str] = []
        workers_by_signature: dict[str, set[str]] = {}
        for failure in failures:
            workers_by_signature.setdefault(failure.signature, set()).add(failure.worker_id)
        for signature, workers in sorted(
            workers_by_signature.items(), key=lambda item: (-len(item[1]), item[0])
        ):
            if len(workers) >= 2 and signature:
                insights.append(
                    f"{len(workers)} workers ({', '.join(sorted(workers))}) hit the same error: "
                    f"{signature}. It is not specific to one subtask; find its cause before "
                    "retrying."
                )
        inputs = Counter(one_line(f.input, 200) for f in failures)
        for text, count in sorted(inputs.items(), key=lambda item: (-item[1], item[0])):
            if count >= 2 and text:
                insights.append(f"`{text}` failed {count} times; do not run it again unchanged.")
        for pattern, advice in _ADVICE:
            if any(pattern.search(f.error) for f in failures):
                insights.append(advice)
        return insights

    # --- references -----------------------------------------------------------------------

    def add_references(self, refs: Iterable[str]) -> int:
        """Pool `refs` (file paths, URLs, notes), deduplicated; returns how many were new.

        A reference added again moves to the newest end; past `max_references` the oldest
        are dropped.
        """
        added = 0
        with self._lock:
            for ref in refs:
                text = clip(str(ref).strip(), self.config.max_reference_chars)
                if not text:
                    continue
                if text in self._references:
                    self._references.move_to_end(text)
                else:
                    self._references[text] = None
                    added += 1
            while len(self._references) > self.config.max_references:
                self._references.popitem(last=False)
        return added

    def references(self) -> list[str]:
        """Every pooled reference, oldest first."""
        with self._lock:
            return list(self._references)

    def search_references(self, query: str, limit: int | None = None) -> list[str]:
        """References containing `query` (case-insensitive substring), newest first."""
        needle = query.casefold()
        with self._lock:
            found = [ref for ref in reversed(self._references) if needle in ref.casefold()]
        return found if limit is None else found[: max(0, limit)]

    # --- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain JSON-ready data (for a `PersistenceAdapter`)."""
        with self._lock:
            return {
                "version": SNAPSHOT_VERSION,
                "failures": [asdict(f) for f in self._sorted_failures()],
                "references": list(self._references),
            }

    def merge(self, snapshot: Mapping[str, Any]) -> None:
        """Add a snapshot's failures and references to this state (what is already here is
        kept; the same failure seen twice is kept once). Raises `ValueError` on a damaged one."""
        failures, references = _parse_context_snapshot(snapshot)
        with self._lock:
            known = {_failure_key(f) for pool in self._failures.values() for f in pool}
            for failure in sorted(failures, key=lambda f: (f.timestamp, f.sequence)):
                if _failure_key(failure) in known:
                    continue
                known.add(_failure_key(failure))
                self._sequence += 1
                self._append(
                    WorkerFailure(
                        failure.worker_id,
                        clip(failure.input, self.config.max_input_chars),
                        clip(failure.error, self.config.max_error_chars),
                        self._sequence,
                        failure.timestamp,
                    )
                )
        self.add_references(references)

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Replace this state with a snapshot's content."""
        failures, references = _parse_context_snapshot(snapshot)
        with self._lock:
            self._failures.clear()
            self._references.clear()
            self._sequence = 0
        self.merge({"version": SNAPSHOT_VERSION, "failures": [asdict(f) for f in failures]})
        self.add_references(references)

    @classmethod
    def from_snapshot(
        cls, snapshot: Mapping[str, Any], config: SharedContextConfig | None = None
    ) -> SharedContextState:
        state = cls(config)
        state.restore(snapshot)
        return state


def _failure_key(failure: WorkerFailure) -> tuple[str, str, str, float]:
    return (failure.worker_id, failure.input, failure.error, failure.timestamp)


def _quoted(text: str) -> str:
    """`text` as a quotation: each line behind "  > ", controls escaped."""
    return "\n".join(f"  > {printable(line)}" for line in text.strip().splitlines() or [""])


def _origin(worker_id: str, current_swarm: str | None) -> str:
    swarm, _, _ = worker_id.partition("/")
    if current_swarm and swarm == current_swarm:
        return "recorded by this swarm"
    if "/" in worker_id:
        return "recorded by an earlier swarm in the same shared store"
    return "recorded in this run"


def _parse_context_snapshot(
    snapshot: Mapping[str, Any],
) -> tuple[list[WorkerFailure], list[str]]:
    if not isinstance(snapshot, Mapping):
        raise ValueError(
            f"shared context snapshot must be an object, got {type(snapshot).__name__}"
        )
    version = snapshot.get("version")
    if version != SNAPSHOT_VERSION:
        raise ValueError(
            f"shared context snapshot has version {version!r}; this journeyman reads version "
            f"{SNAPSHOT_VERSION} (save it again with this version)"
        )
    raw_failures = snapshot.get("failures", [])
    raw_references = snapshot.get("references", [])
    if not isinstance(raw_failures, list) or not isinstance(raw_references, list):
        raise ValueError("shared context snapshot: `failures` and `references` must be lists")
    failures: list[WorkerFailure] = []
    for index, item in enumerate(raw_failures):
        try:
            failures.append(
                WorkerFailure(
                    worker_id=str(item["worker_id"]),
                    input=str(item["input"]),
                    error=str(item["error"]),
                    sequence=int(item.get("sequence", 0)),
                    timestamp=float(item.get("timestamp", 0.0)),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(
                f"shared context snapshot: failure #{index} is damaged ({error!r}); it needs "
                "worker_id, input and error"
            ) from None
    return failures, [str(r) for r in raw_references]
