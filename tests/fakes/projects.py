"""Tiny workspaces for scripted runs: a `calc` package whose `add` subtracts, and its test.

root = calc_package(tmp_path)          # tmp_path / "ws"
script = [fix_add("a - b", "a + b", "e1"), finish("fixed add")]
make_agent(tmp_path, script, verify_command=CALC_TEST_COMMAND, ...)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from journeyman import Agent
from journeyman.core.events import Event
from journeyman.core.messages import ToolCall
from journeyman.loop.config import ModeName
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.tools.sandbox import SandboxKind
from tests.fakes import agents
from tests.fakes.agents import turn

BUGGY_ADD = "def add(a, b):\n    return a - b\n"
CALC_TEST = """\
import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_adds(self):
        self.assertEqual(add(2, 3), 5)
"""
CALC_TEST_COMMAND = f"{sys.executable} -m unittest -q tests.test_calc"
"""Runs the package's one test, which fails until `add` adds."""


def calc_package(tmp_path: Path) -> Path:
    """`tmp_path / "ws"` holding `calc/__init__.py` (the bug) and `tests/test_calc.py`."""
    root = tmp_path / "ws"
    (root / "calc").mkdir(parents=True)
    (root / "calc" / "__init__.py").write_text(BUGGY_ADD)
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_calc.py").write_text(CALC_TEST)
    return root


def fix_add(old: str, new: str, cid: str) -> ModelResponse:
    """A reply that edits `add`'s body from `old` to `new`."""
    args = {"path": "calc/__init__.py", "old_string": old, "new_string": new}
    return turn(ToolCall(cid, "edit_file", args), text=f"changing {old!r} to {new!r}")


def calc_finish(summary: str = "fixed add", cid: str = "done") -> ModelResponse:
    """The model says the calc task is done."""
    return agents.finish(summary, cid=cid)


def phased_calc_agent(
    tmp_path: Path,
    script: list[Any],
    *,
    events: list[Event] | None = None,
    verify: str | None = CALC_TEST_COMMAND,
    **config: Any,
) -> tuple[Agent, ScriptedProvider]:
    """A phased agent on the calc package (made on first use) that plays `script`, checked by
    the package's tests."""
    if not (tmp_path / "ws").exists():
        calc_package(tmp_path)
    return agents.make_agent(
        tmp_path,
        script,
        events=events,
        retry_policy=agents.NO_RETRY,
        mode=ModeName.PHASED,
        verify_command=verify,
        sandbox=SandboxKind.LOCAL,
        **config,
    )
