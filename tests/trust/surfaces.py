"""Every surface driven the way its user drives it, on one scene: a workspace, a session folder,
a user config folder and the fake OpenAI server playing one scripted worker.

- run, swarm, batch, eval: the `journeyman` command in a subprocess (`tests/support/cli.py`);
- chat: the `chat` command in this process with the app's `run` replaced by nothing, then the
  app driven with Textual's Pilot (as `tests/tui/test_chat_cmd.py` does);
- acp: `journeyman acp` in a subprocess, spoken to by the `agent-client-protocol` package's own
  client (as `tests/protocols/acp` does);
- mcp serve: `journeyman mcp serve` in a subprocess over stdio, spoken to by the `mcp` SDK's
  client (as `tests/protocols/mcp_server` does).

Whatever a surface showed its user (stdout, stderr, protocol messages, the app's widgets, the
batch's output folder) ends up in `Shown.output`, so a case can look for a secret or a
traceback there without knowing the surface.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, reply
from tests.fakes.swarm import PLANNER_MARK, git, git_repo, system_of
from tests.support.cli import clean_env, jm

SURFACES = ("run", "chat", "acp", "mcp serve", "swarm", "batch", "eval")
TRACEBACK = "Traceback (most recent call last)"
MODEL = "gpt-4.1-mini"
SUBPROCESS_LIMIT_S = 150.0
"""A surface still running after this long is killed: the test fails on it, never hangs."""


@dataclass
class Scene:
    """What one (surface, case) pair sets up."""

    root: Path
    """Scratch folder of the pair; everything below lives under it."""
    server: FakeOpenAIServer
    replies: Sequence[ScriptItem]
    """The worker's replies by turn (assistant messages so far); the last one repeats."""
    files: dict[str, str | bytes] = field(default_factory=dict)
    """The workspace's files, committed (a swarm's workers see only what is committed); a name
    that is not UTF-8 is given with `os.fsdecode`."""
    task: str = "Tidy the project."
    env: dict[str, str] = field(default_factory=dict)
    """Added to the surface's environment (a secret)."""
    user_config: str = ""
    """The user's own config.toml."""
    flags: tuple[str, ...] = ()
    """Flags every surface takes (--verify, --no-verify, --sandbox)."""
    batch_flags: tuple[str, ...] = ()
    """Flags only batch and eval take (--max-retries)."""
    plan_files: tuple[str, ...] = ("notes.txt",)
    """The files of the swarm's one subtask."""

    @property
    def ws(self) -> Path:
        return self.root / "ws"

    @property
    def sessions(self) -> Path:
        return self.root / "sessions"

    @property
    def user_config_dir(self) -> Path:
        return self.root / "user-config"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def prepare(self) -> None:
        """The workspace (a committed git repository), the user config; the model's script."""
        text_files = {k: v for k, v in self.files.items() if isinstance(v, str)}
        git_repo(self.ws, {"README.md": "a project\n", **text_files})
        binary = {k: v for k, v in self.files.items() if isinstance(v, bytes)}
        for name, data in binary.items():
            (self.ws / name).write_bytes(data)
        if binary:
            git(self.ws, "add", "-A")
            git(self.ws, "commit", "--quiet", "-m", "more files")
        self.user_config_dir.mkdir(parents=True, exist_ok=True)
        (self.user_config_dir / "config.toml").write_text(self.user_config)
        self.server.default = self.answer

    def answer(self, request: RecordedRequest) -> ScriptItem:
        """The swarm's planner gets a one-subtask plan; every worker plays `replies`."""
        if PLANNER_MARK in system_of(request):
            subtask = {"title": "tidy", "task": self.task, "files": list(self.plan_files)}
            return reply(json.dumps({"subtasks": [subtask]}))
        turns = sum(1 for m in request.json.get("messages", []) if m.get("role") == "assistant")
        return self.replies[min(turns, len(self.replies) - 1)]

    def environment(self, api_key: str = "sk-test-trust-suite") -> dict[str, str]:
        return clean_env(
            OPENAI_API_KEY=api_key,
            OPENAI_BASE_URL=self.server.base_url,
            JOURNEYMAN_CONFIG_DIR=str(self.user_config_dir),
            XDG_DATA_HOME=str(self.root / "data"),
            **self.env,
        )


@dataclass
class Shown:
    """What a surface did, as its user saw it."""

    code: int | None
    """The exit status (None for the app, which the test leaves itself)."""
    output: str
    """Everything the surface showed: stdout, stderr, protocol messages, app text, reports."""
    error: str
    """Where the surface reports a failure: stderr, a protocol error, the app's error notes."""
    seconds: float

    def no_traceback(self) -> None:
        assert TRACEBACK not in self.output, self.output[-2000:]


async def drive(surface: str, scene: Scene) -> Shown:
    """Run `scene.task` on `surface` once."""
    started = time.monotonic()
    code, output, error = await DRIVERS[surface](scene)
    return Shown(code, output, error, time.monotonic() - started)


Driver = Callable[[Scene], Any]


async def _command(scene: Scene, *args: str) -> tuple[int, str, str]:
    try:
        done = await asyncio.to_thread(
            jm, *args, env=scene.environment(), timeout=SUBPROCESS_LIMIT_S, cwd=scene.root
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`journeyman {args[0]}` still ran after {SUBPROCESS_LIMIT_S:g} s")
    return done.returncode, done.stdout + done.stderr, done.stderr


def _common(scene: Scene) -> tuple[str, ...]:
    return ("--model", MODEL, "--session-dir", str(scene.sessions), *scene.flags)


async def _run(scene: Scene) -> tuple[int, str, str]:
    args = ("run", scene.task, "-w", str(scene.ws), "--yes", "-o", "json", "--no-lsp")
    return await _command(scene, *args, *_common(scene))


async def _swarm(scene: Scene) -> tuple[int, str, str]:
    args = ("swarm", scene.task, "-w", str(scene.ws), "--yes", "--workers", "1")
    # a swarm always checks its workers' work (it has no --no-verify): a check that passes
    common = [flag for flag in _common(scene) if flag != "--no-verify"]
    if "--no-verify" in scene.flags:
        common += ["--verify", "true"]
    return await _command(scene, *args, *common)


def _out_files(scene: Scene) -> str:
    """The batch's results and reports (not the task workspaces it keeps beside them)."""
    if not scene.out.is_dir():
        return ""
    return "\n".join(
        p.read_text(errors="replace") for p in sorted(scene.out.iterdir()) if p.is_file()
    )


async def _batch(scene: Scene) -> tuple[int, str, str]:
    tasks = scene.root / "tasks.jsonl"
    if not tasks.exists():
        tasks.write_text(json.dumps({"id": "t1", "task": scene.task, "workspace": str(scene.ws)}))
    args = ("batch", str(tasks), "--out", str(scene.out), "--max-parallel", "1")
    code, output, error = await _command(scene, *args, *_common(scene), *scene_extra(scene))
    return code, output + _out_files(scene), error


def exercise_suite(scene: Scene) -> Path:
    """An exercise folder made of the workspace: its files, instructions that are the task,
    and a hidden test the grading runs."""
    suite = scene.root / "exercises"
    exercise = suite / "tidy"
    if not suite.exists():
        suite.mkdir()
        subprocess.run(["cp", "-a", str(scene.ws), str(exercise)], check=True)
        subprocess.run(["rm", "-rf", str(exercise / ".git")], check=True)
        (exercise / ".docs").mkdir(exist_ok=True)
        (exercise / ".docs" / "instructions.md").write_text(scene.task + "\n")
        (exercise / "tidy_test.py").write_text("def test_tidy():\n    assert True\n")
    return suite


async def _eval(scene: Scene) -> tuple[int, str, str]:
    suite = exercise_suite(scene)
    # --allow-unsandboxed: the cases with a local sandbox (or where bubblewrap cannot start)
    # are about other things than the hidden tests; under bubblewrap it changes nothing
    args = ("eval", str(suite), "--out", str(scene.out), "--max-parallel", "1")
    args += ("--allow-unsandboxed",)
    code, output, error = await _command(scene, *args, *_common(scene), *scene_extra(scene))
    return code, output + _out_files(scene), error


def scene_extra(scene: Scene) -> tuple[str, ...]:
    """The scene's batch flags, and `--resume` when the case asks a batch to go on."""
    resume = ("--resume",) if (scene.root / "resume").exists() else ()
    return (*scene.batch_flags, *resume)


async def _chat(scene: Scene) -> tuple[int | None, str, str]:
    from tests.trust.chat_surface import chat_once

    return await chat_once(scene)


async def _acp(scene: Scene) -> tuple[int | None, str, str]:
    from tests.trust.protocol_surfaces import acp_once

    return await acp_once(scene)


async def _mcp(scene: Scene) -> tuple[int | None, str, str]:
    from tests.trust.protocol_surfaces import mcp_once

    return await mcp_once(scene)


DRIVERS: dict[str, Driver] = {
    "run": _run,
    "chat": _chat,
    "acp": _acp,
    "mcp serve": _mcp,
    "swarm": _swarm,
    "batch": _batch,
    "eval": _eval,
}


def shell(*words: str) -> str:
    return " ".join(shlex.quote(w) for w in words)


PYTEST_CHECK = f"{sys.executable} -m pytest -q -p no:cacheprovider"
"""The check of the cases that run one: this interpreter's pytest, as a user would name it."""
