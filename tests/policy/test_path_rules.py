"""Path rules go by what a tool does: a read rule holds for every tool that reads files, an
edit rule for every tool that edits them, whatever tool the rule names.

So `read_file(secrets/**)` also refuses `grep`, `list_files` and `glob` there, and
`edit_file(x)` also refuses `write_file` and each path `apply_patch` touches, even when the
run offers `apply_patch` instead of `edit_file`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from journeyman import Agent, AgentConfig
from journeyman.core.messages import ToolCall
from journeyman.policy.permissions import DecisionKind, PermissionPolicy, PermissionsConfig
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.tools.builtin import default_tools
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.sandbox import SandboxKind

SECRET = "hunter2-do-not-leak"


def patch(*sections: str) -> dict[str, str]:
    return {"patch": "*** Begin Patch\n" + "".join(sections) + "*** End Patch\n"}


def update(path: str) -> str:
    return f"*** Update File: {path}\n@@\n-old\n+new\n"


def policy(ws: Path, edit_tool: str, **rules: list[str]) -> PermissionPolicy:
    tools = ToolRegistry(default_tools(edit_tool=edit_tool))
    return PermissionPolicy("bypass", workspace=ws, tools=tools, **rules)


READ_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "secrets/api.txt"}),
    ("grep", {"pattern": "TOKEN", "path": "secrets"}),
    ("grep", {"pattern": "TOKEN", "path": "./secrets/../secrets/api.txt"}),
    ("list_files", {"path": "secrets"}),
    ("glob", {"pattern": "*", "path": "secrets/deep"}),
]
EDIT_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("edit_file", {"path": "setup.py", "old_string": "a", "new_string": "b"}),
    ("write_file", {"path": "setup.py", "content": "x"}),
    ("write_file", {"path": "./setup.py", "content": "x"}),
    ("apply_patch", patch(update("setup.py"))),
    ("apply_patch", patch(update("README.md"), update("setup.py"))),
    ("apply_patch", patch("*** Update File: README.md\n*** Move to: setup.py\n@@\n-a\n+b\n")),
    ("apply_patch", patch("*** Delete File: setup.py\n")),
]


@pytest.mark.parametrize("edit_tool", ["edit_file", "apply_patch", "both"])
@pytest.mark.parametrize(("tool", "args"), READ_CALLS)
def test_a_read_rule_holds_for_every_tool_that_reads(
    tmp_path: Path, edit_tool: str, tool: str, args: dict[str, Any]
) -> None:
    decision = policy(tmp_path, edit_tool, deny=["read_file(secrets/**)"]).decide(tool, args)
    assert decision.kind is DecisionKind.DENY
    assert "read_file(secrets/**)" in decision.reason


@pytest.mark.parametrize("rule", ["edit_file(setup.py)", "write_file(setup.py)"])
@pytest.mark.parametrize("edit_tool", ["edit_file", "apply_patch", "both"])
@pytest.mark.parametrize(("tool", "args"), EDIT_CALLS)
def test_an_edit_rule_holds_for_every_tool_that_edits(
    tmp_path: Path, rule: str, edit_tool: str, tool: str, args: dict[str, Any]
) -> None:
    rules = policy(tmp_path, edit_tool, deny=[rule])
    if rules.tools.kind_of(tool) is None:
        pytest.skip(f"the run offers no {tool}")
    decision = rules.decide(tool, args)
    assert decision.kind is DecisionKind.DENY, decision.reason


def test_a_read_rule_also_holds_for_edits_which_read_what_they_change(tmp_path: Path) -> None:
    rules = policy(tmp_path, "apply_patch", deny=["read_file(secrets/**)"])
    assert rules.decide("apply_patch", patch(update("secrets/api.txt"))).kind is DecisionKind.DENY
    assert rules.decide("write_file", {"path": "secrets/x", "content": ""}).kind is (
        DecisionKind.DENY
    )


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "src/app.py"}),
        ("grep", {"pattern": "x", "path": "."}),
        ("list_files", {"path": "."}),
        ("write_file", {"path": "src/app.py", "content": "x"}),
        ("apply_patch", patch(update("src/app.py"))),
        ("run_command", {"command": "pytest -q"}),
    ],
)
def test_other_paths_and_tools_are_not_touched(
    tmp_path: Path, tool: str, args: dict[str, Any]
) -> None:
    rules = policy(
        tmp_path, "both", deny=["read_file(secrets/**)", "edit_file(setup.py)", "write_file(*.md)"]
    )
    assert rules.decide(tool, args).kind is DecisionKind.ALLOW


def test_an_edit_rule_does_not_stop_reading(tmp_path: Path) -> None:
    rules = policy(tmp_path, "both", deny=["edit_file(setup.py)"])
    assert rules.decide("read_file", {"path": "setup.py"}).kind is DecisionKind.ALLOW
    assert rules.decide("grep", {"pattern": "x", "path": "setup.py"}).kind is DecisionKind.ALLOW


def test_a_bare_tool_name_still_means_that_tool_only(tmp_path: Path) -> None:
    rules = policy(tmp_path, "both", deny=["edit_file"])
    assert rules.decide("edit_file", EDIT_CALLS[0][1]).kind is DecisionKind.DENY
    assert rules.decide("apply_patch", patch(update("setup.py"))).kind is DecisionKind.ALLOW


def test_ask_rules_go_by_kind_but_allow_rules_only_by_name(tmp_path: Path) -> None:
    tools = ToolRegistry(default_tools(edit_tool="apply_patch"))
    asking = PermissionPolicy(
        "accept_edits", ask=["edit_file(setup.py)"], workspace=tmp_path, tools=tools
    )
    assert asking.decide("apply_patch", patch(update("setup.py"))).kind is DecisionKind.ASK
    allowing = PermissionPolicy(
        "default", allow=["edit_file(setup.py)"], workspace=tmp_path, tools=tools
    )
    assert allowing.decide("write_file", {"path": "setup.py", "content": ""}).kind is (
        DecisionKind.ASK
    )


def test_an_unparseable_patch_fails_closed_against_edit_rules(tmp_path: Path) -> None:
    rules = policy(tmp_path, "apply_patch", deny=["edit_file(setup.py)"])
    # a patch that does not parse touches nothing and is refused when run; it is not a bypass
    assert rules.decide("apply_patch", {"patch": "not a patch"}).kind is DecisionKind.ALLOW
    assert rules.decide("apply_patch", {}).kind is DecisionKind.ALLOW


def test_unreadable_names_the_rule_for_covered_paths_only(tmp_path: Path) -> None:
    rules = policy(tmp_path, "both", deny=["read_file(secrets/**)", "edit_file(x.py)"])
    assert rules.unreadable("secrets/a/b.txt") == "read_file(secrets/**)"
    assert rules.unreadable("secrets") == "read_file(secrets/**)"
    assert rules.unreadable("src/secrets.txt") is None
    assert rules.unreadable("x.py") is None


# ---------------------------------------------------------------------- through the library


def call(name: str, args: dict[str, Any], n: int) -> ModelResponse:
    return ModelResponse("", (ToolCall(f"c{n}", name, args),))


async def test_a_library_run_keeps_covered_files_from_the_model(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "api.txt").write_text(f"TOKEN={SECRET}\n")
    (ws / "setup.py").write_text("old\n")
    (ws / "app.py").write_text("TOKEN = 1\n")
    provider = ScriptedProvider(
        [
            call("grep", {"pattern": "TOKEN", "path": "."}, 1),
            call("list_files", {"path": ".", "recursive": True}, 2),
            call("apply_patch", patch(update("setup.py")), 3),
            call("finish", {"summary": "done"}, 4),
        ],
        name="openai",
    )
    agent = Agent(
        provider,
        workspace=ws,
        config=AgentConfig(
            session_dir=tmp_path / "sessions",
            sandbox=SandboxKind.LOCAL,
            verify=False,
            edit_tool="apply_patch",  # type: ignore[arg-type]
            permissions=PermissionsConfig(
                mode="bypass", deny=["read_file(secrets/**)", "edit_file(setup.py)"]
            ),
        ),
    )
    try:
        await agent.run("look around")
    finally:
        agent.close()
    seen = "\n".join(str(m.content) for request in provider.requests for m in request.messages)
    assert SECRET not in seen
    assert "app.py:1: TOKEN = 1" in seen and "secrets/api.txt" not in seen
    assert "`read_file(secrets/**)` covers" in seen
    assert "edit_file(setup.py)" in seen  # the patch was refused, naming the rule
    assert (ws / "setup.py").read_text() == "old\n"


def test_a_rule_for_a_tool_registered_later_is_looked_at_again(tmp_path: Path) -> None:
    from pydantic import BaseModel

    from journeyman.core.tool_kind import ToolKind
    from journeyman.tools.base import tool

    class Args(BaseModel):
        path: str
        """The file to fetch."""

    registry = ToolRegistry(default_tools(edit_tool="edit_file"))
    rules = PermissionPolicy(
        "bypass", deny=["fetch_doc(secrets/**)"], workspace=tmp_path, tools=registry
    )
    grep = {"pattern": "x", "path": "secrets"}
    assert rules.decide("grep", grep).kind is DecisionKind.ALLOW  # no such tool yet

    @tool(args=Args, kind=ToolKind.READ, permission_arg="path")
    def fetch_doc(args: Args, ctx: object) -> str:
        """Fetch a document."""
        return ""

    registry.register(fetch_doc)
    assert rules.decide("grep", grep).kind is DecisionKind.DENY
    assert rules.unreadable("secrets/a") == "fetch_doc(secrets/**)"
