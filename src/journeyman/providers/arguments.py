"""Tool calls on the way in and out, the same for every adapter.

In: reading the JSON arguments of a call as the model wrote them, whatever they hold (not
JSON, not an object, or nested so deeply that decoding or storing them would exhaust the
interpreter's recursion limit). Out: a history in which every call has its result.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from journeyman.core.messages import Message, with_paired_results

log = logging.getLogger(__name__)

MAX_NESTING = 64
"""Deepest nesting of lists and objects accepted in tool arguments; no tool schema needs more."""
TOO_DEEP = f"they are nested more than {MAX_NESTING} levels deep"


def nesting_depth(value: Any, limit: int = MAX_NESTING) -> int:
    """How deeply lists and dicts nest in `value`, counted without recursion up to `limit + 1`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def decode_json(text: str) -> tuple[Any, str | None]:
    """(value, None) for JSON text of bounded nesting, else (None, what is wrong with it).

    A raw newline or tab inside a string is taken as written: strict JSON wants it escaped,
    but the meaning is plain, and small local models often write one.
    """
    try:
        value = json.loads(text, strict=False)
    except RecursionError:
        return None, TOO_DEEP
    except ValueError as exc:
        return None, f"they are not valid JSON ({exc})"
    if nesting_depth(value) > MAX_NESTING:
        return None, TOO_DEEP
    return value, None


def check_arguments(value: Any) -> tuple[dict[str, Any], str | None]:
    """(arguments, None) when `value` is a usable argument object, else ({}, the problem)."""
    if not isinstance(value, dict):
        return {}, f"they must be a JSON object, not {_json_kind(value)}"
    if nesting_depth(value) > MAX_NESTING:
        return {}, TOO_DEEP
    return value, None


def _json_kind(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words ("a string", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def decode_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Arguments from JSON text ("" means none): (arguments, None) or ({}, the problem)."""
    if not text.strip():
        return {}, None
    value, problem = decode_json(text)
    if problem is not None:
        return {}, problem
    return check_arguments(value)


def paired_history(messages: Sequence[Message]) -> list[Message]:
    """`messages` as sent to a model: every tool call answered (see `with_paired_results`).

    The loop already answers every call; this is the last line of defence against a history
    (an old session, a custom mode) that does not, which strict servers reject with a 400.
    """
    paired, fixes = with_paired_results(messages)
    warn_unpaired(fixes)
    return paired


def warn_unpaired(fixes: int) -> None:
    """Say that `fixes` results had to be added or dropped to pair a history sent to a model."""
    if fixes:
        log.warning(
            "the conversation had %d tool call(s) without their result (or results without "
            "their call); sent with error results in their place",
            fixes,
        )
