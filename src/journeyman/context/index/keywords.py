"""Keywords and file paths picked out of a goal or an error, to rank files by."""

from __future__ import annotations

import re

from journeyman.context.index.config import word_set

STOP_WORDS = word_set(
    """
    a about above after again against all also an and any are as at be because been before
    being below between both but by can cannot could did do does doing done down during each
    few for from further had has have having here how however if in into is it its itself just
    me more most much must my no nor not now of off on once only or other our out over own
    please same should so some still such than that the their them then there these they this
    those through to too under until up us very was we were what when where which while who
    whom why will with within without would yet you your
    add added adds change changed changes code correct currently does doesn error errors fail
    failed failing fails file files fix fixed fixes fixing function functions get gets got
    implement implemented issue line lines make makes method methods need needs new now
    problem return returns run running seems test tests true false none null use used uses
    using value values want work works wrong instead
    traceback recent call last most self def class import print raise
    """
)
"""Words too common in tasks, errors and code to narrow a search."""

_PATHLIKE = re.compile(r"(?:[\w.-]+/)+[\w.-]+|[\w-]+\.[A-Za-z]{1,5}\b")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_BACKTICKED = re.compile(r"`([^`\n]{2,80})`")
_CODE_SUFFIXES = word_set(
    "py pyi js mjs cjs jsx ts tsx go rs java kt c h cc cpp hpp cs rb php swift scala sh md rst "
    "toml yaml yml json cfg ini txt html css sql"
)


def extract_keywords(text: str, max_keywords: int = 8) -> list[str]:
    """The words of `text` most likely to find the relevant code, best first.

    Kept: backticked spans, file names (from paths), identifiers (dotted names kept whole)
    of three or more characters that are not stop words. Each occurrence adds a weight that
    grows with how code-like the word is (backticks, file names, snake_case, CamelCase,
    dotted, exception names, digits); words are ranked by total weight, then by first
    appearance. Duplicates are merged case-insensitively, keeping the first spelling.
    """
    scores: dict[str, float] = {}
    first: dict[str, int] = {}
    spelled: dict[str, str] = {}

    def add(word: str, weight: float, position: int) -> None:
        word = word.strip(".")
        key = word.lower()
        if len(word) < 3 or key in STOP_WORDS or word.isdigit():
            return
        spelled.setdefault(key, word)
        first.setdefault(key, position)
        scores[key] = scores.get(key, 0.0) + weight

    for match in _BACKTICKED.finditer(text):
        span = match.group(1).strip()
        if " " not in span:
            add(span.rsplit("/", 1)[-1] if "/" in span else span, 4.0, match.start())
    consumed: list[tuple[int, int]] = []
    for match in _PATHLIKE.finditer(text):
        name = match.group(0).rstrip(".").rsplit("/", 1)[-1]
        suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
        if suffix in _CODE_SUFFIXES:
            add(name, 3.0, match.start())
            consumed.append(match.span())
    for match in _IDENTIFIER.finditer(text):
        if any(start <= match.start() < end for start, end in consumed):
            continue
        word = match.group(0)
        weight = 1.0
        if "_" in word.strip("_") or "." in word:
            weight += 1.5
        if any(c.isupper() for c in word[1:]) and any(c.islower() for c in word):
            weight += 1.5  # CamelCase or camelCase
        if word.endswith(("Error", "Exception", "Warning")):
            weight += 1.0
        if any(c.isdigit() for c in word):
            weight += 0.5
        add(word, weight, match.start())
    ranked = sorted(scores, key=lambda k: (-scores[k], first[k]))
    return [spelled[k] for k in ranked[:max_keywords]]


_MENTIONED_PATH = re.compile(r"[\w./\\-]*[\w-]\.[A-Za-z]{1,5}\b")


def mentioned_paths(text: str) -> list[str]:
    """Path-like strings in `text` (tracebacks, compiler errors), '/'-separated, in order."""
    out = []
    for match in _MENTIONED_PATH.finditer(text):
        path = match.group(0).replace("\\", "/")
        if path.rsplit(".", 1)[-1].lower() in _CODE_SUFFIXES:
            out.append(path)
    return list(dict.fromkeys(out))
