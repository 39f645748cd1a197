"""Reliability scenario 4: the escape corpus (tests/support/sandbox_trials.py) against each sandbox.

Under bubblewrap nothing may escape. Under local the file tools are confined by path, while
run_command is not confined at all: the local test states what it can reach.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journeyman.tools.sandbox import LocalSandbox, open_sandbox
from tests.support.sandbox_trials import EscapeLab, Outcome, summarise

from .sandboxes import needs_bwrap

pytestmark = pytest.mark.slow


def escapes(outcomes: list[Outcome]) -> list[str]:
    return [f"{o.attempt.name}: {o.detail}" for o in outcomes if o.escaped]


@pytest.fixture
def lab(tmp_path: Path) -> EscapeLab:
    with EscapeLab(tmp_path / "lab") as scene:
        yield scene  # type: ignore[misc]


async def test_corpus_has_at_least_50_attempts(lab: EscapeLab) -> None:
    attempts = lab.file_tool_attempts() + lab.command_attempts()
    assert len(attempts) >= 50
    assert len({a.name for a in attempts}) == len(attempts)


async def test_file_tools_never_escape(lab: EscapeLab) -> None:
    outcomes = await lab.run(lab.file_tool_attempts())
    assert escapes(outcomes) == []
    assert summarise(outcomes)["attempts"] >= 35


async def test_a_hard_link_is_the_linked_file(lab: EscapeLab) -> None:
    """Known fact, not an escape: a hard link placed in the workspace reads as its file;
    writing through it replaces the workspace name only."""
    outcomes = await lab.run([])
    assert outcomes == []
    from journeyman.core.messages import ToolCall
    from journeyman.tools.builtin import default_tools
    from journeyman.tools.context import ToolContext
    from journeyman.tools.registry import ToolRegistry

    registry = ToolRegistry(default_tools())
    ctx = ToolContext(workspace=lab.workspace)
    read = await registry.execute(ToolCall("r", "read_file", {"path": "hard"}), ctx, 10)
    assert lab.linked_token in read.content
    await registry.execute(
        ToolCall("w", "write_file", {"path": "hard", "content": "new\n"}), ctx, 10
    )
    assert lab.linked.read_text() == lab.linked_token + "\n"


@needs_bwrap
async def test_commands_never_escape_bubblewrap(lab: EscapeLab) -> None:
    outcomes = await lab.run(lab.command_attempts(), open_sandbox("bubblewrap", lab.workspace))
    assert escapes(outcomes) == []
    assert summarise(outcomes)["attempts"] >= 30


async def test_what_commands_reach_under_local(lab: EscapeLab) -> None:
    """The local sandbox confines nothing: what the user can touch, a command can."""
    outcomes = await lab.run(lab.command_attempts(), LocalSandbox(lab.workspace))
    by_name = {o.attempt.name: o for o in outcomes}
    out = lab.outside
    assert by_name["run echo x > ../outside/c1"].escaped
    assert by_name[f"run echo x > {out}/c2"].escaped
    assert by_name["run echo x >> link_file"].escaped
    assert by_name["run cat ../outside/secret.txt"].escaped
    assert by_name[f"run touch /etc/{lab.tag}"].escaped == os.access("/etc", os.W_OK)
    home = os.path.expanduser("~")
    assert by_name[f"run touch ~/.{lab.tag}"].escaped == os.access(home, os.W_OK)
    network = [o for o in outcomes if o.attempt.kind == "network"]
    assert network and all(o.escaped for o in network if "curl" not in o.attempt.name)
    # ... and the attempts left nothing behind
    assert not any(path.exists() for path in lab.stray_paths())
    assert lab.secret.read_text() == lab.token + "\n"
