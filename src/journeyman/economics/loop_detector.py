"""Doom-loop detection: the same tool call, with the same outcome, repeated within a short window.

A call's signature is its tool name plus its arguments as canonical JSON (sorted keys). When the
caller also passes a digest of the call's result, the digest becomes part of the signature, so
re-running a test command after an edit (same arguments, new output) is not mistaken for a loop.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_THRESHOLD = 3
"""Identical calls inside the window that count as a loop."""
DEFAULT_WINDOW = 20
"""How many of the most recent signatures are remembered."""


def call_signature(name: str, args: Mapping[str, Any]) -> str:
    """The canonical identity of one tool call: `name` followed by `args` as sorted-key JSON.

    Values JSON cannot encode are rendered with `str()`, so the function never raises on them.
    This is the one fingerprint of a call in journeyman; other modules should call it.
    """
    return name + json.dumps(dict(args), sort_keys=True, default=str)


def loop_signature(name: str, args: Mapping[str, Any], result_hash: str | None = None) -> str:
    """`call_signature` extended with the result digest when one is known."""
    signature = call_signature(name, args)
    return signature if result_hash is None else f"{signature}#{result_hash}"


def result_digest(text: str) -> str:
    """A short stable digest of a tool result's text, for `LoopDetector.record(result_hash=...)`."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True)
class LoopCheck:
    """The verdict for one call: whether it repeats often enough to be a loop, and how often."""

    is_loop: bool
    count: int
    """Occurrences of this signature in the window, the checked call included."""
    tool_name: str
    message: str
    """Text for a nudge when `is_loop`; empty otherwise."""
    signature: str = ""
    """The signature that was counted (tool, arguments and result digest when given)."""


class LoopDetector:
    """Counts signatures over the last `window` recorded calls; `threshold` repeats is a loop."""

    def __init__(self, threshold: int = DEFAULT_THRESHOLD, window: int = DEFAULT_WINDOW) -> None:
        if threshold < 1:
            raise ValueError(f"LoopDetector: threshold must be at least 1, got {threshold}")
        if window < threshold:
            raise ValueError(
                f"LoopDetector: window ({window}) is smaller than threshold ({threshold}), "
                "so no loop could ever be detected; use window >= threshold"
            )
        self.threshold = threshold
        self.window = window
        self._recent: deque[str] = deque()
        self._counts: Counter[str] = Counter()

    def record(
        self, name: str, args: Mapping[str, Any], result_hash: str | None = None
    ) -> LoopCheck:
        """Remember one call (and its result digest, if known) and report whether it loops."""
        signature = loop_signature(name, args, result_hash)
        self._recent.append(signature)
        self._counts[signature] += 1
        while len(self._recent) > self.window:
            oldest = self._recent.popleft()
            self._counts[oldest] -= 1
            if self._counts[oldest] <= 0:
                del self._counts[oldest]
        return self._verdict(name, signature, self._counts[signature], result_hash is not None)

    def peek(self, name: str, args: Mapping[str, Any], result_hash: str | None = None) -> LoopCheck:
        """What `record` would answer for this call, without remembering it.

        Useful before running a tool, when no result digest exists yet.
        """
        signature = loop_signature(name, args, result_hash)
        count = self._counts[signature] + 1
        if len(self._recent) >= self.window and self._recent[0] == signature:
            count -= 1  # recording would push this very signature's oldest copy out
        return self._verdict(name, signature, count, result_hash is not None)

    def reset(self) -> None:
        """Forget every recorded call (after compaction, a new task, or a user intervention)."""
        self._recent.clear()
        self._counts.clear()

    @property
    def counts(self) -> dict[str, int]:
        """A copy of the signature counts currently in the window (no zero entries)."""
        return dict(self._counts)

    @property
    def recent(self) -> tuple[str, ...]:
        """The signatures in the window, oldest first."""
        return tuple(self._recent)

    def _verdict(self, name: str, signature: str, count: int, with_result: bool) -> LoopCheck:
        is_loop = count >= self.threshold
        message = ""
        if is_loop:
            same = "the same arguments and the same result" if with_result else "the same arguments"
            message = (
                f"Repeated call detected: `{name}` ran {count} times with {same} "
                f"within the last {self.window} tool calls."
            )
        return LoopCheck(
            is_loop=is_loop, count=count, tool_name=name, message=message, signature=signature
        )
