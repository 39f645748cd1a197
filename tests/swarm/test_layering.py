"""swarm sits above loop: no layer below it imports it (DESIGN.md, "Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

import journeyman

BELOW_SWARM = (
    "core", "providers", "tools", "economics", "policy", "session", "integrations", "context",
    "loop",
)  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_layer_below_swarm_imports_it() -> None:
    root = Path(journeyman.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for layer in BELOW_SWARM
        for path in sorted((root / layer).rglob("*.py"))
        if any(name.startswith("journeyman.swarm") for name in imported_modules(path))
    ]
    assert offenders == []
