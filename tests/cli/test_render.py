"""The text output's line for a tool result: a mark, then a one-line preview."""

from __future__ import annotations

from rich.console import Console

from journeyman.cli.render import OutputFormat, Renderer
from journeyman.core import events as ev
from journeyman.core.messages import ToolResult


def shown(result: ToolResult) -> str:
    console = Console(record=True, width=200, force_terminal=False)
    Renderer(OutputFormat.TEXT, console)(ev.ToolResultReceived(1, result, 0.1))
    return console.export_text().strip()


def test_a_failing_command_shows_its_exit_code_and_last_line() -> None:
    output = (
        "test_a ... ok\ntest_b ... FAIL\n\nFAILED (failures=1)\n"
        "[exit code 1 (non-zero), after 0.2 s]"
    )
    line = shown(ToolResult("c", "run_command", output, metadata={"exit_code": 1}))
    assert line == "exit 1 FAILED (failures=1)"


def test_a_passing_command_and_other_tools() -> None:
    output = "Ran 3 tests\n\nOK\n[exit code 0, after 0.1 s]\n[a note from the tool]"
    assert shown(ToolResult("c", "run_command", output, metadata={"exit_code": 0})) == "✓ OK"
    assert shown(ToolResult("r", "read_file", "line one\nline two")) == "✓ line one line two"
    failed = ToolResult("r", "read_file", "read_file: no such file x.py", is_error=True)
    assert shown(failed) == "✗ read_file: no such file x.py"
