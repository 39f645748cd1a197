"""apply_patch: both patch formats, atomicity, journaling, confinement, and a diff round-trip."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.tools.base import ToolKind
from journeyman.tools.context import FileChangeIntent, ToolContext
from journeyman.tools.patch import ApplyPatchTool, apply_hunks, parse_patch
from journeyman.tools.registry import ToolRegistry

APP = """\
import sys


def greet(name):
    print("Hi", name)


def main():
    greet(sys.argv[1])
    return 0
"""


async def patch(ctx: ToolContext, text: str) -> ToolResult:
    registry = ToolRegistry([ApplyPatchTool()])
    return await registry.execute(
        ToolCall(id="p-1", name="apply_patch", arguments={"patch": text}), ctx, 30
    )


@pytest.fixture
def project(workspace: Path) -> Path:
    (workspace / "src").mkdir()
    (workspace / "src/app.py").write_text(APP)
    (workspace / "obsolete.txt").write_text("old\n")
    (workspace / "notes.md").write_text("# Notes\n\nkeep\n")
    return workspace


def test_declares_edit_kind_and_paths() -> None:
    tool = ApplyPatchTool()
    assert tool.kind is ToolKind.EDIT
    text = (
        "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.py\n*** Move to: c.py\n"
        "@@\n-y\n+z\n*** Delete File: d.txt\n*** End Patch\n"
    )
    assert tool.paths_of({"patch": text}) == ["a.txt", "b.py", "c.py", "d.txt"]
    assert tool.paths_of({"patch": "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"}) == ["x.py"]
    assert tool.paths_of({"patch": "nonsense"}) == []


async def test_envelope_add_update_delete_move(
    project: Path, ctx: ToolContext, journal: list[FileChangeIntent]
) -> None:
    result = await patch(
        ctx,
        """*** Begin Patch
*** Add File: docs/hello.txt
+Hello
+world
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet(name):
-    print("Hi", name)
+    print("Hello,", name)
@@ def main():
     greet(sys.argv[1])
-    return 0
+    return 1
*** Delete File: obsolete.txt
*** End Patch
""",
    )
    assert not result.is_error, result.content
    assert (project / "docs/hello.txt").read_text() == "Hello\nworld\n"
    assert not (project / "src/app.py").exists()
    moved = (project / "src/main.py").read_text()
    assert moved == APP.replace('"Hi"', '"Hello,"').replace("return 0", "return 1")
    assert not (project / "obsolete.txt").exists()
    assert "R src/app.py -> src/main.py (+2 -2)" in result.content
    assert [(c.path, c.before is None, c.after is None) for c in journal] == [
        ("docs/hello.txt", True, False),
        ("src/app.py", False, True),
        ("src/main.py", True, False),
        ("obsolete.txt", False, True),
    ]
    assert "print" not in str(result.metadata)  # texts live in the journal only


async def test_unified_diff_multi_file_multi_hunk(project: Path, ctx: ToolContext) -> None:
    new_app = APP.replace("import sys\n", "import os\nimport sys\n").replace("0\n", "2\n")
    diff = "".join(
        difflib.unified_diff(
            APP.splitlines(keepends=True), new_app.splitlines(keepends=True),
            "a/src/app.py", "b/src/app.py", n=1,
        )
    )  # fmt: skip
    diff += "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
    diff += "--- a/notes.md\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-# Notes\n-\n-keep\n"
    assert diff.count("@@ -") == 4
    result = await patch(ctx, diff)
    assert not result.is_error, result.content
    assert (project / "src/app.py").read_text() == new_app
    assert (project / "new.txt").read_text() == "one\ntwo\n"
    assert not (project / "notes.md").exists()


async def test_fuzzy_context_and_shifted_line_numbers(project: Path, ctx: ToolContext) -> None:
    (project / "src/app.py").write_text("# header added later\n\n" + APP)
    # Line numbers are 2 off and the context lost its indentation and gained trailing spaces.
    text = (
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -8,2 +8,2 @@\n"
        " def main():   \n"
        "-greet(sys.argv[1])\n"
        "+    greet(sys.argv[-1])\n"
    )
    result = await patch(ctx, text)
    assert not result.is_error, result.content
    after = (project / "src/app.py").read_text()
    assert "def main():\n    greet(sys.argv[-1])\n" in after  # context kept as in the file


async def test_a_failing_hunk_leaves_every_file_untouched(
    project: Path, ctx: ToolContext, journal: list[FileChangeIntent]
) -> None:
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    result = await patch(
        ctx,
        """*** Begin Patch
*** Add File: fresh.txt
+new
*** Delete File: obsolete.txt
*** Update File: src/app.py
@@
-    print("Hi", name)
+    print("Hey", name)
@@
-    return 42
+    return 43
*** End Patch
""",
    )
    assert result.is_error
    assert "hunk 2 of src/app.py" in result.content
    assert "return 42" in result.content  # what the hunk expected
    assert "return 0" in result.content  # the closest lines of the file
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before
    assert journal == []


async def test_undo_restores_every_file(project: Path, tmp_path: Path) -> None:
    from journeyman.session.store import SessionRecord, SessionStore
    from journeyman.session.undo import FileChangeTracker

    store = SessionStore(tmp_path / "sessions")
    session = "s-1"
    store.create_session(SessionRecord(session, "t", str(project), {}, ""))
    ctx = ToolContext(project)
    ctx.journal = lambda c: store.record_file_change(session, 1, c.path, c.before, c.after, c.tool)
    originals = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    result = await patch(
        ctx,
        "*** Begin Patch\n*** Add File: a.txt\n+a\n*** Update File: notes.md\n@@\n-keep\n+kept\n"
        "*** Delete File: obsolete.txt\n*** End Patch\n",
    )
    assert not result.is_error, result.content
    FileChangeTracker(store, session, project).undo_all()
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == originals


@pytest.mark.parametrize(
    "text",
    [
        "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: notes.md\n*** Move to: /tmp/moved.md\n@@\n-keep\n"
        "+k\n*** End Patch\n",
        "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-# Notes\n+# N\n"
        "--- /dev/null\n+++ b/../../evil.txt\n@@ -0,0 +1 @@\n+x\n",
        "*** Begin Patch\n*** Add File: .git/hooks/pre-commit\n+id\n*** End Patch\n",
    ],
)
async def test_paths_outside_the_workspace_or_in_git_are_refused(
    project: Path, ctx: ToolContext, text: str
) -> None:
    (project / ".git/hooks").mkdir(parents=True)
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    result = await patch(ctx, text)
    assert result.is_error
    assert "outside" in result.content or "'..'" in result.content or ".git/" in result.content
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before
    assert not (project.parent / "escape.txt").exists()


async def test_malformed_and_conflicting_patches(project: Path, ctx: ToolContext) -> None:
    no_end = await patch(ctx, "*** Begin Patch\n*** Add File: x\n+x\n")
    assert no_end.is_error and "End Patch" in no_end.content
    exists = await patch(ctx, "*** Begin Patch\n*** Add File: notes.md\n+x\n*** End Patch\n")
    assert exists.is_error and "already exists" in exists.content
    missing = await patch(ctx, "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch\n")
    assert missing.is_error and "does not exist" in missing.content
    empty = await patch(ctx, "hello")
    assert empty.is_error and "changes no file" in empty.content


async def test_crlf_and_missing_final_newline_are_kept(project: Path, ctx: ToolContext) -> None:
    (project / "dos.txt").write_bytes(b"a\r\nb\r\nc")
    result = await patch(
        ctx, "*** Begin Patch\n*** Update File: dos.txt\n@@\n a\n-b\n+B\n*** End Patch\n"
    )
    assert not result.is_error, result.content
    assert (project / "dos.txt").read_bytes() == b"a\r\nB\r\nc"


async def test_fenced_patch_is_accepted(project: Path, ctx: ToolContext) -> None:
    text = "```diff\n--- a/notes.md\n+++ b/notes.md\n@@ -3 +3 @@\n-keep\n+kept\n```\n"
    result = await patch(ctx, text)
    assert not result.is_error, result.content
    assert (project / "notes.md").read_text() == "# Notes\n\nkept\n"


# --------------------------------------------------------------------------------------------
# Round-trip: any edit, written as a unified diff by difflib, applies back exactly

_line = st.text(st.characters(blacklist_categories=["Cs", "Cc", "Zl", "Zp"]), max_size=12)


@st.composite
def _edits(draw: Any) -> tuple[str, str, int]:
    old = draw(st.lists(_line, max_size=30))
    new = list(old)
    for _ in range(draw(st.integers(0, 5))):
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        at = draw(st.integers(0, len(new)))
        if action == "insert":
            new.insert(at, draw(_line))
        elif new and at < len(new):
            if action == "delete":
                del new[at]
            else:
                new[at] = draw(_line)
    final_old = draw(st.booleans()) or not old
    final_new = draw(st.booleans()) or not new
    old_text = "\n".join(old) + ("\n" if old and final_old else "")
    new_text = "\n".join(new) + ("\n" if new and final_new else "")
    return old_text, new_text, draw(st.integers(0, 3))


def _unified(old: str, new: str, context: int) -> str:
    out = []
    for line in difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), "a/f", "b/f", n=context
    ):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_edits())
def test_difflib_round_trip(edit: tuple[str, str, int]) -> None:
    old, new, context = edit
    diff = _unified(old, new, context)
    if not diff:
        assert old == new
        return
    patches = parse_patch(diff)
    assert len(patches) == 1
    assert apply_hunks(old, patches[0].hunks, "f")[0] == new


async def test_envelope_end_of_file_anchor_and_blank_lines(project: Path, ctx: ToolContext) -> None:
    (project / "twice.txt").write_text("x = 1\nend\nx = 1\nend\n")
    result = await patch(
        ctx,
        "*** Begin Patch\n*** Update File: twice.txt\n@@\n x = 1\n-end\n+done\n*** End of File\n"
        "*** Add File: blank.txt\n+a\n\n+b\n*** End Patch\n",
    )
    assert not result.is_error, result.content
    assert (project / "twice.txt").read_text() == "x = 1\nend\nx = 1\ndone\n"
    assert (project / "blank.txt").read_text() == "a\n\nb\n"
    missing = await patch(
        ctx, "*** Begin Patch\n*** Update File: twice.txt\n@@ def nowhere():\n-x = 1\n+y\n"
        "*** End Patch\n",
    )  # fmt: skip
    assert missing.is_error and "hunk 1 of twice.txt" in missing.content
    assert "def nowhere():" in missing.content


async def test_one_file_under_two_names_is_refused(project: Path, ctx: ToolContext) -> None:
    (project / "alias.md").symlink_to("notes.md")
    result = await patch(
        ctx,
        "*** Begin Patch\n*** Update File: notes.md\n@@\n-keep\n+one\n"
        "*** Update File: alias.md\n@@\n-# Notes\n+# Two\n*** End Patch\n",
    )
    assert result.is_error and "named twice" in result.content
    assert (project / "notes.md").read_text() == "# Notes\n\nkeep\n"
