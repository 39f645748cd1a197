"""Servers that crash, hang, talk nonsense or are missing: reported, restarted once, then off."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from journeyman.core.messages import ToolCall
from journeyman.integrations.lsp import LspConfig, LspManager, ServerConfig, with_lsp
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry

from .conftest import builtin, fake, needs_pylsp, only


def pid_of(manager: LspManager, name: str) -> int:
    pid = {s.name: s for s in manager.status()}[name].pid
    assert pid is not None
    return pid


async def wait_for_state(manager: LspManager, name: str, state: str) -> None:
    for _ in range(100):
        if {s.name: s for s in manager.status()}[name].state == state:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never reached {state!r}: {manager.status()}")


@needs_pylsp
@pytest.mark.slow
async def test_a_killed_server_is_restarted_once_then_left_off(project: Path) -> None:
    async with only(builtin("pylsp"), project) as manager:
        assert (await manager.definition("pkg/main.py", 5, 12)).ok
        first = pid_of(manager, "pylsp")
        os.kill(first, signal.SIGKILL)
        await wait_for_state(manager, "pylsp", "crashed")
        crashed = {s.name: s for s in manager.status()}["pylsp"]
        assert "was killed by SIGKILL" in (crashed.last_error or "")
        assert manager.running_for(project / "pkg/main.py") is None

        again = await manager.definition("pkg/main.py", 5, 12)
        assert again.ok and again.value[0].path == "pkg/shapes.py"
        assert "had stopped" in (again.notice or "") and "restarted" in (again.notice or "")
        second = pid_of(manager, "pylsp")
        assert second != first
        assert {s.name: s for s in manager.status()}["pylsp"].restarts == 1

        os.kill(second, signal.SIGKILL)
        await wait_for_state(manager, "pylsp", "unavailable")
        off = await manager.hover("pkg/main.py", 5, 12)
        assert not off.ok and "unavailable" in (off.problem or "")
        assert "use grep and read_file" in (off.problem or "")

        # the agent's tools keep working around it: the LSP call fails, edits succeed plainly
        registry = ToolRegistry(with_lsp(default_tools(), manager))
        ctx = ToolContext(project)
        failed = await registry.execute(
            ToolCall("1", "lsp_definition", {"path": "pkg/main.py", "line": 5, "symbol": "area"}),
            ctx,
            timeout=30,
        )
        assert failed.is_error and failed.metadata["error"] == "lsp_unavailable"
        edited = await registry.execute(
            ToolCall("2", "write_file", {"path": "pkg/new.py", "content": "x = 1\n"}), ctx, 30
        )
        assert not edited.is_error and edited.content == "created pkg/new.py (1 lines)"


async def test_a_hanging_server_times_out_is_killed_and_restarted_once(project: Path) -> None:
    async with only(fake("hang"), project, request_timeout=0.5) as manager:
        first = await manager.definition("pkg/main.py", 1, 1)
        assert not first.ok
        assert "did not answer textDocument/definition within 0.5 s" in (first.problem or "")
        assert "will be restarted on the next request" in (first.problem or "")
        assert manager.running_for(project / "pkg/main.py") is None

        second = await manager.references("pkg/main.py", 1, 1)
        assert "restarted" in (second.notice or "")
        assert "stays off for this session" in (second.problem or "")

        third = await manager.hover("pkg/main.py", 1, 1)
        assert "unavailable" in (third.problem or "") and third.notice is None
        status = {s.name: s for s in manager.status()}["fake"]
        assert status.state == "unavailable" and status.restarts == 1 and status.pid is None


async def test_a_server_that_never_initializes(project: Path) -> None:
    async with only(fake("mute"), project, startup_timeout=0.5) as manager:
        reply = await manager.diagnostics("pkg/main.py")
        assert not reply.ok and "did not answer initialize within 0.5 s" in (reply.problem or "")
        assert {s.name: s for s in manager.status()}["fake"].state == "crashed"


async def test_a_server_that_exits_or_breaks_the_framing(project: Path) -> None:
    async with only(fake("crash"), project) as manager:
        reply = await manager.definition("pkg/main.py", 1, 1)
        assert not reply.ok
        assert "exited with code 3" in (reply.problem or "")
        assert "fake server: giving up" in (reply.problem or "")
    async with only(fake("garbage"), project) as manager:
        reply = await manager.definition("pkg/main.py", 1, 1)
        assert not reply.ok and "sent data that is not LSP" in (reply.problem or "")


async def test_missing_servers_files_and_switches_are_replies_not_errors(project: Path) -> None:
    absent = ServerConfig(
        name="ghost", language="python", command=["journeyman-no-such-server"], extensions=[".py"]
    )
    async with only(absent, project) as manager:
        assert manager.usable() == []
        reply = await manager.definition("pkg/main.py", 1, 1)
        assert reply.server == "ghost"
        assert "ghost (journeyman-no-such-server) is not installed" in (reply.problem or "")
        (project / "notes.txt").write_text("hi\n")
        other = await manager.hover("notes.txt", 1, 1)
        assert "no language server is configured for .txt files" in (other.problem or "")
        nowhere = await manager.symbols("x", "pkg/missing.py")
        assert "does not exist" in (nowhere.problem or "")
        everything = await manager.diagnostics()
        assert "no language server is running yet" in (everything.problem or "")

    off = LspManager(project, LspConfig(enabled=False))
    assert off.usable() == []
    reply = await off.definition("pkg/main.py", 1, 1)
    assert "turned off" in (reply.problem or "")
    await off.aclose()
    after = await off.definition("pkg/main.py", 1, 1)
    assert "shut down" in (after.problem or "")
