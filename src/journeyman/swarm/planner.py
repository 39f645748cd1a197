"""The planning turn of a swarm: one model call splits the goal into subtasks, each with the
files it expects to touch, answered as JSON and read leniently (code fences, prose around the
object, a bare list). A plan that still cannot be read gets one retry that quotes the problem;
a second failure is a `PlanError`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_SUBTASKS = 8
"""Most subtasks a plan may have (more is read as a malformed plan)."""

PLANNER_PROMPT = """\
You plan work for a team of software engineers who will work in parallel, each in a separate \
copy of one git repository; their changes are merged afterwards. Split the goal you are given \
into independent subtasks, at most {max_subtasks}. Give two subtasks the same file only when \
it cannot be avoided: separate files merge cleanly, the same lines do not. Each subtask must \
make sense on its own, since its engineer sees only that subtask and the goal.

Answer with one JSON object and nothing else, in this shape:
{{"subtasks": [{{"title": "short name", "task": "what to do, in full", \
"files": ["path/one.py", "path/two.py"]}}]}}
"files" lists the paths, relative to the repository root, that the subtask expects to create \
or change."""

RETRY_NOTE = """\
Your previous answer could not be used as a plan: {problem}
Answer again with only the JSON object described above."""


class PlanError(Exception):
    """The model's plan could not be read, even after one retry."""

    def __init__(self, message: str, reply: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.reply = reply


class _SubtaskModel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    task: str = Field(min_length=1)
    """What the worker must do."""
    title: str = ""
    """A short name for progress lines."""
    files: list[str] = []
    """Paths the subtask expects to create or change."""


@dataclass(frozen=True)
class Subtask:
    """One worker's share of the goal."""

    worker_id: str
    """`w1`, `w2`, ... in plan order (merges follow this order)."""
    title: str
    task: str
    files: tuple[str, ...]


def _candidates(text: str) -> list[str]:
    """Pieces of `text` that may be the JSON plan, most likely first."""
    stripped = text.strip()
    found = [stripped]
    found += re.findall(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            found.append(text[start : end + 1])
    return found


def parse_plan(text: str, *, max_subtasks: int = MAX_SUBTASKS) -> list[Subtask]:
    """The subtasks of a planning reply; raises `PlanError` saying what is wrong with it."""
    data: Any = None
    for candidate in _candidates(text):
        try:
            data = json.loads(candidate)
            break
        except ValueError:
            continue
    if data is None:
        raise PlanError("the reply holds no JSON object", text)
    items = data.get("subtasks") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise PlanError('the JSON has no non-empty "subtasks" list', text)
    if len(items) > max_subtasks:
        raise PlanError(f"it has {len(items)} subtasks; at most {max_subtasks} are allowed", text)
    subtasks = []
    for number, item in enumerate(items, start=1):
        if isinstance(item, str):
            item = {"task": item}
        try:
            parsed = _SubtaskModel.model_validate(item)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise PlanError(f"subtask {number}: {where}: {first['msg']}", text) from None
        files = tuple(dict.fromkeys(f.strip().lstrip("./") for f in parsed.files if f.strip()))
        title = parsed.title.strip() or parsed.task.strip().splitlines()[0][:60]
        subtasks.append(Subtask(f"w{number}", title, parsed.task.strip(), files))
    return subtasks


def planner_system_prompt(files: list[str], *, max_subtasks: int, limit: int = 300) -> str:
    """The planner's instructions and the repository's files (the task is the goal itself)."""
    shown = files[:limit]
    more = f"\n... and {len(files) - limit} more" if len(files) > limit else ""
    listing = "\n".join(shown) + more
    prompt = PLANNER_PROMPT.format(max_subtasks=max_subtasks)
    return f"{prompt}\n\nFiles in the repository:\n{listing or '(none)'}"
