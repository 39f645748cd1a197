"""The typed checkpoint: checkpoints written before it still resume; newer ones are refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from journeyman import Agent, FinishReason
from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import ToolCall
from journeyman.loop.checkpoint import CHECKPOINT_VERSION, load_checkpoint
from journeyman.loop.config import ModeName
from journeyman.providers.base import ModelResponse
from journeyman.session.store import SessionStore
from journeyman.tools.sandbox import SandboxKind
from tests.fakes.agents import finish, make_agent, turn
from tests.fakes.projects import CALC_TEST_COMMAND, calc_package, fix_add

DATA = Path(__file__).parent / "data"


def old(name: str) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads((DATA / f"checkpoint_v0_{name}.json").read_text())
    return stored


def react_script() -> list[ModelResponse]:
    return [
        turn(ToolCall("r1", "read_file", {"path": "calc/__init__.py"}), text="looking"),
        turn(ToolCall("r2", "list_files", {}), text="listing"),
    ]


def agent(tmp_path: Path, script: list[ModelResponse], **config: Any) -> Agent:
    if not (tmp_path / "ws").exists():
        calc_package(tmp_path)
    return make_agent(tmp_path, script, sessions="s", sandbox=SandboxKind.LOCAL, **config)[0]


def replace_last_checkpoint(tmp_path: Path, session_id: str, checkpoint: dict[str, Any]) -> None:
    with sqlite3.connect(tmp_path / "s" / "journeyman.db") as db:
        db.execute(
            "UPDATE steps SET checkpoint = ? WHERE session_id = ? AND step = "
            "(SELECT MAX(step) FROM steps WHERE session_id = ?)",
            (json.dumps(checkpoint), session_id, session_id),
        )


@pytest.mark.parametrize("name", ["react", "phased"])
def test_an_unversioned_checkpoint_loads_as_the_current_version(name: str) -> None:
    loaded = load_checkpoint(old(name)["checkpoint"], session_id="s")
    assert loaded.version == CHECKPOINT_VERSION
    assert loaded.counters.iterations == old(name)["step"] == 2
    assert (loaded.mode is not None) is (name == "phased")


def test_a_newer_checkpoint_is_refused_with_a_clear_message() -> None:
    newer = {**old("react")["checkpoint"], "version": CHECKPOINT_VERSION + 1}
    with pytest.raises(ConfigurationError, match=r"newer journeyman.*upgrade"):
        load_checkpoint(newer, session_id="s1")


async def test_a_react_session_with_an_old_checkpoint_resumes(tmp_path: Path) -> None:
    first = await agent(tmp_path, react_script(), max_iterations=2).run("task")
    assert first.finish_reason is FinishReason.MAX_ITERATIONS
    replace_last_checkpoint(tmp_path, first.session_id, old("react")["checkpoint"])
    # the task's check is not the point here: the resumed run only has to finish
    again = agent(tmp_path, [finish(cid="f")], verify=False)
    resumed = await again.resume(first.session_id, override_limits=True)
    assert resumed.finish_reason is FinishReason.COMPLETED, resumed.error
    assert resumed.iterations == 3


async def test_a_phased_session_with_an_old_checkpoint_resumes_in_its_phase(
    tmp_path: Path,
) -> None:
    config: dict[str, Any] = {"mode": ModeName.PHASED, "verify_command": CALC_TEST_COMMAND}
    first = agent(tmp_path, [fix_add("a - b", "a * b", "e1")], max_iterations=2, **config)
    result = await first.run("make add() add its arguments")
    assert result.finish_reason is FinishReason.MAX_ITERATIONS
    replace_last_checkpoint(tmp_path, result.session_id, old("phased")["checkpoint"])
    again = agent(
        tmp_path, [fix_add("a * b", "a + b", "e2"), finish("fixed add", cid="done")], **config
    )
    resumed = await again.resume(result.session_id, override_limits=True)
    assert resumed.finish_reason is FinishReason.COMPLETED, resumed.error
    store = SessionStore(tmp_path / "s")
    try:
        assert store.checkpoint(result.session_id)[1]["version"] == CHECKPOINT_VERSION
    finally:
        store.close()
