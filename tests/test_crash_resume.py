"""kill -9 at a random step, then `journeyman resume`: nothing is lost.

Each trial starts a scripted `journeyman run` (against the fake OpenAI server, which answers by
step number so a repeated step gets the same reply), kills it with SIGKILL after a random number
of tool results, resumes it, and checks that the run completes, the files equal those of an
uninterrupted run, `journeyman diff` lists every changed file, `journeyman undo --all` restores
the original tree byte for byte, and the first request after the resume is byte-identical to
the one the uninterrupted run sent at that step.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, Reply, reply, tool_call

STEPS = 30
TRIALS = int(os.environ.get("JOURNEYMAN_CRASH_TRIALS", "20"))
SEED = 20261122


def original_tree(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "notes.md").write_text("".join(f"slot {i}\n" for i in range(STEPS)))
    (root / "keep.txt").write_text("untouched\n")


def step_reply(index: int) -> Reply:
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


def by_step(request: RecordedRequest) -> Reply:
    messages = request.json["messages"]
    return step_reply(sum(1 for m in messages if m["role"] == "assistant"))


def step_of(request: RecordedRequest) -> int:
    return sum(1 for m in request.json["messages"] if m["role"] == "assistant")


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def jm(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "journeyman", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
@pytest.mark.timeout(1200)  # each trial starts four interpreters; 20 trials exceed the default
def test_kill_9_and_resume_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    ws = tmp_path / "ws"
    with FakeOpenAIServer() as server:
        server.default = by_step
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "ANTHROPIC_", "JOURNEYMAN_"))
            or k == "JOURNEYMAN_CACHE_DIR"
        }
        env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url)
        common = ["-w", str(ws), "--model", "gpt-4.1-mini", "--max-iterations", "100"]

        original_tree(ws)
        before = snapshot(ws)
        done = jm(
            "run",
            "--yes",
            "work through the steps",
            *common,
            "--session-dir",
            str(tmp_path / "ref"),
            "-o",
            "json",
            env=env,
        )
        assert done.returncode == 0, done.stderr
        expected_tree = snapshot(ws)
        reference: dict[int, bytes] = {step_of(r): r.raw_body for r in server.requests}
        assert len(reference) == STEPS + 1

        outcomes: list[dict[str, Any]] = []
        for trial in range(TRIALS):
            shutil.rmtree(ws)
            original_tree(ws)
            sessions = tmp_path / f"s{trial}"
            kill_after = rng.randint(1, STEPS - 1)
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "journeyman",
                    "run",
                    "--yes",
                    "work through the steps",
                    *common,
                    "--session-dir",
                    str(sessions),
                    "-o",
                    "stream-json",
                ],
                env=env,
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
            time.sleep(rng.uniform(0, 0.02))  # land anywhere inside the next step
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()

            sent_before = len(server.requests)
            resumed = jm(
                "resume", "--last", *common, "--session-dir", str(sessions), "-o", "json", env=env
            )
            assert resumed.returncode == 0, (trial, resumed.stderr)
            assert json.loads(resumed.stdout)["finish_reason"] == "completed"
            first = server.requests[sent_before]
            assert first.raw_body == reference[step_of(first)], f"trial {trial}"
            assert snapshot(ws) == expected_tree, f"trial {trial}: files differ"

            session = json.loads(resumed.stdout)["session_id"]
            diff = jm("diff", "--session", session, "--session-dir", str(sessions), env=env)
            assert diff.returncode == 0
            changed = {k for k in expected_tree if before.get(k) != expected_tree[k]}
            for path in changed:
                assert f"b/{path}" in diff.stdout, f"trial {trial}: {path} missing from diff"
            undo = jm(
                "undo", "--all", "--session", session, "--session-dir", str(sessions), env=env
            )
            assert undo.returncode == 0, undo.stderr
            after_undo = snapshot(ws)
            assert after_undo == before, f"trial {trial}: undo did not restore the tree"
            outcomes.append({"trial": trial, "killed_after": seen, "resumed_at": step_of(first)})
    assert len(outcomes) == TRIALS
