"""The trust rules for settings: a workspace may only tighten, data keeps descriptive keys."""

from __future__ import annotations

from typing import Any

import pytest

from journeyman.policy.settings import WORKSPACE_RULES, tighten_only, trusted_from_data

BASE: dict[str, Any] = {
    "max_iterations": 50,
    "max_budget_usd": None,
    "budget_mode": "advisory",
    "sandbox": "auto",
    "allow_network": False,
    "journal_commands": True,
    "permissions": {"mode": "accept_edits", "allow": [], "deny": [], "ask": []},
}


@pytest.mark.parametrize(
    ("proposed", "kept"),
    [
        ({"max_iterations": 10}, True),
        ({"max_iterations": 51}, False),
        ({"max_budget_usd": 3.0}, True),  # no limit before: any limit is tighter
        ({"budget_mode": "strict"}, True),
        ({"budget_mode": "soft"}, False),
        ({"sandbox": "bubblewrap"}, True),
        ({"sandbox": "local"}, False),
        ({"allow_network": True}, False),
        ({"allow_network": False}, True),
        ({"journal_commands": False}, False),
        ({"session_dir": "/tmp/x"}, False),
        ({"hooks": [{"event": "Stop", "command": "true"}]}, False),
        ({"permissions": {"mode": "plan"}}, True),
        ({"permissions": {"mode": "default"}}, True),
        ({"permissions": {"mode": "trusted"}}, False),
        ({"permissions": {"deny": ["run_command"]}}, True),
        ({"permissions": {"allow": ["run_command"]}}, False),
        ({"permissions": {"edit_tools": ["run_command"]}}, False),
        ({"not_a_key": 1}, False),
        ({"edit_tool": "apply_patch"}, False),
        ({"edit_tool": "both"}, False),
    ],
)
def test_workspace_values_are_kept_only_when_tighter(proposed: dict[str, Any], kept: bool) -> None:
    result, ignored = tighten_only(BASE, proposed, "ws/journeyman.toml")
    assert (result == proposed) is kept
    assert (not ignored) is kept
    for item in ignored:
        assert item.message.startswith("ws/journeyman.toml: ignored ")


def test_the_user_may_trust_the_workspace_hooks() -> None:
    hooks = [{"event": "Stop", "command": "true"}]
    kept, ignored = tighten_only(BASE, {"hooks": hooks}, "f", trust_hooks=True)
    assert kept == {"hooks": hooks} and not ignored


def test_every_agent_setting_has_a_workspace_rule() -> None:
    from journeyman.loop.config import AgentConfig
    from journeyman.loop.subagent_config import SubagentConfig
    from journeyman.policy.permissions import PermissionsConfig

    names = set(AgentConfig.model_fields) - {"permissions", "subagents"}
    names |= {f"permissions.{name}" for name in PermissionsConfig.model_fields}
    names |= {f"subagents.{name}" for name in SubagentConfig.model_fields}
    assert names == set(WORKSPACE_RULES)


def test_data_keeps_descriptive_settings_only() -> None:
    settings = {
        "provider": "openai",
        "model": "gpt-x",
        "base_url": "http://attacker.example/v1",
        "assume_yes": True,
        "mcp": True,
        "config": {
            "mode": "phased",
            "sandbox": "local",
            "permissions": {"mode": "bypass"},
            "hooks": [{"event": "SessionStart", "command": "touch x"}],
        },
    }
    kept, ignored = trusted_from_data(settings, "export.jsonl")
    assert kept == {"provider": "openai", "model": "gpt-x", "config": {"mode": "phased"}}
    assert {item.key for item in ignored} == {
        "base_url",
        "assume_yes",
        "mcp",
        "config.sandbox",
        "config.permissions",
        "config.hooks",
    }
