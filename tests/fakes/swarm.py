"""A scripted team for swarm tests and the swarm bench: one model that answers the planning
turn with a fixed plan and each worker by its subtask, attempt and turn, whatever order the
concurrent workers' requests arrive in.

`SwarmModel.step(system, turns)` is the routing: the planner is recognised by its system
prompt, a worker by the `Subtask id:` and `Attempt:` lines of its goal recitation, its turn by
the number of assistant messages so far. Use it through `openai_reply` (a callable script item
for `FakeOpenAIServer.default`) or `RoutedProvider` (a library provider with an optional fixed
delay per reply, so parallel workers show in wall time). `git_repo` makes the small committed
repository a swarm works on.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from journeyman.core.messages import Role, ToolCall, Usage
from journeyman.providers.base import Capabilities, ModelRequest, ModelResponse, TextCallback
from journeyman.swarm.planner import PLANNER_PROMPT

from .script import RecordedRequest, Reply, reply

PLANNER_MARK = PLANNER_PROMPT.split(".")[0]
Calls = list[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class Step:
    """One scripted model reply."""

    text: str = ""
    calls: Calls = field(default_factory=list)


WorkerScript = Callable[[int, int], Step]
"""(attempt, turn) -> the worker's reply."""


def write_then_finish(path: str, content: str, summary: str = "done") -> WorkerScript:
    """Write `content` to `path`, then finish."""

    def script(attempt: int, turn: int) -> Step:
        if turn == 0:
            return Step(calls=[("write_file", {"path": path, "content": content})])
        return Step(calls=[("finish", {"summary": summary})])

    return script


def by_attempt(*scripts: WorkerScript) -> WorkerScript:
    """The first script for attempt 1, the second for attempt 2, ..."""

    def script(attempt: int, turn: int) -> Step:
        return scripts[min(attempt, len(scripts)) - 1](attempt, turn)

    return script


def repeat_forever(*calls: tuple[str, dict[str, Any]]) -> WorkerScript:
    """Cycle through `calls`, one per turn, never finishing."""

    def script(attempt: int, turn: int) -> Step:
        name, args = calls[turn % len(calls)]
        return Step(calls=[(name, dict(args))])

    return script


@dataclass
class SwarmModel:
    plan: Sequence[Mapping[str, Any]]
    """The planner's subtasks: dicts with title, task, files."""
    workers: Mapping[str, WorkerScript]
    """By subtask id (`w1`, `w2`, ... in plan order)."""
    plan_text: str | None = None
    """Replaces the JSON plan (for malformed plans)."""

    def step(self, system: str, turns: int) -> Step:
        if PLANNER_MARK in system:
            text = (
                self.plan_text
                if self.plan_text is not None
                else json.dumps({"subtasks": list(self.plan)})
            )
            return Step(text=text)
        found = re.search(r"^Subtask id: (\S+)$", system, flags=re.MULTILINE)
        if found is None:
            return Step(text="I am not part of this swarm.")
        attempt = re.search(r"^Attempt: (\d+)", system, flags=re.MULTILINE)
        return self.workers[found.group(1)](int(attempt.group(1)) if attempt else 1, turns)


def openai_reply(model: SwarmModel) -> Callable[[RecordedRequest], Reply]:
    """A script item for `FakeOpenAIServer.default` answering every request from `model`."""

    def answer(request: RecordedRequest) -> Reply:
        messages = request.json.get("messages", [])
        system = "\n".join(
            str(m.get("content") or "") for m in messages if m.get("role") == "system"
        )
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        step = model.step(system, turns)
        return reply(step.text, tool_calls=step.calls)

    return answer


def system_of(request: RecordedRequest) -> str:
    """The system prompt of an OpenAI request."""
    return "\n".join(
        str(m.get("content") or "")
        for m in request.json.get("messages", [])
        if m.get("role") == "system"
    )


class RoutedProvider:
    """A library provider answering from a `SwarmModel`, each reply after `delay_s`."""

    def __init__(self, model: SwarmModel, *, delay_s: float = 0.0) -> None:
        self.swarm_model = model
        self.delay_s = delay_s
        self.requests: list[ModelRequest] = []
        self._ids = 0

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def model(self) -> str:
        return "scripted-swarm"

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(context_window=1_000_000)

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        self.requests.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        turns = sum(1 for m in request.messages if m.role is Role.ASSISTANT)
        step = self.swarm_model.step(request.system, turns)
        calls = []
        for name, args in step.calls:
            self._ids += 1
            calls.append(ToolCall(f"call-{self._ids}", name, args))
        return ModelResponse(
            text=step.text, tool_calls=tuple(calls), usage=Usage(input_tokens=50, output_tokens=10)
        )


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=root,
        env={**os.environ, **GIT_IDENTITY},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def git_repo(root: Path, files: Mapping[str, str]) -> Path:
    """A repository at `root` with `files` committed on branch main."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "init", "--quiet", "--initial-branch=main")
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "-m", "start")
    return root
