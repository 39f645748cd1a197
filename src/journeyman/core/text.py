"""Cutting text to a length: the one place that decides how a cut looks.

- `clip`: the start of the text, ending in "…" when cut (at most `limit` characters).
- `one_line`: whitespace runs collapsed to one space, then clipped (for one-line displays).
- `clip_noted`: the first `limit` characters and a bracketed note of how much was cut.
- `noted_cut`: a part of a text that was cut before it got here, with the same note.
- `clip_start`: the end of the text, beginning with "…" when cut (for the tail of a log).
- `head_and_tail`: the start and the end, with a note of the cut between them (for command
  output and tool results, whose verdict is usually at the end).
"""

from __future__ import annotations

ELLIPSIS = "…"
"""What ends a clipped text (one character, so a cut text is never longer than its limit)."""


def clip(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else its start (trailing spaces dropped) + "…"."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + ELLIPSIS


def one_line(text: str, limit: int) -> str:
    """`text` on one line (each whitespace run made one space), clipped to `limit` characters."""
    return clip(" ".join(text.split()), limit)


def clip_start(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else "…" + its last `limit - 1` characters."""
    if len(text) <= limit:
        return text
    return ELLIPSIS + text[len(text) - max(0, limit - 1) :]


def clip_noted(text: str, limit: int, note: str = "{cut:,} characters cut") -> str:
    """`text` if it fits in `limit` characters, else its first `limit` characters followed by
    "… [note]"; `note` may name `{cut}` (characters left out) and `{total}` (the full length)."""
    if len(text) <= limit:
        return text
    return noted_cut(text[:limit], note.format(cut=len(text) - limit, total=len(text)))


def noted_cut(kept: str, note: str) -> str:
    """`kept`, the part shown of a longer text, followed by "… [note]" (for a text cut where
    only the part kept was ever read, e.g. a line read up to a byte limit)."""
    return f"{kept}{ELLIPSIS} [{note}]"


def head_and_tail(
    text: str, limit: int, *, head_share: float = 0.5, note: str = "characters cut"
) -> str:
    """`text` if it fits in `limit` characters, else its start and end (`head_share` of `limit`
    from the start, the rest from the end) around a line "[... N <note> ...]"."""
    if len(text) <= limit:
        return text
    head = round(limit * head_share)
    tail = limit - head
    cut = len(text) - head - tail
    end = text[len(text) - tail :] if tail else ""
    return f"{text[:head]}\n[... {cut:,} {note} ...]\n{end}"
