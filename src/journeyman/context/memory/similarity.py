"""Error signatures and near-duplicate detection over memory entries."""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

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
