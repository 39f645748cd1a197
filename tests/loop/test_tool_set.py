"""Tiny models get the smallest useful tool set: read_file, the edit tools, run_command and
finish; no search, language-server, MCP or skill tools they would spend their turns misusing.
`tool_set` in the config (or JOURNEYMAN_TOOL_SET) chooses; "auto" decides by the model."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from journeyman.tools.choices import ToolSetChoice, is_tiny_model, minimal_tool_set
from tests.fakes import FakeOpenAIServer, reply
from tests.fakes.agents import finish, make_agent
from tests.support.cli import clean_env, journeyman

MINIMAL = ["read_file", "edit_file", "write_file", "run_command", "finish"]


@pytest.mark.parametrize(
    ("provider", "model", "tiny"),
    [
        ("local", "/models/anything.gguf", True),  # only small models run embedded
        ("openai", "smollm2-135m-instruct", True),
        ("openai", "gemma3:270m", True),
        ("openai", "Qwen2.5-Coder-0.5B-Instruct", True),
        ("openai", "qwen2.5-coder:7b", False),
        ("openai", "SmolLM2-1.7B", False),
        ("openai", "gpt-4.1-mini", False),
        ("openai", "o3-mini", False),
        ("anthropic", "claude-sonnet-4-5", False),
        ("openai", "llama-3.2-1b", False),
    ],
)
def test_what_counts_as_a_tiny_model(provider: str, model: str, tiny: bool) -> None:
    assert is_tiny_model(provider, model) is tiny
    assert minimal_tool_set(ToolSetChoice.AUTO, provider, model) is tiny
    assert minimal_tool_set("full", provider, model) is False
    assert minimal_tool_set("minimal", provider, model) is True


def test_a_tiny_model_is_offered_the_minimal_built_in_tools(tmp_path: Path) -> None:
    agent, _ = make_agent(
        tmp_path,
        [finish("done")],
        provider_options={"model": "smollm2-135m"},
        edit_tool="edit_file",
    )
    assert agent.minimal_tools and agent.registry.names == MINIMAL
    full, _ = make_agent(
        tmp_path, [finish("done")], provider_options={"model": "smollm2-135m"}, tool_set="full"
    )
    assert "grep" in full.registry.names and "list_files" in full.registry.names


def test_tools_given_by_the_library_are_never_cut(tmp_path: Path) -> None:
    from journeyman.tools.listing import GlobTool

    agent, _ = make_agent(
        tmp_path, [finish("done")], tools=[GlobTool()], provider_options={"model": "smollm2-135m"}
    )
    assert "glob" in agent.registry.names


def _project(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text('[project]\nname = "calc"\nversion = "0"\n')
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return workspace


def _offered(server: FakeOpenAIServer, index: int) -> list[str]:
    return [tool["function"]["name"] for tool in server.requests[index].json["tools"]]


def test_the_tool_list_sent_follows_the_model_and_the_setting(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Through the CLI and the OpenAI SDK, with a language server on PATH: the tiny model is
    sent the five minimal tools and told why, a larger one every tool, and tool_set decides
    over the guess either way."""
    workspace = _project(tmp_path)
    fake_openai.default = reply("nothing to do")
    venv_bin = str(Path(sys.executable).parent)
    env = clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=fake_openai.base_url,
        PATH=f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
    )

    def run(model: str, **extra: str) -> str:
        done = journeyman(
            "run", "--no-verify", "fix add", "-w", str(workspace), "--model", model,
            "--session-dir", str(tmp_path / "sessions"), env={**env, **extra},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stderr

    said = run("smollm2-135m-instruct")
    assert _offered(fake_openai, 0) == MINIMAL
    assert (
        "journeyman: note: smollm2-135m-instruct is a tiny model: it is offered only read_file, "
        'edit_file, write_file, run_command, finish (tool_set = "full" offers every tool)'
    ) in said.splitlines()
    run("qwen2.5-coder:7b")
    full = _offered(fake_openai, 1)
    assert {"grep", "glob", "list_files"} <= set(full)
    has_pylsp = shutil.which("pylsp", path=env["PATH"]) is not None
    if has_pylsp:
        assert "lsp_hover" in full
    run("smollm2-135m-instruct", JOURNEYMAN_TOOL_SET="full")
    assert {"grep", "glob"} <= set(_offered(fake_openai, 2))
    chosen = run("qwen2.5-coder:7b", JOURNEYMAN_TOOL_SET="minimal")
    assert _offered(fake_openai, 3) == MINIMAL
    assert 'note: tool_set = "minimal": it is offered only' in chosen
