"""`journeyman batch` and the tool formats: every mode is accepted, auto is the default, and the
workers that run the tasks use the mode (a subprocess against the fake OpenAI server)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.batch.support import task_text, tasks_for, write_tasks_file
from tests.batch.test_batch_cli import batch_args, rows
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, error, reply
from tests.support.cli import clean_env, journeyman

FINISH = '{"tool": "finish", "arguments": {"summary": "done"}}'


def constrained_model(request: RecordedRequest) -> ScriptItem:
    """A server like Ollama with a model without tool support: `tools` are refused; replies
    constrained by `response_format` keep to it."""
    body = request.json
    if "tools" in body:
        return error(400, "registry.ollama.ai/library/gemma3:270m does not support tools")
    if "response_format" not in body:
        return reply("I cannot do that.")
    if body["messages"][-1]["content"] == "Reply with a JSON object.":  # the mode probe
        return reply('{"probe": "jm-probe"}')
    return reply(FINISH)


def run_batch(tmp_path: Path, server: FakeOpenAIServer, *extra: str) -> list[dict]:
    server.default = constrained_model
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks_for(tmp_path, [task_text(0)]))
    env = clean_env(
        OPENAI_API_KEY="sk-test-batch",
        OPENAI_BASE_URL=server.base_url,
        JOURNEYMAN_CONFIG_DIR=str(tmp_path / "config"),
    )
    done = journeyman(*batch_args(tmp_path, tasks_file, *extra), env=env)
    assert done.returncode == 0, done.stderr + done.stdout
    return rows(tmp_path)


def test_a_batch_on_a_server_that_refuses_tools_switches_mode_by_default(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    results = run_batch(tmp_path, fake_openai)
    assert [r["status"] for r in results] == ["succeeded"]
    recorded = json.loads((tmp_path / "config" / "tool_modes.json").read_text())
    assert [entry["mode"] for entry in recorded.values()] == ["json_schema"]


def test_a_batch_passes_a_forced_constrained_mode_to_its_workers(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    results = run_batch(tmp_path, fake_openai, "--tool-format", "json_schema")
    assert [r["status"] for r in results] == ["succeeded"]
    assert all("tools" not in r.json for r in fake_openai.requests)
    assert not (tmp_path / "config" / "tool_modes.json").exists()  # nothing was detected


def test_an_unknown_tool_format_is_refused_naming_every_mode(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks_for(tmp_path, [task_text(0)]))
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    done = journeyman(*batch_args(tmp_path, tasks_file, "--tool-format", "xml"), env=env)
    assert done.returncode == 2 and fake_openai.requests == []
    assert "auto, native, json_schema, grammar, text" in done.stderr
