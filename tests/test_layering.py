"""The layers of DESIGN.md: each package imports only from the layers above it in the list, and
of the surfaces only the command line imports the others (it launches them); no surface
imports the command line."""

from __future__ import annotations

import ast
from pathlib import Path

import journeyman

RANK = {
    "core": 0, "providers": 1, "tools": 1, "economics": 1, "policy": 2, "session": 2,
    "integrations": 2, "context": 3, "loop": 4, "swarm": 5, "batch": 6,
    "cli": 7, "tui": 7, "inspector": 7, "protocols": 7,
}  # fmt: skip
SURFACE_RANK = 7
ROOT = Path(journeyman.__file__).parent


def imported_packages(source: str, parts: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, top-level journeyman package) of every import in `source`, the module at `parts`
    under the package: lazy and type-only imports included, relative ones resolved."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["journeyman", *parts[:-1]][: len(parts) - node.level + 1]
                modules = [".".join([*base, *([node.module] if node.module else [])])]
            else:
                modules = [node.module or ""]
        else:
            continue
        for module in modules:
            bits = module.split(".")
            if len(bits) > 1 and bits[0] == "journeyman" and bits[1] in RANK:
                found.append((node.lineno, bits[1]))
    return found


def allowed(own: str, other: str) -> bool:
    if other == own:
        return True
    if RANK[own] == RANK[other] == SURFACE_RANK:
        return own == "cli"
    return RANK[other] < RANK[own]


def test_every_import_goes_to_a_layer_above() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} ({own}) imports journeyman.{other}"
        for own in RANK
        for path in sorted((ROOT / own).rglob("*.py"))
        for line, other in imported_packages(
            path.read_text(encoding="utf-8"), path.relative_to(ROOT).parts
        )
        if not allowed(own, other)
    ]
    assert offenders == []


def test_the_check_sees_every_kind_of_import() -> None:
    source = """
import journeyman.cli.exits
from journeyman.loop import agent
from ..tui import app
def later():
    from journeyman.inspector.page import build
if TYPE_CHECKING:
    from . import spans
"""
    found = imported_packages(source, ("batch", "sub", "job.py"))
    assert [other for _line, other in found] == ["cli", "loop", "batch", "inspector", "batch"]
    assert [
        other for _line, other in imported_packages("from .. import x", ("batch", "a.py"))
    ] == []  # journeyman itself is no layer
    assert not allowed("batch", "cli") and not allowed("tui", "cli") and not allowed("core", "loop")
    assert allowed("cli", "tui") and allowed("swarm", "loop") and allowed("tui", "loop")
