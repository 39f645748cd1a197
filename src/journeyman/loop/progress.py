"""Fingerprints that tell whether a turn moved the run forward (the no-progress guard)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.economics.loop_detector import call_signature


def call_fingerprint(call: ToolCall) -> str:
    """The loop detector's call signature (name + sorted-key JSON args), hashed."""
    return hashlib.sha256(
        call_signature(call.name, call.arguments).encode("utf-8", "surrogatepass")
    ).hexdigest()


def _digest(kind: str, text: str) -> str:
    return hashlib.sha256(f"{kind}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


class ProgressTracker:
    """A turn is productive when it adds a tool call, a tool result or assistant text never
    seen before in this run. Only digests are kept, so memory stays small on long runs."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self.unproductive_streak = 0

    def observe(self, text: str, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> bool:
        """Record one turn; returns whether it was productive and updates the streak."""
        digests = [call_fingerprint(c) for c in calls]
        digests += [_digest("result", f"{r.name}\0{r.content}") for r in results]
        if text.strip():
            digests.append(_digest("text", text.strip()))
        new = [d for d in digests if d not in self._seen]
        self._seen.update(new)
        productive = bool(new)
        self.unproductive_streak = 0 if productive else self.unproductive_streak + 1
        return productive
