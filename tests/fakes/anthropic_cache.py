"""Anthropic's prompt cache, modelled closely enough to measure what a request layout earns.

The model follows the rules the Messages API documents:

- the prompt is read in cache order: tool definitions, then system blocks, then the messages'
  content blocks;
- a block carrying `cache_control` is a breakpoint; a request writes a cache entry for the
  prompt up to each of its breakpoints (at most 4 allowed), when that prefix is at least
  `min_tokens` long (1,024 for most models);
- a request reads from the cache when the prompt up to one of its breakpoints, or up to one of
  the `lookback_blocks` block boundaries before a breakpoint, is exactly a prefix an earlier
  request wrote (same model); the longest such prefix is read;
- usage reports `cache_read_input_tokens` (read), `cache_creation_input_tokens` (written past
  the part read) and `input_tokens` (the rest).

Tokens are counted as characters / `chars_per_token` of each block's JSON (a fixed ratio, not a
tokenizer). An entry is readable by every request that arrives after the one that wrote it
(the real API makes it readable once the writing response has started; the fake answers at
once). Entries never expire. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

MAX_BREAKPOINTS = 4


@dataclass(frozen=True)
class CacheReport:
    """What the cache made of one request."""

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    breakpoints: int

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


def _without_cache_control(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def prompt_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The request's prompt in cache order: (the block's canonical JSON, is a breakpoint)."""
    blocks: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, str):
        blocks.append({"type": "text", "text": system})
    elif isinstance(system, list):
        blocks.extend(system)
    for message in body.get("messages") or []:
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for part in parts or []:
            blocks.append({"role": message.get("role"), **part} if isinstance(part, dict) else part)
    out: list[tuple[str, bool]] = []
    for block in blocks:
        marked = isinstance(block, dict) and "cache_control" in block
        out.append((json.dumps(_without_cache_control(block), sort_keys=True), marked))
    return out


@dataclass
class FakePromptCache:
    """A prompt cache shared by every request to one fake server (see the module docstring)."""

    min_tokens: int = 1024
    """Shortest prefix the cache stores."""
    chars_per_token: int = 4
    lookback_blocks: int = 20
    """Block boundaries before a breakpoint also checked for an earlier entry."""
    reports: list[CacheReport] = field(default_factory=list)
    """One per request, in arrival order."""
    _entries: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def account(self, body: Any) -> CacheReport:
        """Read and write the cache for one request body; return its usage split."""
        body = body if isinstance(body, dict) else {}
        blocks = prompt_blocks(body)
        keys: list[str] = []
        ends: list[int] = []  # tokens up to and including each block
        digest = hashlib.sha256(str(body.get("model")).encode())
        chars = 0
        for text, _ in blocks:
            digest.update(b"\x00" + text.encode())
            keys.append(digest.hexdigest())
            chars += len(text)
            ends.append(-(-chars // self.chars_per_token))
        total = ends[-1] if ends else 0
        breakpoints = [i for i, (_, marked) in enumerate(blocks) if marked][:MAX_BREAKPOINTS]
        with self._lock:
            read_at = -1
            for point in breakpoints:
                for index in range(point, max(-1, point - self.lookback_blocks - 1), -1):
                    if keys[index] in self._entries and ends[index] >= self.min_tokens:
                        read_at = max(read_at, index)
                        break
            read = ends[read_at] if read_at >= 0 else 0
            written_to = read
            for point in breakpoints:
                if ends[point] >= self.min_tokens:
                    self._entries.add(keys[point])
                    if point > read_at:
                        written_to = max(written_to, ends[point])
            report = CacheReport(
                input_tokens=total - written_to,
                cache_read_tokens=read,
                cache_write_tokens=written_to - read,
                breakpoints=len(breakpoints),
            )
            self.reports.append(report)
        return report

    def totals(self) -> CacheReport:
        """The sums over every request so far."""
        with self._lock:
            return CacheReport(
                input_tokens=sum(r.input_tokens for r in self.reports),
                cache_read_tokens=sum(r.cache_read_tokens for r in self.reports),
                cache_write_tokens=sum(r.cache_write_tokens for r in self.reports),
                breakpoints=sum(r.breakpoints for r in self.reports),
            )
