"""Append-only JSONL trajectory: one line per event, flushed as it happens, secrets removed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

import platformdirs

from journeyman.core.events import Event, event_to_dict
from journeyman.session.redact import Redactor

TRAJECTORY_FILE = "trajectory.jsonl"
SKIPPED_EVENTS = frozenset({"text_delta"})
"""Streaming deltas are not persisted; the full text arrives in the model_response event."""


def default_session_root() -> Path:
    """Where sessions go unless `--session-dir` or JOURNEYMAN_SESSION_DIR says otherwise."""
    override = os.environ.get("JOURNEYMAN_SESSION_DIR")
    if override:
        return Path(override)
    return Path(platformdirs.user_data_dir("journeyman")) / "sessions"


class TrajectoryWriter:
    """Writes events of one session to `<root>/<session_id>/trajectory.jsonl`.

    Each line is written whole and flushed, so a killed process leaves every completed event
    on disk and at most one partial trailing line (which `read_trajectory` ignores).
    """

    def __init__(self, root: Path, session_id: str, redactor: Redactor | None = None) -> None:
        self.directory = root / session_id
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / TRAJECTORY_FILE
        self._redact = redactor or Redactor()
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")

    def write(self, event: Event) -> None:
        if self._file is None or event.type in SKIPPED_EVENTS:
            return
        line = json.dumps(event_to_dict(event), ensure_ascii=False, default=str)
        self._file.write(self._redact(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_trajectory(path: Path) -> list[dict[str, Any]]:
    """All complete events of a trajectory file; a torn last line is skipped."""
    events = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                break
            events.append(json.loads(line))
    return events
