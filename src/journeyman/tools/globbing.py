"""Glob patterns: '*', '?', '[...]', '**' and '{a,b}' translated to regular expressions, and
ripgrep-style `--glob` matchers."""

from __future__ import annotations

import re
from collections.abc import Callable

import pathspec


def expand_braces(pattern: str, *, most: int = 256) -> list[str]:
    """Expand `{a,b}` alternatives (nested ones too) into separate patterns."""
    depth = 0
    open_at = -1
    for i, char in enumerate(pattern):
        if char == "{":
            if depth == 0:
                open_at = i
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                inner = pattern[open_at + 1 : i]
                options = _split_top_level(inner)
                if len(options) < 2:
                    continue
                out: list[str] = []
                for option in options:
                    for rest in expand_braces(pattern[:open_at] + option + pattern[i + 1 :]):
                        out.append(rest)
                        if len(out) >= most:
                            return out
                return out
    return [pattern]


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        current += char
    parts.append(current)
    return parts


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob ('*', '?', '[...]', '**', '{a,b}') to a regex over '/'-separated paths."""
    return re.compile("(?:" + "|".join(_translate(p) for p in expand_braces(pattern)) + r")\Z")


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**", i):
            at_start = i == 0 or pattern[i - 1] == "/"
            if at_start and pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            first = i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1
            end = pattern.find("]", first + 1)  # a ']' right after '[' is a member
            if end == -1:
                out.append(re.escape(char))
            else:
                negate = "^" if first == i + 2 else ""
                members = "".join(c if c == "-" else re.escape(c) for c in pattern[first:end])
                out.append(f"[{negate}{members}]")
                i = end + 1
                continue
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def path_glob_matcher(glob: str) -> Callable[[str], bool]:
    """Matcher with ripgrep's `--glob` semantics for one glob (gitignore-style, '!' negates).

    Returns a function of a workspace-relative path that says whether the glob matches it,
    ignoring a leading '!'.
    """
    lines = expand_braces(glob.removeprefix("!"))
    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return lambda rel: bool(spec.match_file(rel))
