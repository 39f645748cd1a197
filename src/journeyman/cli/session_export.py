"""What `journeyman sessions export` writes: one session in a format (jsonl, atif, mini-traj), or
one file per task of a batch or eval output folder (`--batch OUT`)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from journeyman.core.display import printable_json
from journeyman.session.store import SessionStore

if TYPE_CHECKING:
    from atif import Trajectory


@dataclass(frozen=True)
class ExportFormat:
    """One format `sessions export` writes."""

    suffix: str
    """What a file of this format is named with (after the session id or the task id)."""
    write: Callable[[SessionStore, str, IO[str]], str]
    """Writes the session; returns what was written, for the line on stderr."""


def _jsonl(store: SessionStore, session_id: str, out: IO[str]) -> str:
    from journeyman.session.trajectory import export_jsonl

    return f"{export_jsonl(store, session_id, out)} lines"


def _atif(store: SessionStore, session_id: str, out: IO[str]) -> str:
    from journeyman.session.atif_export import export_atif

    trajectory = export_atif(store, session_id, out)
    embedded = _count_embedded(trajectory.subagent_trajectories or [])
    return f"an ATIF trajectory of {len(trajectory.steps)} steps" + (
        f" with {embedded} subagent trajector{'y' if embedded == 1 else 'ies'} embedded"
        if embedded
        else ""
    )


def _count_embedded(children: list[Trajectory]) -> int:
    return sum(1 + _count_embedded(child.subagent_trajectories or []) for child in children)


def _mini(store: SessionStore, session_id: str, out: IO[str]) -> str:
    from journeyman.session.mini_export import export_mini

    data = export_mini(store, session_id, out)
    return f"a mini-swe-agent trajectory of {len(data['messages'])} messages"


FORMATS: dict[str, ExportFormat] = {
    "jsonl": ExportFormat(".jsonl", _jsonl),
    "atif": ExportFormat(".json", _atif),
    "mini-traj": ExportFormat(".traj.json", _mini),
}
TRAJECTORIES_DIR = "trajectories"
"""Where `--batch OUT` writes its files unless `-o` names a folder: OUT/trajectories."""


def rendered(store: SessionStore, session_id: str, format_name: str) -> tuple[str, str]:
    """(the session in that format, what it holds); built whole before anything is written, so
    a failure leaves no half-written file."""
    buffer = io.StringIO()
    said = FORMATS[format_name].write(store, session_id, buffer)
    return terminal_safe(buffer.getvalue()), said


def terminal_safe(text: str) -> str:
    """JSON text (a document or JSON lines) with the characters `json.dumps` leaves raw (DEL,
    C1 controls such as U+009B, which a terminal takes for an escape sequence, format
    characters) written as `\\uXXXX`: the same JSON values, safe to print. Lines that hold
    none are left as they are (the check is per line: a long export is mostly those)."""
    return "\n".join(
        line if line.isprintable() else printable_json(line) for line in text.split("\n")
    )


_UNSAFE = re.compile(r"[^A-Za-z0-9._:@+-]+")
MAX_NAME = 120


def task_file_name(task_id: str, taken: set[str]) -> str:
    """A file name (without suffix) for a task: its id where it is made of what a batch allows
    in one (letters, digits, `._:@+-`: SWE-bench's `django__django-11099` is), else the id with
    every other character made `_` (a results file is data); never hidden, never `..`, never
    one already `taken` (a `-2`, `-3` ... is added)."""
    name = _UNSAFE.sub("_", task_id).strip(".")[:MAX_NAME] or "task"
    candidate, number = name, 1
    while candidate.lower() in taken:
        number += 1
        candidate = f"{name}-{number}"
    taken.add(candidate.lower())
    return candidate


def output_path(output: Path, session_id: str, format_name: str) -> Path:
    """`output`, or `<session id><suffix>` inside it when it is a folder."""
    if output.is_dir():
        return output / f"{session_id}{FORMATS[format_name].suffix}"
    return output
