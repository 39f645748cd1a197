"""read_file, write_file, edit_file, list_files and glob through the registry."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from journeyman.core.errors import ToolError
from journeyman.tools.context import FileChangeIntent
from journeyman.tools.edit_match import apply_edit
from journeyman.tools.globbing import expand_braces, glob_regex
from journeyman.tools.read import MAX_READ_LINES

from .conftest import CallTool

# --------------------------------------------------------------------------------------------
# read_file


async def test_read_file_numbers_lines(call: CallTool, workspace: Path) -> None:
    (workspace / "a.py").write_text("first\nsecond\n")
    result = await call("read_file", path="a.py")
    assert not result.is_error
    assert result.content == "     1\tfirst\n     2\tsecond"
    assert result.call_id == "call-1"
    assert result.metadata["total_lines"] == 2


async def test_read_file_offset_and_limit(call: CallTool, workspace: Path) -> None:
    (workspace / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await call("read_file", path="a.txt", offset=4, limit=3)
    assert result.content.splitlines()[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "showing lines 4-6 of 10" in result.content
    assert "offset=7" in result.content


async def test_read_file_caps_lines_and_says_how_to_go_on(call: CallTool, workspace: Path) -> None:
    (workspace / "big.txt").write_text("x\n" * (MAX_READ_LINES + 500))
    result = await call("read_file", path="big.txt")
    assert result.metadata["end_line"] == MAX_READ_LINES
    assert f"offset={MAX_READ_LINES + 1}" in result.content
    rest = await call("read_file", path="big.txt", offset=MAX_READ_LINES + 1)
    assert rest.metadata["end_line"] == MAX_READ_LINES + 500
    assert "showing" not in rest.content


async def test_read_file_caps_bytes(call: CallTool, workspace: Path) -> None:
    (workspace / "wide.txt").write_text(("y" * 999 + "\n") * 1000)  # about 1 MB
    result = await call("read_file", path="wide.txt")
    assert len(result.content) < 300 * 1024
    assert "call read_file with offset=" in result.content


async def test_read_file_cuts_very_long_lines(call: CallTool, workspace: Path) -> None:
    (workspace / "min.js").write_text("z" * 5000 + "\n")
    result = await call("read_file", path="min.js")
    assert "line cut, 3000 more characters" in result.content


async def test_read_file_limit_is_validated(call: CallTool, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    result = await call("read_file", path="a.txt", limit=0)
    assert result.is_error and "limit" in result.content
    result = await call("read_file", path="a.txt", bogus=1)
    assert result.is_error and "bogus" in result.content


async def test_read_file_binary(call: CallTool, workspace: Path) -> None:
    (workspace / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    result = await call("read_file", path="logo.png")
    assert result.is_error
    assert "logo.png is a binary file" in result.content


async def test_read_file_missing_suggests_close_names(call: CallTool, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("")
    (workspace / "src" / "apps.py").write_text("")
    result = await call("read_file", path="src/ap.py")
    assert result.is_error
    assert "src/ap.py does not exist" in result.content
    assert "src/app.py" in result.content and "src/apps.py" in result.content


async def test_read_file_missing_dir_points_to_same_name(call: CallTool, workspace: Path) -> None:
    (workspace / "pkg" / "core").mkdir(parents=True)
    (workspace / "pkg" / "core" / "models.py").write_text("")
    result = await call("read_file", path="core/models.py")
    assert result.is_error
    assert "no directory core" in result.content
    assert "pkg/core/models.py" in result.content


async def test_read_file_directory_empty_and_past_end(call: CallTool, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "empty.txt").write_text("")
    (workspace / "short.txt").write_text("one\n")
    assert "is a directory" in (await call("read_file", path="d")).content
    empty = await call("read_file", path="empty.txt")
    assert not empty.is_error and "empty" in empty.content
    past = await call("read_file", path="short.txt", offset=5)
    assert past.is_error and "has 1 lines" in past.content


async def test_read_file_hides_crlf(call: CallTool, workspace: Path) -> None:
    (workspace / "dos.txt").write_bytes(b"a\r\nb\r\n")
    assert (await call("read_file", path="dos.txt")).content == "     1\ta\n     2\tb"


# --------------------------------------------------------------------------------------------
# write_file


async def test_write_file_creates_parents(
    call: CallTool, workspace: Path, journal: list[FileChangeIntent]
) -> None:
    result = await call("write_file", path="new/deep/mod.py", content="x = 1\ny = 2\n")
    assert not result.is_error
    assert result.content == "created new/deep/mod.py (2 lines)"
    assert (workspace / "new/deep/mod.py").read_text() == "x = 1\ny = 2\n"
    # The texts live in the journal only; the result (stored in messages and events) keeps
    # small facts.
    assert result.metadata == {
        "path": "new/deep/mod.py",
        "change": "created",
        "lines_before": 0,
        "lines_after": 2,
    }
    assert journal == [FileChangeIntent("new/deep/mod.py", None, "x = 1\ny = 2\n", "write_file")]


async def test_write_file_overwrites_and_keeps_mode(
    call: CallTool, workspace: Path, journal: list[FileChangeIntent]
) -> None:
    script = workspace / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o755)
    result = await call("write_file", path="run.sh", content="echo new\necho more")
    assert result.content == "overwrote run.sh (1 -> 2 lines)"
    assert result.metadata["change"] == "modified"
    assert "before" not in result.metadata and "after" not in result.metadata
    assert [(c.before, c.after) for c in journal] == [("echo old\n", "echo new\necho more")]
    assert script.read_text() == "echo new\necho more"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert [p.name for p in workspace.iterdir()] == ["run.sh"]  # no temporary file left


async def test_write_file_same_content_is_not_a_change(call: CallTool, workspace: Path) -> None:
    (workspace / "a.txt").write_text("same\n")
    result = await call("write_file", path="a.txt", content="same\n")
    assert not result.is_error
    assert "change" not in result.metadata
    assert "nothing written" in result.content


async def test_write_file_refuses_binary_and_directories(call: CallTool, workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02")
    (workspace / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (workspace / "d").mkdir()
    binary = await call("write_file", path="blob.bin", content="text")
    assert binary.is_error and "binary" in binary.content
    assert (workspace / "blob.bin").read_bytes() == b"\x00\x01\x02"
    latin = await call("write_file", path="latin1.txt", content="text")
    assert latin.is_error and "not valid UTF-8" in latin.content
    directory = await call("write_file", path="d", content="text")
    assert directory.is_error and "is a directory" in directory.content


async def test_write_file_through_symlink_inside_workspace(call: CallTool, workspace: Path) -> None:
    (workspace / "real.txt").write_text("old\n")
    (workspace / "alias.txt").symlink_to("real.txt")
    result = await call("write_file", path="alias.txt", content="new\n")
    assert result.metadata["path"] == "real.txt"
    assert (workspace / "alias.txt").is_symlink()
    assert (workspace / "real.txt").read_text() == "new\n"


# --------------------------------------------------------------------------------------------
# edit_file


SOURCE = """\
def add(a, b):
    return a + b


def sub(a, b):
    return a - b
"""


async def test_edit_file_unique_exact_match(
    call: CallTool, workspace: Path, journal: list[FileChangeIntent]
) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await call("edit_file", path="m.py", old_string="a - b", new_string="a - b - 0")
    assert not result.is_error, result.content
    assert (workspace / "m.py").read_text() == SOURCE.replace("a - b", "a - b - 0")
    assert result.content.startswith("edited m.py: replaced 1 occurrence at line 6")
    assert "     6\t    return a - b - 0" in result.content
    assert result.metadata["change"] == "modified"
    assert "before" not in result.metadata and "after" not in result.metadata
    assert [(c.before, c.after) for c in journal] == [(SOURCE, (workspace / "m.py").read_text())]
    assert result.metadata["match"] == "exact"


async def test_edit_file_multiple_matches_lists_lines(call: CallTool, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await call("edit_file", path="m.py", old_string="(a, b)", new_string="(a, b=0)")
    assert result.is_error
    assert "matched 2 times in m.py (lines 1, 5)" in result.content
    assert "replace_all=true" in result.content
    assert (workspace / "m.py").read_text() == SOURCE


async def test_edit_file_replace_all(call: CallTool, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await call(
        "edit_file", path="m.py", old_string="(a, b)", new_string="(x, y)", replace_all=True
    )
    assert not result.is_error
    assert result.metadata["replacements"] == 2
    assert (workspace / "m.py").read_text().count("(x, y)") == 2


async def test_edit_file_identical_strings(call: CallTool, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await call("edit_file", path="m.py", old_string="add", new_string="add")
    assert result.is_error and "identical" in result.content


async def test_edit_file_no_match_shows_closest_lines(call: CallTool, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await call(
        "edit_file", path="m.py", old_string="def sub(a, c):\n    return a - c", new_string="x"
    )
    assert result.is_error
    assert "not found in m.py" in result.content
    assert "lines 5-6" in result.content
    assert "     5\tdef sub(a, b):" in result.content
    assert (workspace / "m.py").read_text() == SOURCE


async def test_edit_file_nothing_similar(call: CallTool, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await call("edit_file", path="m.py", old_string="zzzzqqqq", new_string="x")
    assert result.is_error and "Nothing in m.py resembles it" in result.content


async def test_edit_file_hint_about_line_numbers(call: CallTool, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await call(
        "edit_file", path="m.py", old_string="     2\t    return a + b", new_string="pass"
    )
    assert result.is_error and "line numbers" in result.content


async def test_edit_file_whitespace_tolerant_reindents(call: CallTool, workspace: Path) -> None:
    text = "class A:\n    def f(self):\n        if x:\n            return 1\n        return 2\n"
    (workspace / "a.py").write_text(text)
    # The model lost the class-level indentation.
    old = "def f(self):\n    if x:\n        return 1"
    new = "def f(self):\n    if x and y:\n        return 1\n    log()"
    result = await call("edit_file", path="a.py", old_string=old, new_string=new)
    assert not result.is_error, result.content
    assert result.metadata["match"] == "whitespace"
    assert "lines 2-5" in result.content
    assert (workspace / "a.py").read_text() == (
        "class A:\n    def f(self):\n        if x and y:\n            return 1\n"
        "        log()\n        return 2\n"
    )


async def test_edit_file_whitespace_match_must_be_unique(call: CallTool, workspace: Path) -> None:
    (workspace / "a.py").write_text("if a:\n    pass\nif b:\n  pass\n")
    result = await call("edit_file", path="a.py", old_string="pass  ", new_string="return")
    assert result.is_error
    assert "matches 2 places (lines 2, 4)" in result.content


async def test_edit_file_keeps_crlf(call: CallTool, workspace: Path) -> None:
    (workspace / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = await call("edit_file", path="dos.txt", old_string="two\nthree", new_string="2\n3")
    assert not result.is_error, result.content
    assert (workspace / "dos.txt").read_bytes() == b"one\r\n2\r\n3\r\n"


async def test_edit_file_empty_old_string(call: CallTool, workspace: Path) -> None:
    created = await call("edit_file", path="pkg/new.py", old_string="", new_string="x = 1\n")
    assert not created.is_error
    assert created.metadata["change"] == "created" and created.metadata["lines_after"] == 1
    assert (workspace / "pkg/new.py").read_text() == "x = 1\n"
    refused = await call("edit_file", path="pkg/new.py", old_string="", new_string="y")
    assert refused.is_error and "already has content" in refused.content


async def test_edit_file_missing_file(call: CallTool, workspace: Path) -> None:
    (workspace / "main.py").write_text("")
    result = await call("edit_file", path="mian.py", old_string="a", new_string="b")
    assert result.is_error and "main.py" in result.content
    assert not (workspace / "mian.py").exists()


def test_apply_edit_deletes_lines_with_tolerant_match() -> None:
    outcome = apply_edit("a\n    b\n    c\nd\n", "b\nc\n", "")
    assert outcome.text == "a\nd\n"
    assert outcome.match == "whitespace"


_TEXT = st.text(alphabet="ab \n\t", max_size=30)


@st.composite
def unique_edits(draw: st.DrawFn) -> tuple[str, str, str]:
    """(text, old, new): `old` occurs once in text and `new` once in the edited text.

    Each carries one marker character found nowhere else, which makes it unique.
    """
    before, after = draw(_TEXT), draw(_TEXT)
    old = draw(_TEXT) + draw(st.sampled_from("QRS")) + draw(_TEXT)
    new = draw(_TEXT) + draw(st.sampled_from("UVW")) + draw(_TEXT)
    return before + old + after, old, new


@given(unique_edits())
def test_edit_then_reverse_edit_restores_text(case: tuple[str, str, str]) -> None:
    text, old, new = case
    edited = apply_edit(text, old, new)
    assert edited.match == "exact" and edited.replacements == 1
    assert edited.text == text.replace(old, new)
    assert apply_edit(edited.text, new, old).text == text


@given(text=st.text(alphabet="ab \n", max_size=40), old=st.text(alphabet="ab \n", min_size=1))
def test_apply_edit_never_changes_on_error(text: str, old: str) -> None:
    try:
        outcome = apply_edit(text, old, old + "z")
    except ToolError as exc:
        assert exc.message.startswith("edit_file:")
    else:
        assert outcome.replacements == 1


# --------------------------------------------------------------------------------------------
# list_files and glob


@pytest.fixture
def tree(workspace: Path) -> Path:
    files = {
        ".gitignore": "build/\n*.log\n",
        "README.md": "",
        "src/app.py": "",
        "src/util.py": "",
        "src/.gitignore": "!keep.log\ngenerated.py\n",
        "src/keep.log": "",
        "src/debug.log": "",
        "src/generated.py": "",
        "src/pkg/mod.pyi": "",
        "build/out.py": "",
        ".github/ci.yml": "",
        ".git/HEAD": "ref\n",
        "notes.log": "",
    }
    for name, content in files.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(content)
    return workspace


async def test_list_files_top_level(call: CallTool, tree: Path) -> None:
    result = await call("list_files")
    assert result.content.splitlines() == [".github/", ".gitignore", "README.md", "src/"]


async def test_list_files_recursive_respects_gitignore(call: CallTool, tree: Path) -> None:
    result = await call("list_files", path="src", recursive=True)
    assert result.content.splitlines() == [
        "src/.gitignore",
        "src/app.py",
        "src/keep.log",
        "src/pkg/",
        "src/pkg/mod.pyi",
        "src/util.py",
    ]


async def test_list_files_ignored_dir_when_asked(call: CallTool, tree: Path) -> None:
    result = await call("list_files", path="build")
    assert result.content.splitlines() == ["build/out.py"]


async def test_list_files_cap_and_errors(call: CallTool, tree: Path) -> None:
    capped = await call("list_files", recursive=True, max_entries=3)
    assert len(capped.content.splitlines()) == 4 and "stopped after 3" in capped.content
    assert capped.metadata["truncated"] is True
    not_dir = await call("list_files", path="README.md")
    assert not_dir.is_error and "use read_file" in not_dir.content
    missing = await call("list_files", path="scr")
    assert missing.is_error and "src" in missing.content


async def test_list_files_marks_symlinks(call: CallTool, tree: Path) -> None:
    (tree / "latest").symlink_to("src")
    assert "latest@" in (await call("list_files")).content.splitlines()


async def test_glob_recursive_sorted_and_ignored(call: CallTool, tree: Path) -> None:
    result = await call("glob", pattern="**/*.py")
    assert result.content.splitlines() == ["src/app.py", "src/util.py"]
    braces = await call("glob", pattern="**/*.{py,pyi,yml}")
    assert braces.content.splitlines() == [
        ".github/ci.yml",
        "src/app.py",
        "src/pkg/mod.pyi",
        "src/util.py",
    ]


async def test_glob_from_path(call: CallTool, tree: Path) -> None:
    result = await call("glob", pattern="*.py", path="src")
    assert result.content.splitlines() == ["src/app.py", "src/util.py"]


async def test_glob_no_match_hint_and_cap(call: CallTool, tree: Path) -> None:
    none = await call("glob", pattern="*.py")
    assert not none.is_error and "try '**/*.py'" in none.content
    capped = await call("glob", pattern="**/*", max_results=2)
    assert capped.metadata["truncated"] is True and "stopped after 2" in capped.content


@pytest.mark.parametrize("pattern", ["../*", "/etc/*", "src/../../x", ""])
async def test_glob_rejects_escaping_patterns(call: CallTool, tree: Path, pattern: str) -> None:
    result = await call("glob", pattern=pattern)
    assert result.is_error


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a.py", True),
        ("*.py", "d/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "d/e/a.py", True),
        ("src/**", "src/a/b", True),
        ("src/**/x", "src/x", True),
        ("?.txt", "ab.txt", False),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "b.txt", False),
        ("*.{js,ts}", "m.ts", True),
        ("a+b(c).txt", "a+b(c).txt", True),
    ],
)
def test_glob_regex(pattern: str, path: str, expected: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is expected


def test_expand_braces() -> None:
    assert expand_braces("a.{x,y{1,2}}") == ["a.x", "a.y1", "a.y2"]
    assert expand_braces("{single}") == ["{single}"]


async def test_special_files_are_refused_not_read(call: CallTool, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    (workspace / "a.txt").write_text("needle\n")
    for name, arguments in [
        ("read_file", {"path": "pipe"}),
        ("write_file", {"path": "pipe", "content": "x"}),
        ("edit_file", {"path": "pipe", "old_string": "a", "new_string": "b"}),
    ]:
        result = await call(name, **arguments)
        assert result.is_error and "not a regular file" in result.content
    assert "pipe" in (await call("list_files")).content.splitlines()
    assert (await call("grep", pattern="needle")).content == "a.txt:1: needle"


async def test_edit_file_tolerant_match_that_changes_nothing(
    call: CallTool, workspace: Path
) -> None:
    (workspace / "a.py").write_text("if x:\n    y()\n")
    result = await call(
        "edit_file", path="a.py", old_string="\nif x:\n  y()", new_string="if x:\n  y()"
    )
    assert result.is_error and "would not change" in result.content
