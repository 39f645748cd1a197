"""Every recorded session in this folder, replayed through the CLI on each CI run: the tools
and the loop must still give every recorded result on the recorded starting tree (a change to
a tool's output shows up here as the step that differs). Re-record with
`python -m tests.recordings.record` only when an output changes on purpose."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.cli import clean_env, journeyman

HERE = Path(__file__).parent
RECORDINGS = sorted(p.name for p in HERE.iterdir() if (p / "session.jsonl").is_file())


def imported(name: str, tmp_path: Path) -> tuple[str, Path, dict[str, str]]:
    ws = tmp_path / "ws"
    shutil.copytree(HERE / name / "start", ws)
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"))
    done = journeyman(
        "sessions", "import", str(HERE / name / "session.jsonl"), "-w", str(ws), env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), ws, env


def recorded_calls(name: str) -> int:
    lines = (HERE / name / "session.jsonl").read_text().splitlines()
    messages = [json.loads(line) for line in lines if '"kind": "message"' in line]
    return sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")


def test_there_are_recordings() -> None:
    assert len(RECORDINGS) >= 2


@pytest.mark.parametrize("name", RECORDINGS)
def test_a_recording_replays_every_step_as_recorded(name: str, tmp_path: Path) -> None:
    session, ws, env = imported(name, tmp_path)
    done = journeyman("replay", session, "-w", str(ws), "--yes", "-o", "json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["differences"] == [] and report["reproduced"] is True
    assert report["steps"] == recorded_calls(name) > 5


def test_a_changed_file_is_named_at_the_first_step_that_sees_it(tmp_path: Path) -> None:
    session, ws, env = imported("fix-and-test", tmp_path)
    (ws / "calc.py").write_text((ws / "calc.py").read_text().replace("a * b", "a ** b"))
    done = journeyman("replay", session, "-w", str(ws), "--yes", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "step 2 (read_file) differs:" in done.stdout and "a ** b" in done.stdout
    assert "step 3 " not in done.stdout  # it stops at the first difference
