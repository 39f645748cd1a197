"""kill -9 at a random step, then `journeyman resume` (reliability scenario 2).

`CrashLab` runs a scripted `journeyman run` against the fake OpenAI server, which answers by
step number (a repeated step gets the same reply), once without interruption as the reference.
`CrashLab.trial()` then starts the same run again, kills it with SIGKILL after a random number
of tool results, resumes it and checks what the user relies on:

- the resumed run completes;
- the files equal those of the uninterrupted run (nothing lost, nothing done twice);
- `journeyman diff` lists every changed file;
- `journeyman undo --all` restores the original tree byte for byte;
- the first request after the resume is byte-identical to the one the uninterrupted run sent
  at that step.

Used by tests/reliability/test_crash_resume.py (a few trials) and bench/reliability.py (more).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, Reply, reply, tool_call
from tests.support.cli import clean_env, jm, snapshot

STEPS = 30


def original_tree(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "notes.md").write_text("".join(f"slot {i}\n" for i in range(STEPS)))
    (root / "keep.txt").write_text("untouched\n")


def step_reply(index: int) -> Reply:
    """The reply of step `index`: a write, an edit or a read, then `finish`."""
    if index >= STEPS:
        return reply(tool_calls=[tool_call("finish", {"summary": "all steps done"}, id="fin")])
    if index % 3 == 0:
        call = tool_call(
            "write_file", {"path": f"gen/f{index}.txt", "content": f"{index}\n"}, id=f"c{index}"
        )
    elif index % 3 == 1:
        call = tool_call(
            "edit_file",
            {"path": "notes.md", "old_string": f"slot {index}\n", "new_string": f"done {index}\n"},
            id=f"c{index}",
        )
    else:
        call = tool_call("read_file", {"path": "notes.md"}, id=f"c{index}")
    return reply(f"step {index}", tool_calls=[call])


def step_of(request: RecordedRequest) -> int:
    """The step a request asks for: the number of assistant turns it already holds."""
    return sum(1 for m in request.json["messages"] if m["role"] == "assistant")


def by_step(request: RecordedRequest) -> Reply:
    return step_reply(step_of(request))


@dataclass
class CrashOutcome:
    trial: int
    killed_after: int
    """Tool results seen before the kill."""
    resumed_at: int = -1
    """The step of the first request after the resume."""
    problems: list[str] = field(default_factory=list)
    """What went wrong; empty when the trial passed every check."""
    crashed: bool = False
    """resume (or diff/undo) exited with an error."""
    data_lost: bool = False
    """The files after the resume differ from the uninterrupted run's, or undo did not restore
    the original tree."""


class CrashLab:
    """The fake server, the reference run and a scratch folder; use as a context manager."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.workspace = root / "ws"
        self.rng = random.Random(seed)
        self.server = FakeOpenAIServer(default=by_step)
        self.env: dict[str, str] = {}
        self.common: list[str] = []
        self.before: dict[str, bytes] = {}
        self.expected: dict[str, bytes] = {}
        self.reference: dict[int, bytes] = {}

    def __enter__(self) -> Self:
        self.server.start()
        self.env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=self.server.base_url)
        self.common = [
            *("-w", str(self.workspace), "--model", "gpt-4.1-mini", "--max-iterations", "100"),
        ]
        original_tree(self.workspace)
        self.before = snapshot(self.workspace)
        done = jm(
            *("run", "--yes", "--no-verify", "work through the steps", *self.common),
            *("--session-dir", str(self.root / "ref"), "-o", "json"),
            env=self.env,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the uninterrupted reference run failed: {done.stderr}")
        self.expected = snapshot(self.workspace)
        self.reference = {step_of(r): r.raw_body for r in self.server.requests}
        if len(self.reference) != STEPS + 1:
            raise RuntimeError(f"the reference run sent {len(self.reference)} distinct steps")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.stop()

    def trial(self, number: int) -> CrashOutcome:
        shutil.rmtree(self.workspace)
        original_tree(self.workspace)
        sessions = self.root / f"s{number}"
        kill_after = self.rng.randint(1, STEPS - 1)
        proc = subprocess.Popen(
            [
                *(
                    sys.executable,
                    "-m",
                    "journeyman",
                    "run",
                    "--yes",
                    "--no-verify",
                    "work through the steps",
                ),
                *self.common,
                *("--session-dir", str(sessions), "-o", "stream-json"),
            ],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:
            if json.loads(line)["type"] == "tool_result":
                seen += 1
                if seen >= kill_after:
                    break
        time.sleep(self.rng.uniform(0, 0.02))  # land anywhere inside the next step
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        outcome = CrashOutcome(number, seen)

        where = ("--session-dir", str(sessions))
        resume_key = f"sk-test-resume-{number}"
        # the resume's requests are told apart by their key: the killed process's last request
        # (cut short by the kill, or whole) may be recorded by the server after this point
        resumed = jm(
            "resume", "--last", *self.common, *where, "-o", "json",
            env={**self.env, "OPENAI_API_KEY": resume_key},
        )  # fmt: skip
        if resumed.returncode != 0:
            outcome.crashed = True
            outcome.problems.append(f"resume exited {resumed.returncode}: {resumed.stderr[-300:]}")
            return outcome
        result = json.loads(resumed.stdout)
        if result["finish_reason"] != "completed":
            outcome.problems.append(f"resume finished with {result['finish_reason']}")
        first = next(
            r
            for r in self.server.requests
            if r.headers.get("authorization") == f"Bearer {resume_key}"
        )
        outcome.resumed_at = step_of(first)
        if first.raw_body != self.reference[outcome.resumed_at]:
            outcome.problems.append("the first request after the resume differs")
        if snapshot(self.workspace) != self.expected:
            outcome.data_lost = True
            outcome.problems.append("files differ from the uninterrupted run")

        session = result["session_id"]
        diff = jm("diff", "--session", session, *where, env=self.env)
        if diff.returncode != 0:
            outcome.crashed = True
            outcome.problems.append(f"diff exited {diff.returncode}")
        changed = {k for k in self.expected if self.before.get(k) != self.expected[k]}
        missing = sorted(p for p in changed if f"b/{p}" not in diff.stdout)
        if missing:
            outcome.problems.append(f"missing from diff: {missing}")
        undo = jm("undo", "--all", "--session", session, *where, env=self.env)
        if undo.returncode != 0:
            outcome.crashed = True
            outcome.problems.append(f"undo exited {undo.returncode}: {undo.stderr[-300:]}")
        if snapshot(self.workspace) != self.before:
            outcome.data_lost = True
            outcome.problems.append("undo did not restore the tree")
        return outcome
