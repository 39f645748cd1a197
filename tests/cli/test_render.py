"""The text output's line for a tool result: a mark, then a one-line preview."""

from __future__ import annotations

import pytest
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


def printed(*events: ev.Event) -> str:
    console = Console(record=True, width=400, force_terminal=False)
    renderer = Renderer(OutputFormat.TEXT, console)
    for event in events:
        renderer(event)
    return console.export_text()


def test_model_text_and_tool_output_cannot_drive_the_terminal() -> None:
    attack = "done\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\r\x1b[2Kall tests pass"
    text = printed(
        ev.TextDelta(attack),
        ev.ToolResultReceived(1, ToolResult("c", "run_command", attack), 0.1),
    )
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert "\\x1b]52" in text


def test_secrets_are_redacted_in_the_text_output(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-" + "q" * 32
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    text = printed(
        ev.TextDelta(f"the key is {secret}"),
        ev.ToolResultReceived(1, ToolResult("c", "run_command", f"KEY={secret}"), 0.1),
        ev.ErrorOccurred("tool", f"failed with {secret}", False, {}),
    )
    assert secret not in text
