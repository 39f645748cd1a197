"""The same questions to a real pyright (installed with `npm install -g pyright`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from journeyman.core.messages import ToolCall
from journeyman.integrations.lsp import LspManager, with_lsp
from journeyman.integrations.lsp.servers import find_executable
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry

from .conftest import builtin, only

pytestmark = [
    pytest.mark.skipif(
        find_executable("pyright-langserver") is None,
        reason="pyright-langserver is not installed (CI installs it with `npm install -g "
        "pyright` when npm is present)",
    ),
    pytest.mark.slow,
]


async def test_pyright_navigation_and_diagnostics_after_edits(project: Path) -> None:
    assert LspManager(project).server_for("pkg/main.py") == "pyright"  # preferred to pylsp
    manager = only(builtin("pyright"), project, diagnostics_wait=10.0)
    registry = ToolRegistry(with_lsp(default_tools(), manager))
    ctx = ToolContext(project)
    async with manager:
        found = await manager.definition("pkg/main.py", 5, 12)
        assert found.ok, found.problem
        assert [(d.path, d.line, d.column) for d in found.value] == [("pkg/shapes.py", 4, 5)]

        refs = await manager.references("pkg/shapes.py", 4, 5)
        assert {(r.path, r.line) for r in refs.value} >= {("pkg/main.py", 5), ("pkg/shapes.py", 14)}

        hover = await manager.hover("pkg/main.py", 5, 12)
        assert hover.value is not None and "width: int" in hover.value.text

        symbols = await manager.symbols("Squ")
        assert [(s.kind, s.name, s.location.path) for s in symbols.value] == [
            ("class", "Square", "pkg/shapes.py")
        ]

        broken = await registry.execute(
            ToolCall(
                "1",
                "edit_file",
                {"path": "pkg/main.py", "old_string": "area(2", "new_string": "aera(2"},
            ),
            ctx,
            timeout=60,
        )
        assert "pyright reports 1 error" in broken.content, broken.content
        assert (
            '5:12 error: "aera" is not defined [Pyright reportUndefinedVariable]' in broken.content
        )

        fixed = await registry.execute(
            ToolCall(
                "2",
                "edit_file",
                {"path": "pkg/main.py", "old_string": "aera(2", "new_string": "area(2"},
            ),
            ctx,
            timeout=60,
        )
        assert fixed.content.endswith("pyright: no problems reported in pkg/main.py"), fixed.content


async def test_pyright_diagnostics_after_an_edit_are_for_the_new_text(project: Path) -> None:
    """Right after `area(` becomes `hass(`, pyright's answer names `hass` or says it is still
    analysing version 2; the clean list of version 1 is never served as current."""
    manager = only(builtin("pyright"), project, diagnostics_wait=1.0)
    main = project / "pkg" / "main.py"
    async with manager:
        for _ in range(60):  # version 1 first, so that a stale clean list exists to be avoided
            opened = await manager.diagnostics("pkg/main.py")
            if not opened.analysing:
                break
        assert (opened.value, opened.analysing) == ([], {})

        main.write_text(main.read_text().replace("area(2", "hass(2"))
        answers = [await manager.notify_file_changed(main, main.read_text())]
        while answers[-1].analysing and len(answers) < 60:
            answers.append(await manager.diagnostics("pkg/main.py"))
        for answer in answers[:-1]:
            assert (answer.value, answer.analysing) == ([], {"pkg/main.py": 2})
        final = answers[-1]
        assert [(d.line, d.column, d.message) for d in final.value] == [
            (5, 12, '"hass" is not defined')
        ], final
