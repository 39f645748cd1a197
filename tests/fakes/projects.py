"""Tiny workspaces for scripted runs: a `calc` package whose `add` subtracts, and its test.

root = calc_package(tmp_path)          # tmp_path / "ws"
script = [fix_add("a - b", "a + b", "e1"), finish("fixed add")]
make_agent(tmp_path, script, verify_command=CALC_TEST_COMMAND, ...)
"""

from __future__ import annotations

import sys
from pathlib import Path

from journeyman.core.messages import ToolCall
from journeyman.providers.base import ModelResponse
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
