"""Diagnostics always answer the file's current text: never an earlier version's list.

The slow analysers of tests/fakes/lsp_server.py hold their diagnostics until the test sends
`fake/release`, so "the server has not finished" is an event the test controls, not a race.
"""

from __future__ import annotations

from pathlib import Path

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.integrations.lsp import LspManager, lsp_tools, with_lsp
from journeyman.integrations.lsp.client import LspClient
from journeyman.integrations.lsp.positions import path_to_uri
from journeyman.loop.config import AgentConfig
from journeyman.loop.observer import LOOP_NUDGE, TurnObserver
from journeyman.loop.state import TurnOutcome
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry

from .conftest import fake, only

MAIN = "pkg/main.py"
SHORT_WAIT = 0.3
"""Seconds the manager waits while a test expects nothing to arrive (the fake holds it back)."""
LONG_WAIT = 30.0
"""Seconds it waits once the fake was told to answer: only reached if the answer is lost."""


def client_of(manager: LspManager) -> LspClient:
    client = manager._servers["fake"].client
    assert client is not None
    return client


async def release(manager: LspManager, root: Path, *, pushed: bool = True) -> None:
    """Let the fake finish analysing the current version (and, for push servers, wait for it)."""
    client = client_of(manager)
    uri = path_to_uri(root / MAIN)
    await client.notify("fake/release", {"uri": uri})
    if pushed:
        assert await client.wait_for_current(uri, LONG_WAIT) is not None


def edit(root: Path, old: str, new: str) -> str:
    file = root / MAIN
    text = file.read_text().replace(old, new)
    assert old in file.read_text()
    file.write_text(text)
    return text


async def check_push_server(mode: str, project: Path) -> None:
    manager = only(fake(mode), project, diagnostics_wait=SHORT_WAIT)
    async with manager:
        opened = await manager.diagnostics(MAIN)
        assert opened.ok, opened.problem
        assert (opened.value, opened.analysing) == ([], {MAIN: 1})

        await release(manager, project)
        clean = await manager.diagnostics(MAIN)
        assert (clean.value, clean.analysing, clean.complete) == ([], {}, True)

        broken = await manager.notify_file_changed(MAIN, edit(project, "area(2", "hass(2"))
        assert (broken.value, broken.analysing) == ([], {MAIN: 2})  # not version 1's "clean"
        again = await manager.diagnostics(MAIN)
        assert (again.value, again.analysing) == ([], {MAIN: 2})

        await release(manager, project)
        named = await manager.diagnostics(MAIN)
        assert [(d.line, d.column, d.message) for d in named.value] == [
            (5, 12, '"hass" is not defined')
        ]

        await manager.notify_file_changed(MAIN, edit(project, "hass(2", "area(2"))
        fixed = await manager.diagnostics(MAIN)
        assert (fixed.value, fixed.analysing) == ([], {MAIN: 3})  # version 2's error is gone
        everything = await manager.diagnostics()
        assert (everything.value, everything.analysing) == ([], {MAIN: 3})


async def test_a_versioned_server_late_publication_for_the_old_text_is_not_served(
    project: Path,
) -> None:
    await check_push_server("versioned", project)


async def test_an_unversioned_server_counts_only_publications_after_the_change(
    project: Path,
) -> None:
    await check_push_server("unversioned", project)


async def test_a_pull_server_is_asked_for_the_current_text(project: Path) -> None:
    manager = only(fake("pull"), project, diagnostics_wait=SHORT_WAIT)
    async with manager:
        waiting = await manager.diagnostics(MAIN)
        assert (waiting.ok, waiting.value, waiting.analysing) == (True, [], {MAIN: 1})
        await release(manager, project, pushed=False)
        manager.config.diagnostics_wait = LONG_WAIT
        clean = await manager.diagnostics(MAIN)
        assert (clean.value, clean.analysing) == ([], {})

        manager.config.diagnostics_wait = SHORT_WAIT
        broken = await manager.notify_file_changed(MAIN, edit(project, "area(2", "hass(2"))
        assert (broken.value, broken.analysing) == ([], {MAIN: 2})
        await release(manager, project, pushed=False)
        manager.config.diagnostics_wait = LONG_WAIT
        named = await manager.diagnostics(MAIN)
        assert [d.message for d in named.value] == ['"hass" is not defined']
        assert manager.status()[0].state == "running"  # a slow answer is not a hang


async def test_still_analysing_answers_are_not_a_doom_loop(project: Path) -> None:
    manager = only(fake("versioned"), project, diagnostics_wait=SHORT_WAIT)
    registry = ToolRegistry(lsp_tools(manager))
    ctx = ToolContext(project)
    observer = TurnObserver(AgentConfig(), registry.kind_of)
    async with manager:
        calls = [ToolCall(f"c{n}", "lsp_diagnostics", {"path": MAIN}) for n in range(3)]
        results: list[ToolResult] = []
        for call in calls:
            result = await registry.execute(call, ctx, timeout=LONG_WAIT)
            assert not result.is_error, result.content
            assert result.content.startswith(f"still analysing {MAIN} (version 1)")
            assert result.metadata["pending"] is True
            results.append(result)
            nudges = observer.observe(TurnOutcome(calls=(call,), results=(result,)))
            assert LOOP_NUDGE not in [kind for kind, _ in nudges]

        await release(manager, project)
        for call in calls:  # the same question with a real, unchanging answer does loop
            result = await registry.execute(call, ctx, timeout=LONG_WAIT)
            assert result.content == f"no problems reported in {MAIN}"
            assert "pending" not in result.metadata
            nudges = observer.observe(TurnOutcome(calls=(call,), results=(result,)))
        assert LOOP_NUDGE in [kind for kind, _ in nudges]


async def test_an_edit_result_says_still_analysing_instead_of_the_old_list(
    project: Path,
) -> None:
    manager = only(fake("versioned"), project, diagnostics_wait=SHORT_WAIT)
    registry = ToolRegistry(with_lsp(default_tools(), manager))
    ctx = ToolContext(project)
    async with manager:
        edit(project, "area(2", "hass(2")
        await manager.diagnostics(MAIN)  # starts the server on version 1
        await release(manager, project)
        assert len((await manager.diagnostics(MAIN)).value) == 1

        fixed = await registry.execute(
            ToolCall(
                "e", "edit_file", {"path": MAIN, "old_string": "hass(2", "new_string": "area(2"}
            ),
            ctx,
            timeout=LONG_WAIT,
        )
        assert not fixed.is_error, fixed.content
        assert fixed.content.endswith(
            f"(fake is still analysing {MAIN} (version 2); lsp_diagnostics can ask again)"
        ), fixed.content
        assert "hass" not in fixed.content.split("\n\n")[-1]
