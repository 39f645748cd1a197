"""Doom loops across a swarm: the same tool call repeated by several workers.

Each worker (`worker_hooks.attach_worker`) reports the fingerprint of every call that repeats
its previous one: same tool, same arguments, same result, back to back. A file read again
later in a task is no repeat, nor is a test run again after an edit. A fingerprint repeated
more than `global_doom_threshold` times, by at least `min_workers` workers, is a global doom
loop: something outside any one subtask is broken (a service down,
a missing dependency), and repeating the call anywhere is wasted budget. Every worker can ask
for the loops (`global_doom_loops`, `notice`), listeners are called once per new loop, and the
scheduler asks `should_skip` before starting work.

Like `SharedContextState`, no method awaits, so one `threading.Lock` serves threads and tasks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from journeyman.core.text import one_line

DEFAULT_GLOBAL_DOOM_THRESHOLD = 10
"""Repeats of one call across the swarm beyond which it is a global doom loop."""
SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class GlobalDoomLoop:
    """A call the swarm keeps repeating across workers."""

    fingerprint: str
    label: str
    """What the call is, for people and models ("run_command {"command": "pytest"}")."""
    count: int
    """Times it was repeated across all workers when this record was made."""
    workers: tuple[str, ...]
    """Workers that made it, sorted."""
    tasks: tuple[str, ...]
    """Subtasks those workers were on, sorted (empty when trackers gave none)."""

    def describe(self) -> str:
        return (
            f"`{self.label or self.fingerprint}` was repeated {self.count} times with the same "
            f"result by {len(self.workers)} workers ({', '.join(self.workers)})"
        )


@dataclass(frozen=True)
class EconomicsVerdict:
    """What one recorded call means for the swarm."""

    fingerprint: str
    count: int
    """Times this fingerprint has now been seen across all workers."""
    is_global_doom_loop: bool
    newly_flagged: bool
    """This very call made it a global doom loop."""


GlobalDoomListener = Callable[[GlobalDoomLoop], object]


class SharedEconomicsState:
    """Counts repeated calls per worker across a swarm and flags global doom loops."""

    def __init__(
        self, global_doom_threshold: int = DEFAULT_GLOBAL_DOOM_THRESHOLD, *, min_workers: int = 2
    ) -> None:
        if global_doom_threshold < 1:
            raise ValueError(
                f"global_doom_threshold must be at least 1, got {global_doom_threshold}"
            )
        if min_workers < 1:
            raise ValueError(f"min_workers must be at least 1, got {min_workers}")
        self.global_doom_threshold = global_doom_threshold
        self.min_workers = min_workers
        """Distinct workers a fingerprint needs before it can be global (one worker alone
        repeating a call is its own, local doom loop)."""
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = {}
        self._labels: dict[str, str] = {}
        self._tasks: dict[str, set[str]] = {}
        self._flagged: dict[str, None] = {}
        self._listeners: list[GlobalDoomListener] = []

    def record(
        self, worker_id: str, fingerprint: str, *, label: str = "", task: str = ""
    ) -> EconomicsVerdict:
        """Count one call of `fingerprint` by `worker_id` (working on `task`, if given)."""
        with self._lock:
            per_worker = self._counts.setdefault(fingerprint, {})
            per_worker[worker_id] = per_worker.get(worker_id, 0) + 1
            if label and fingerprint not in self._labels:
                self._labels[fingerprint] = one_line(label, 200)
            if task:
                self._tasks.setdefault(fingerprint, set()).add(task)
            count = sum(per_worker.values())
            newly = fingerprint not in self._flagged and self._crosses(per_worker)
            if newly:
                self._flagged[fingerprint] = None
            flagged = fingerprint in self._flagged
            loop = self._loop(fingerprint) if newly else None
            listeners = list(self._listeners) if newly else []
        if loop is not None:
            for listener in listeners:  # outside the lock: a listener may read this state
                listener(loop)
        return EconomicsVerdict(fingerprint, count, flagged, newly)

    def _crosses(self, per_worker: Mapping[str, int]) -> bool:
        return (
            sum(per_worker.values()) > self.global_doom_threshold
            and len(per_worker) >= self.min_workers
        )

    def _loop(self, fingerprint: str) -> GlobalDoomLoop:
        per_worker = self._counts.get(fingerprint, {})
        return GlobalDoomLoop(
            fingerprint=fingerprint,
            label=self._labels.get(fingerprint, ""),
            count=sum(per_worker.values()),
            workers=tuple(sorted(per_worker)),
            tasks=tuple(sorted(self._tasks.get(fingerprint, ()))),
        )

    def count(self, fingerprint: str) -> int:
        """Times `fingerprint` was seen across all workers."""
        with self._lock:
            return sum(self._counts.get(fingerprint, {}).values())

    def counts_by_worker(self, fingerprint: str) -> dict[str, int]:
        with self._lock:
            return dict(self._counts.get(fingerprint, {}))

    def is_global_doom_loop(self, fingerprint: str) -> bool:
        with self._lock:
            return fingerprint in self._flagged

    def global_doom_loops(self) -> list[GlobalDoomLoop]:
        """Every global doom loop, in the order they were flagged."""
        with self._lock:
            return [self._loop(fp) for fp in self._flagged]

    def notice(self) -> str:
        """Text telling a worker which calls to avoid ("" when there are none)."""
        loops = self.global_doom_loops()
        if not loops:
            return ""
        lines = [
            "These calls keep failing across the swarm; do not make them again, try another "
            "way or report what blocks you:"
        ]
        lines.extend(f"- {loop.describe()}" for loop in loops)
        return "\n".join(lines)

    def on_global_doom_loop(self, listener: GlobalDoomListener) -> Callable[[], None]:
        """Call `listener` once for each newly flagged loop; returns a function that removes it.
        Listeners run on the thread that recorded the call, outside the lock."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def should_skip(self, fingerprint_or_task: str) -> bool:
        """Whether the scheduler should not start (or retry) this work: `fingerprint_or_task`
        is a flagged fingerprint, or a subtask whose worker fed a global doom loop."""
        with self._lock:
            if fingerprint_or_task in self._flagged:
                return True
            return any(fingerprint_or_task in self._tasks.get(fp, ()) for fp in self._flagged)

    # --- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The counts, labels and flags as plain JSON-ready data."""
        with self._lock:
            return {
                "version": SNAPSHOT_VERSION,
                "global_doom_threshold": self.global_doom_threshold,
                "counts": {fp: dict(workers) for fp, workers in self._counts.items()},
                "labels": dict(self._labels),
                "tasks": {fp: sorted(tasks) for fp, tasks in self._tasks.items()},
                "flagged": list(self._flagged),
            }

    def merge(self, snapshot: Mapping[str, Any]) -> list[GlobalDoomLoop]:
        """Fold a snapshot (of another process's state, or an older one of this) into this
        state. Per worker the larger count wins, so merging the same snapshot twice changes
        nothing. Returns the loops this merge newly flagged. Raises `ValueError` if damaged."""
        counts, labels, tasks, flagged = _parse_economics_snapshot(snapshot)
        with self._lock:
            for fp, workers in counts.items():
                mine = self._counts.setdefault(fp, {})
                for worker, count in workers.items():
                    mine[worker] = max(mine.get(worker, 0), count)
            for fp, label in labels.items():
                self._labels.setdefault(fp, label)
            for fp, names in tasks.items():
                self._tasks.setdefault(fp, set()).update(names)
            new: list[GlobalDoomLoop] = []
            for fp in [*flagged, *counts]:
                if fp in self._flagged:
                    continue
                if fp in flagged or self._crosses(self._counts.get(fp, {})):
                    self._flagged[fp] = None
                    new.append(self._loop(fp))
            listeners = list(self._listeners) if new else []
        for loop in new:
            for listener in listeners:
                listener(loop)
        return new

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Replace the counts and flags with a snapshot's (listeners stay)."""
        _parse_economics_snapshot(snapshot)
        with self._lock:
            self._counts.clear()
            self._labels.clear()
            self._tasks.clear()
            self._flagged.clear()
        self.merge(snapshot)


def _parse_economics_snapshot(
    snapshot: Mapping[str, Any],
) -> tuple[dict[str, dict[str, int]], dict[str, str], dict[str, set[str]], list[str]]:
    if not isinstance(snapshot, Mapping):
        raise ValueError(
            f"shared economics snapshot must be an object, got {type(snapshot).__name__}"
        )
    version = snapshot.get("version")
    if version != SNAPSHOT_VERSION:
        raise ValueError(
            f"shared economics snapshot has version {version!r}; this journeyman reads version "
            f"{SNAPSHOT_VERSION}"
        )
    try:
        counts = {
            str(fp): {str(w): int(n) for w, n in workers.items()}
            for fp, workers in snapshot.get("counts", {}).items()
        }
        labels = {str(fp): str(text) for fp, text in snapshot.get("labels", {}).items()}
        tasks = {
            str(fp): {str(t) for t in names} for fp, names in snapshot.get("tasks", {}).items()
        }
        flagged = [str(fp) for fp in snapshot.get("flagged", [])]
    except (AttributeError, TypeError, ValueError) as error:
        raise ValueError(
            f"shared economics snapshot is damaged ({error!r}); expected counts as "
            "{fingerprint: {worker: int}}, labels, tasks and flagged"
        ) from None
    return counts, labels, tasks, flagged
