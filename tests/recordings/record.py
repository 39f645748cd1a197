"""Records the sessions in this folder again: `python -m tests.recordings.record`.

Each recording is a real `journeyman run` through the CLI and the OpenAI SDK against the fake
server on 127.0.0.1, with a scripted model: `start/` is the workspace before the run,
`session.jsonl` the session as `journeyman sessions export` writes it. `test_recordings.py`
replays every one on each CI run and expects every tool result to be the same; re-record only
when a tool's output changes on purpose, and read the diff of the new `session.jsonl`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env

HERE = Path(__file__).parent

Call = tuple[str, dict[str, Any]]

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST_CALC = (
    "import unittest\n\nfrom calc import add, mul\n\n\nclass CalcTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n"
)
README = "# calc\n\nA tiny calculator. TODO: add division.\n"

RECORDINGS: dict[str, tuple[dict[str, str], list[Call]]] = {
    "fix-and-test": (
        {"calc.py": CALC, "test_calc.py": TEST_CALC, "README.md": README},
        [
            ("list_files", {"path": "."}),
            ("read_file", {"path": "calc.py"}),
            ("run_command", {"command": "python3 -m unittest -q test_calc 2>&1 | tail -3"}),
            ("grep", {"pattern": "return a", "path": "."}),
            ("edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}),
            ("run_command", {"command": "python3 -m unittest -q test_calc 2>&1 | tail -1"}),
            ("read_file", {"path": "calc.py", "offset": 4, "limit": 2}),
            ("finish", {"summary": "add now adds; both tests pass"}),
        ],
    ),
    "explore-and-recover": (
        {"calc.py": CALC, "README.md": README, "pkg/__init__.py": "", "pkg/util.py": "X = 1\n"},
        [
            ("glob", {"pattern": "**/*.py"}),
            ("read_file", {"path": "missing.py"}),
            ("read_file", {"path": "README.md"}),
            ("edit_file", {"path": "README.md", "old_string": "no such text", "new_string": "x"}),
            ("write_file", {"path": "pkg/div.py", "content": "def div(a, b):\n    return a / b\n"}),
            ("run_command", {"command": "python3 -c 'from pkg.div import div; print(div(1, 0))'"}),
            ("edit_file", {"path": "pkg/div.py", "old_string": "return a / b",
                           "new_string": "return a / b if b else None"}),
            ("run_command", {"command": "python3 -c 'from pkg.div import div; print(div(1, 0))'"}),
            ("grep", {"pattern": "def ", "path": "pkg"}),
            ("run_command", {"command": "ls -R pkg | sort; exit 3"}),
            ("finish", {"summary": "added pkg/div.py"}),
        ],
    ),
}  # fmt: skip


def record(name: str, files: dict[str, str], calls: list[Call], server: FakeOpenAIServer) -> None:
    with tempfile.TemporaryDirectory() as temp:
        ws = Path(temp) / "ws"
        for path, text in files.items():
            (ws / path).parent.mkdir(parents=True, exist_ok=True)
            (ws / path).write_text(text)
        target = HERE / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(ws, target / "start")
        sessions = Path(temp) / "sessions"
        env = clean_env(OPENAI_API_KEY="sk-test", JOURNEYMAN_SESSION_DIR=str(sessions))
        server.enqueue(*(reply(tool_calls=[call]) for call in calls))
        done = subprocess.run(
            [sys.executable, "-m", "journeyman", "run", "--yes", f"the {name} task", "-w",
             str(ws), "--provider", "openai", "--model", "recorded", "--base-url",
             server.base_url, "--no-verify", "--sandbox", "local", "-o", "json"],
            env=env, capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        session = json.loads(done.stdout)["session_id"]
        subprocess.run(
            [sys.executable, "-m", "journeyman", "sessions", "export", session, "-o",
             str(target / "session.jsonl")],
            env=env, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip


def main() -> None:
    with FakeOpenAIServer() as server:
        for name, (files, calls) in RECORDINGS.items():
            record(name, files, calls, server)
            print(f"recorded {name}")


if __name__ == "__main__":
    main()
