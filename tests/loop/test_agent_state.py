"""The agent is the only writer of its own settings: its switches change the next run and the
stored session alike, and no code in `src/` assigns to an agent's fields from outside."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from journeyman.core import events as ev
from journeyman.loop.config import ModeName
from journeyman.policy.permissions import PermissionMode
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from journeyman.tools.notes import NoteTool
from tests.fakes.agents import finish, make_agent

SRC = Path(__file__).resolve().parents[2] / "src" / "journeyman"
AGENT_MODULE = SRC / "loop" / "agent.py"


def stored_settings(tmp_path: Path, session_id: str) -> dict[str, object]:
    store = SessionStore(tmp_path / "sessions")
    try:
        return store.load_session(session_id).settings
    finally:
        store.close()


async def test_switches_after_a_run_are_stored_with_its_session(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [finish("first"), finish("second")])
    result = await agent.run("start")
    agent.switch_mode(ModeName.PLAN_SOLVE)
    agent.set_permission_mode(PermissionMode.PLAN)
    agent.switch_model(ScriptedProvider([finish("other")], name="other", model="m2"))

    settings = stored_settings(tmp_path, result.session_id)
    config = settings["config"]
    assert isinstance(config, dict)
    assert config["mode"] == "plan-solve"
    assert config["permissions"]["mode"] == "plan"
    assert (settings["provider"], settings["model"]) == ("other", "m2")
    assert agent.settings == settings  # what a new session would store, too
    assert agent.provider.name == "other"


async def test_a_switch_before_the_first_run_is_in_the_session_it_starts(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [finish("done")], verify_command="true")
    agent.switch_mode(ModeName.PHASED)
    assert agent.registry.get(NoteTool.name) is not None  # the phased mode keeps notes
    result = await agent.run("start")
    config = stored_settings(tmp_path, result.session_id)["config"]
    assert isinstance(config, dict) and config["mode"] == "phased"


def test_remember_setting_refuses_the_keys_the_agent_keeps(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [])
    agent.remember_setting("batch", {"task_id": "t1"})
    assert agent.settings["batch"] == {"task_id": "t1"}
    for key in ("config", "model", "provider"):
        with pytest.raises(ValueError, match="keeps"):
            agent.remember_setting(key, "x")


async def test_listeners_hear_events_first_until_removed(tmp_path: Path) -> None:
    heard: list[str] = []
    agent, _ = make_agent(tmp_path, [finish("one"), finish("two")])
    agent.on_event = lambda event: heard.append(f"own {event.type}")

    def failing(_event: ev.Event) -> None:
        raise RuntimeError("a broken listener")

    agent.add_listener(failing)  # its failure keeps the event from no one
    remove = agent.add_listener(lambda event: heard.append(f"added {event.type}"))
    await agent.run("one")
    assert heard[:2] == ["added state_change", "own state_change"]
    assert {entry.split()[0] for entry in heard} == {"added", "own"}
    assert heard.count("own run_finished") == heard.count("added run_finished") == 1
    remove()
    heard.clear()
    await agent.run("two")
    assert heard and all(entry.startswith("own ") for entry in heard)


def outside_writes(tree: ast.AST, fields: set[str]) -> list[str]:
    """`x.agent.config = ...`, `agent.settings[k] = ...` and the like: stores into a field of
    something named like an agent (`agent`, `self.agent`, `worker_agent`)."""
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in flattened(targets):
            written = target.value if isinstance(target, ast.Subscript) else target
            if not isinstance(written, ast.Attribute) or written.attr not in fields:
                continue
            if ast.unparse(written.value).split(".")[-1].endswith("agent"):
                found.append(f"line {node.lineno}: {ast.unparse(target)}")
    return found


def flattened(targets: list[ast.expr]) -> list[ast.expr]:
    """The single targets of an assignment (`a.x, b.y = ...` gives both)."""
    flat: list[ast.expr] = []
    for target in targets:
        if isinstance(target, ast.Tuple | ast.List):
            flat += flattened(list(target.elts))
        elif isinstance(target, ast.Starred):
            flat += flattened([target.value])
        else:
            flat.append(target)
    return flat


def agent_fields() -> set[str]:
    agent_class = next(
        node
        for node in ast.parse(AGENT_MODULE.read_text()).body
        if isinstance(node, ast.ClassDef) and node.name == "Agent"
    )
    return {
        node.attr
        for node in ast.walk(agent_class)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def test_the_finder_sees_the_writes_it_looks_for() -> None:
    fields = {"config", "settings", "on_event"}
    code = (
        "agent.config = 1\nself.app.agent.settings['k'] = 2\n"
        "worker_agent.on_event, n = f, 1\nagent.config = agent.settings = None\n"
    )
    assert len(outside_writes(ast.parse(code), fields)) == 5
    assert outside_writes(ast.parse("agent_state.phase = 1\nconfig = 2\n"), fields) == []


def test_no_code_outside_the_agent_writes_its_fields() -> None:
    fields = agent_fields()
    assert {"config", "settings", "provider", "on_event", "lsp", "mcp"} <= fields
    writes = {
        str(path.relative_to(SRC)): found
        for path in sorted(SRC.rglob("*.py"))
        if path != AGENT_MODULE and (found := outside_writes(ast.parse(path.read_text()), fields))
    }
    assert writes == {}
