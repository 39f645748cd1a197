"""The subagent tree's limits from config files: a ``[subagents]`` table in the user's
config.toml sets them, a project's file may only lower them, and `journeyman run --subagents`
uses them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journeyman import Agent, AgentConfig
from journeyman.core.errors import ConfigurationError
from journeyman.loop.config_file import load_config
from journeyman.providers.scripted import ScriptedProvider
from journeyman.swarm.config import SubagentConfig
from journeyman.swarm.spawn import enable_subagents
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "user"
    folder.mkdir()
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", str(folder))
    return folder


def test_the_users_subagents_table_sets_the_limits(tmp_path: Path, user_dir: Path) -> None:
    (user_dir / "config.toml").write_text(
        "[subagents]\nmax_depth = 1\nmax_children_per_turn = 2\nmax_parallel = 5\n"
        "max_child_share = 0.3\n"
    )
    limits = load_config(tmp_path, env={}).build().subagents
    assert isinstance(limits, SubagentConfig)
    assert (limits.max_depth, limits.max_children_per_turn, limits.max_parallel) == (1, 2, 5)
    assert limits.max_child_share == 0.3
    assert limits.child_max_iterations == SubagentConfig().child_max_iterations


def test_a_project_may_only_lower_the_subagent_limits(tmp_path: Path, user_dir: Path) -> None:
    (user_dir / "config.toml").write_text("[subagents]\nmax_depth = 1\nmax_parallel = 5\n")
    (tmp_path / "journeyman.toml").write_text(
        "[subagents]\nmax_depth = 3\nmax_parallel = 2\nmax_child_share = 0.9\n"
        "max_children_per_turn = 1\nmin_child_tokens = 0\n"
    )
    loaded = load_config(tmp_path, env={})
    limits = loaded.build().subagents
    assert limits.max_depth == 1  # the user's, not raised
    assert limits.max_parallel == 2  # lowered: kept
    assert limits.max_children_per_turn == 1
    assert limits.max_child_share == 0.6  # raising the default share is refused
    assert limits.min_child_tokens == SubagentConfig().min_child_tokens  # a floor: only up
    ignored = sorted(item.key for item in loaded.ignored)
    assert ignored == [
        "subagents.max_child_share",
        "subagents.max_depth",
        "subagents.min_child_tokens",
    ]
    assert any("may only lower limits" in w and "journeyman.toml" in w for w in loaded.warnings)


def test_bad_subagent_settings_name_the_file(tmp_path: Path, user_dir: Path) -> None:
    (user_dir / "config.toml").write_text("[subagents]\nmax_depth = 0\n")
    with pytest.raises(ConfigurationError, match=r"config\.toml: subagents\.max_depth"):
        load_config(tmp_path, env={})
    (user_dir / "config.toml").write_text("[subagents]\nmax_dpth = 1\n")
    with pytest.raises(ConfigurationError, match=r"subagents\.max_dpth"):
        load_config(tmp_path, env={})


def test_run_with_subagents_uses_the_configured_limits(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "config.toml").write_text("[subagents]\nmax_children_per_turn = 1\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.py").write_text("x = 1\n")
    fake_openai.enqueue(
        reply(
            tool_calls=[
                ("spawn_agent", {"task": "Look at a.py."}),
                ("spawn_agent", {"task": "Look at a.py again."}),
            ]
        ),
        reply("a.py sets x."),  # the one child allowed this turn
        reply("Done."),
    )
    env = clean_env(
        OPENAI_API_KEY="sk-test-sub",
        OPENAI_BASE_URL=fake_openai.base_url,
        JOURNEYMAN_CONFIG_DIR=str(user),
    )
    done = jm(
        "run", "--yes", "--no-verify", "--subagents", "What is in a.py?",
        "--workspace", str(workspace), "--model", "gpt-4.1-mini", "--output-format", "json",
        "--max-budget-usd", "1", "--session-dir", str(tmp_path / "sessions"),
        env=env, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["final_text"] == "Done."
    messages = fake_openai.requests[-1].json["messages"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    assert len(results) == 2
    assert "a.py sets x." in results[0]
    assert "1 subagents" in results[1]  # the second spawn of the turn is refused


def test_subagents_help_names_the_config_keys() -> None:
    from typer.testing import CliRunner

    from journeyman.cli.app import app

    done = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    text = " ".join(done.output.replace("│", " ").split())
    assert "subagents table of your config.toml: max_depth (2)" in text
    assert "a project's file may only lower them" in text


def test_a_library_agent_gets_the_limits_of_its_own_config(tmp_path: Path) -> None:
    limits = SubagentConfig(max_depth=3, max_children_per_turn=1)
    agent = Agent(ScriptedProvider([]), workspace=tmp_path, config=AgentConfig(subagents=limits))
    tool = enable_subagents(agent)
    assert tool is not None
    assert agent.subagents.config == limits  # type: ignore[attr-defined]
