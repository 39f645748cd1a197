"""`RunOptions`: the typed record of how a run started, stored under a session's old keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from journeyman import Agent, AgentConfig, ConfigurationError, RunOptions
from journeyman.providers.scripted import ScriptedProvider

# a session's settings as the code before RunOptions stored them
OLD_SETTINGS = {
    "provider": "openai",
    "model": "gpt-5-mini",
    "config": {"max_iterations": 7},
    "base_url": "http://127.0.0.1:8080/v1",
    "tool_format": "text",
    "assume_yes": True,
    "mcp": None,
    "ignored_settings": [{"key": "sandbox", "value": "none", "source": "x", "reason": "r"}],
}


def test_options_are_read_back_from_settings_stored_before_they_were_typed() -> None:
    options = RunOptions.from_settings(OLD_SETTINGS)
    assert options.base_url == "http://127.0.0.1:8080/v1"
    assert options.tool_format == "text" and options.mcp is None
    assert options.ignored_settings[0]["key"] == "sandbox"
    assert options.to_settings() == {
        key: OLD_SETTINGS[key] for key in ("base_url", "tool_format", "ignored_settings")
    }  # mcp None is the default: left out, and read back as None


def test_a_session_without_options_gets_the_defaults() -> None:
    options = RunOptions.from_settings({"provider": "scripted", "model": "m"})
    assert options == RunOptions()
    assert "ignored_settings" not in options.to_settings()


def test_an_unusable_stored_option_says_which_and_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match=r"tool_format.*--tool-format"):
        RunOptions.from_settings({"tool_format": "smoke-signals"})


def test_the_agent_keeps_its_options_with_the_session_settings(tmp_path: Path) -> None:
    agent = Agent(
        ScriptedProvider([]),
        workspace=tmp_path,
        config=AgentConfig(session_dir=tmp_path / "s"),
        options=RunOptions(base_url="http://127.0.0.1:9/v1", mcp=False),
        assume_yes=True,
    )
    assert agent.settings["base_url"] == "http://127.0.0.1:9/v1"
    assert agent.settings["mcp"] is False and agent.settings["assume_yes"] is True
    assert RunOptions.from_settings(agent.settings) == agent.options


def test_a_spec_string_takes_the_tool_format_and_records_its_base_url(tmp_path: Path) -> None:
    agent = Agent(
        "openai:gpt-5-mini",
        api_key="sk-x",
        base_url="http://127.0.0.1:9/v1",
        workspace=tmp_path,
        options=RunOptions(tool_format="text"),
    )
    assert agent.settings["base_url"] == "http://127.0.0.1:9/v1"
    assert agent.settings["tool_format"] == "text"
    assert agent.provider.providers[0].tool_format == "text"
