"""A tool argument of the wrong type or value is one plain line naming the argument and what
it may be, never the validation library's report with its links."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.protocols.mcp_server.conftest import in_process_client


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (
            {"sandbox": "none"},
            "sandbox: 'none' is not one of 'auto', 'local', 'bubblewrap' or 'docker'",
        ),
        ({"max_iterations": "many"}, "max_iterations: input should be a valid integer"),
        ({"max_iterations": 0}, "max_iterations: input should be greater than or equal to 1"),
    ],
)
async def test_a_bad_argument_is_one_plain_line(
    fake_openai: FakeOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    arguments: dict[str, object],
    said: str,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with in_process_client(tmp_path, workspace, fake_openai, monkeypatch) as client:
        result = await client.call_tool("start_run", {"task": "x", **arguments})
    assert result.is_error
    text = result.content[0].text
    assert said in text
    assert text.startswith("start_run: invalid arguments: ")
    assert "pydantic" not in text and "\n" not in text
