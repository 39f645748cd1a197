"""`journeyman swarm --tool-format`: every mode is accepted and reaches the workers' requests
(the CLI in a subprocess against the fake OpenAI server)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, Reply, reply
from tests.fakes.swarm import SwarmModel, git_repo, openai_reply, write_then_finish
from tests.support.cli import clean_env, jm


def as_constrained_replies(
    answer: Callable[[RecordedRequest], Reply],
) -> Callable[[RecordedRequest], Reply]:
    """`answer`, with a tool call written as the JSON object of a constrained reply whenever
    the request constrains its reply by `response_format`."""

    def constrained(request: RecordedRequest) -> Reply:
        native = answer(request)
        if "response_format" not in request.json or not native.tool_calls:
            return native
        call = native.tool_calls[0]
        return reply(json.dumps({"tool": call.name, "arguments": call.arguments}))

    return constrained


def test_a_swarm_runs_its_workers_in_the_tool_format_asked_for(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "old\n"})
    plan = [{"title": "update a", "task": "Update a.", "files": ["a.txt"]}]
    model = SwarmModel(plan, {"w1": write_then_finish("a.txt", "new\n")})
    fake_openai.default = as_constrained_replies(openai_reply(model))
    env = clean_env(
        OPENAI_API_KEY="sk-test-swarm",
        OPENAI_BASE_URL=fake_openai.base_url,
        JOURNEYMAN_CONFIG_DIR=str(tmp_path / "config"),
    )
    done = jm(
        "swarm", "make the change", "-w", str(repo), "--model", "tiny", "--yes",
        "--sandbox", "local", "--session-dir", str(tmp_path / "sessions"),
        "--verify", "true", "--tool-format", "json_schema", "-o", "json",
        env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "a.txt").read_text() == "new\n"
    workers = [r.json for r in fake_openai.requests if "response_format" in r.json]
    assert workers and all("tools" not in body for body in workers)
