"""Undo and diff of the agent's file changes: the Python API and `journeyman undo` / `diff`.

The sessions are made by a real agent run (scripted model, real file tools, real store), so the
journal is written the way the kernel writes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from pydantic import Field
from typer.testing import CliRunner, Result

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.cli.app import app
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionRecord, SessionStore
from journeyman.session.undo import DEFAULT_HISTORY, FileChangeTracker
from journeyman.tools.base import BaseTool, ToolArgs, ok
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext

ORIGINAL = {"app.py": "def f():\n    return 1\n", "notes.md": "keep me\n", "old.txt": "bye\n"}


class DeleteArgs(ToolArgs):
    path: str = Field(description="File to delete.")


class DeleteFileTool(BaseTool):
    """A deleting tool, journaled like the built-in writers, so deletions can be undone."""

    name = "delete_file"
    description = "Delete a file."
    args_model = DeleteArgs

    async def execute(self, args: DeleteArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args.path, tool=self.name)
        rel = ctx.relative(path)
        ctx.record_change(rel, path.read_text(), None, self.name)
        path.unlink()
        return ok(self.name, f"deleted {rel}")


def write(path: str, content: str) -> ToolCall:
    return ToolCall(f"w-{path}-{len(content)}", "write_file", {"path": path, "content": content})


def edit(path: str, old: str, new: str) -> ToolCall:
    return ToolCall(
        f"e-{path}-{old}", "edit_file", {"path": path, "old_string": old, "new_string": new}
    )


def delete(path: str) -> ToolCall:
    return ToolCall(f"d-{path}", "delete_file", {"path": path})


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for name, text in ORIGINAL.items():
        (root / name).write_text(text)
    return root


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def run_steps(ws: Path, sessions: Path, steps: Sequence[Sequence[ToolCall]]) -> str:
    """Run the agent: one model turn per entry of `steps`, then finish; returns the session id."""
    script = [ModelResponse(text=f"step {i + 1}", tool_calls=tuple(c)) for i, c in enumerate(steps)]
    script.append(
        ModelResponse(text="", tool_calls=(ToolCall("fin", "finish", {"summary": "done"}),))
    )
    agent = Agent(
        ScriptedProvider(script),
        workspace=ws,
        tools=[*default_tools(), DeleteFileTool()],
        config=AgentConfig(session_dir=sessions, verify=False),
    )
    result = asyncio.run(agent.run("change some files"))
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    return result.session_id


@pytest.fixture
def store(sessions: Path) -> Iterator[SessionStore]:
    sessions.mkdir(exist_ok=True)
    opened = SessionStore(sessions)
    yield opened
    opened.close()


# --- the three kinds of change --------------------------------------------------------------


def test_undoing_a_created_file_deletes_it(ws: Path, sessions: Path) -> None:
    sid = run_steps(ws, sessions, [[write("pkg/new.py", "x = 1\n")]])
    assert (ws / "pkg/new.py").exists()
    store = SessionStore(sessions)
    result = FileChangeTracker(store, sid, ws).undo_last()
    store.close()
    assert [(c.kind, c.path) for c in result.undone] == [("created", "pkg/new.py")]
    assert not (ws / "pkg/new.py").exists()
    assert snapshot(ws) == ORIGINAL


def test_undoing_a_deleted_file_writes_it_back(ws: Path, sessions: Path) -> None:
    sid = run_steps(ws, sessions, [[delete("old.txt")]])
    assert not (ws / "old.txt").exists()
    store = SessionStore(sessions)
    result = FileChangeTracker(store, sid, ws).undo_last()
    store.close()
    assert [(c.kind, c.path) for c in result.undone] == [("deleted", "old.txt")]
    assert snapshot(ws) == ORIGINAL


def test_undoing_a_modification_writes_the_content_before_it(ws: Path, sessions: Path) -> None:
    sid = run_steps(ws, sessions, [[edit("app.py", "return 1", "return 2")]])
    assert "return 2" in (ws / "app.py").read_text()
    store = SessionStore(sessions)
    result = FileChangeTracker(store, sid, ws).undo_last()
    store.close()
    assert [(c.kind, c.path, c.tool) for c in result.undone] == [
        ("modified", "app.py", "edit_file")
    ]
    assert snapshot(ws) == ORIGINAL


def test_each_change_is_undone_once_newest_first(ws: Path, sessions: Path) -> None:
    sid = run_steps(
        ws,
        sessions,
        [
            [edit("app.py", "return 1", "return 2")],
            [edit("app.py", "return 2", "return 3")],
            [write("new.txt", "hi\n")],
        ],
    )
    store = SessionStore(sessions)
    tracker = FileChangeTracker(store, sid, ws)
    undone = [tracker.undo_last().undone for _ in range(3)]
    assert [[c.step for c in u] for u in undone] == [[3], [2], [1]]
    assert snapshot(ws) == ORIGINAL
    assert all(c.undone for c in store.file_changes(sid))

    # the user now creates new.txt themselves: it is not the agent's change to undo again
    (ws / "new.txt").write_text("mine\n")
    again = tracker.undo_last()
    store.close()
    assert again.nothing_to_undo and not again.undone
    assert (ws / "new.txt").read_text() == "mine\n"


def test_undo_turn_takes_back_every_change_of_the_latest_step(ws: Path, sessions: Path) -> None:
    sid = run_steps(
        ws,
        sessions,
        [
            [write("one.txt", "1\n")],
            [edit("app.py", "return 1", "return 2"), write("two.txt", "2\n"), delete("old.txt")],
        ],
    )
    store = SessionStore(sessions)
    tracker = FileChangeTracker(store, sid, ws)
    result = tracker.undo_turn()
    assert sorted(c.path for c in result.undone) == ["app.py", "old.txt", "two.txt"]
    assert snapshot(ws) == {**ORIGINAL, "one.txt": "1\n"}
    assert [c.path for c in tracker.undo_turn().undone] == ["one.txt"]
    assert tracker.undo_turn().nothing_to_undo
    store.close()
    assert snapshot(ws) == ORIGINAL


def test_undo_file_walks_one_file_back_a_change_at_a_time(ws: Path, sessions: Path) -> None:
    sid = run_steps(
        ws,
        sessions,
        [
            [edit("app.py", "return 1", "return 2")],
            [write("other.txt", "o\n")],
            [edit("app.py", "return 2", "return 3")],
        ],
    )
    store = SessionStore(sessions)
    tracker = FileChangeTracker(store, sid, ws)
    assert [c.step for c in tracker.undo_file("app.py").undone] == [3]
    assert "return 2" in (ws / "app.py").read_text()
    assert [c.step for c in tracker.undo_file(str(ws / "app.py")).undone] == [1]
    assert (ws / "app.py").read_text() == ORIGINAL["app.py"]
    assert tracker.undo_file("app.py").nothing_to_undo
    assert (ws / "other.txt").exists()  # another file's change is left alone
    store.close()


# --- history cap and restarts ---------------------------------------------------------------


def journal_many(store: SessionStore, ws: Path, count: int) -> str:
    """`count` single-file writes, each journaled then written, as a tool does."""

    store.create_session(SessionRecord("many", "t", str(ws), {}, ""))
    for i in range(count):
        path = ws / f"gen/f{i:03d}.txt"
        store.record_file_change(
            "many", i + 1, path.relative_to(ws).as_posix(), None, f"{i}\n", "w"
        )
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"{i}\n")
    return "many"


def test_memory_keeps_the_last_100_changes_while_the_store_keeps_all(
    ws: Path, store: SessionStore
) -> None:
    sid = journal_many(store, ws, DEFAULT_HISTORY + 20)
    tracker = FileChangeTracker(store, sid, ws)
    assert DEFAULT_HISTORY == 100
    assert len(tracker.history) == 100
    assert tracker.history[0].path == "gen/f020.txt"
    assert len(store.file_changes(sid)) == 120
    assert len(FileChangeTracker(store, sid, ws, max_history=5).history) == 5


def test_undo_all_and_diff_reach_changes_older_than_the_memory_window(
    ws: Path, store: SessionStore
) -> None:
    sid = journal_many(store, ws, DEFAULT_HISTORY + 20)
    tracker = FileChangeTracker(store, sid, ws)
    assert "+++ b/gen/f000.txt" in tracker.diff()
    result = tracker.undo_all()
    assert len(result.undone) == 120 and not result.conflicts
    assert snapshot(ws) == ORIGINAL
    assert tracker.diff() == ""


def test_undo_works_after_a_restart(ws: Path, sessions: Path) -> None:
    sid = run_steps(
        ws, sessions, [[write("a.txt", "a\n")], [write("b.txt", "b\n")], [write("c.txt", "c\n")]]
    )
    first = SessionStore(sessions)
    assert [c.path for c in FileChangeTracker(first, sid, ws).undo_last().undone] == ["c.txt"]
    first.close()

    # a new process: new store and tracker objects over the same database, no git in sight
    second = SessionStore(sessions)
    tracker = FileChangeTracker(second, sid, ws)
    assert [c.path for c in tracker.pending()] == ["a.txt", "b.txt"]
    assert [c.path for c in tracker.undo_last().undone] == ["b.txt"]
    second.close()
    assert sorted(snapshot(ws)) == sorted([*ORIGINAL, "a.txt"])


# --- conflicts ------------------------------------------------------------------------------


def test_a_file_edited_since_the_agent_wrote_it_is_not_undone_without_force(
    ws: Path, sessions: Path
) -> None:
    sid = run_steps(ws, sessions, [[edit("app.py", "return 1", "return 2")]])
    (ws / "app.py").write_text("def f():\n    return 2\n# the user's note\n")
    store = SessionStore(sessions)
    tracker = FileChangeTracker(store, sid, ws)

    refused = tracker.undo_last()
    assert not refused.undone and len(refused.conflicts) == 1
    conflict = refused.conflicts[0]
    assert conflict.change.path == "app.py"
    assert "--- a/app.py" in conflict.diff and "+# the user's note" in conflict.diff
    assert "# the user's note" in (ws / "app.py").read_text()  # the user's work is intact
    assert len(tracker.pending()) == 1

    forced = tracker.undo_last(force=True)
    store.close()
    assert [c.path for c in forced.undone] == ["app.py"] and not forced.conflicts
    assert snapshot(ws) == ORIGINAL


def test_a_conflict_stops_older_changes_of_that_file_from_being_undone(
    ws: Path, sessions: Path
) -> None:
    sid = run_steps(
        ws,
        sessions,
        [[edit("app.py", "return 1", "return 2")], [edit("app.py", "return 2", "return 3")]],
    )
    (ws / "app.py").write_text("user rewrote it\n")
    store = SessionStore(sessions)
    result = FileChangeTracker(store, sid, ws).undo_all()
    store.close()
    assert not result.undone and [c.change.step for c in result.conflicts] == [2]
    assert (ws / "app.py").read_text() == "user rewrote it\n"


def test_a_file_already_back_at_its_old_content_is_marked_undone_quietly(
    ws: Path, sessions: Path
) -> None:
    sid = run_steps(ws, sessions, [[write("new.txt", "x\n")]])
    (ws / "new.txt").unlink()  # the user removed it already
    store = SessionStore(sessions)
    result = FileChangeTracker(store, sid, ws).undo_last()
    pending = store.file_changes(sid, pending_only=True)
    store.close()
    assert [c.path for c in result.undone] == ["new.txt"] and not result.conflicts
    assert pending == []


# --- diff -----------------------------------------------------------------------------------


def test_diff_shows_each_pending_file_from_its_first_to_its_last_content(
    ws: Path, sessions: Path
) -> None:
    sid = run_steps(
        ws,
        sessions,
        [
            [edit("app.py", "return 1", "return 2"), write("new.txt", "fresh\n")],
            [edit("app.py", "return 2", "return 3"), delete("old.txt")],
        ],
    )
    store = SessionStore(sessions)
    tracker = FileChangeTracker(store, sid, ws)
    text = tracker.diff()
    assert "--- a/app.py\n+++ b/app.py\n" in text
    assert "-    return 1\n+    return 3\n" in text and "return 2" not in text
    assert "--- /dev/null\n+++ b/new.txt\n" in text and "+fresh\n" in text
    assert "--- a/old.txt\n+++ /dev/null\n" in text and "-bye\n" in text

    tracker.undo_file("new.txt")
    assert "new.txt" not in tracker.diff()
    tracker.undo_all()
    assert tracker.diff() == ""
    store.close()


def test_diff_marks_a_missing_final_newline(ws: Path, store: SessionStore) -> None:

    store.create_session(SessionRecord("nl", "t", str(ws), {}, ""))
    store.record_file_change("nl", 1, "notes.md", "keep me\n", "keep me\nmore", "write_file")
    text = FileChangeTracker(store, "nl", ws).diff()
    assert text.endswith("+more\n\\ No newline at end of file\n")


# --- the command line -----------------------------------------------------------------------


def jm(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def test_cli_undo_last_turn_file_and_all(ws: Path, sessions: Path) -> None:
    sid = run_steps(
        ws,
        sessions,
        [
            [write("a.txt", "a\n"), edit("app.py", "return 1", "return 2")],
            [edit("app.py", "return 2", "return 3")],
            [write("b.txt", "b\n"), write("c.txt", "c\n")],
        ],
    )
    common = ["--session", sid, "--session-dir", str(sessions)]

    last = jm("undo", *common)
    assert last.exit_code == 0, last.output
    assert last.stdout == "deleted c.txt (step 3, write_file)\n"

    turn = jm("undo", "--turn", *common)  # the rest of step 3
    assert turn.exit_code == 0 and turn.stdout == "deleted b.txt (step 3, write_file)\n"

    one = jm("undo", "--file", "app.py", *common)
    assert one.exit_code == 0 and one.stdout == "reverted app.py (step 2, edit_file)\n"
    assert "return 2" in (ws / "app.py").read_text()

    everything = jm("undo", "--all", *common)
    assert everything.exit_code == 0
    assert sorted(everything.stdout.splitlines()) == [
        "deleted a.txt (step 1, write_file)",
        "reverted app.py (step 1, edit_file)",
    ]
    assert snapshot(ws) == ORIGINAL
    nothing = jm("undo", "--all", *common)
    assert nothing.exit_code == 0 and nothing.stdout == "nothing to undo\n"


def test_cli_undo_defaults_to_the_latest_session_of_the_workspace(ws: Path, sessions: Path) -> None:
    run_steps(ws, sessions, [[write("first.txt", "1\n")]])
    run_steps(ws, sessions, [[write("second.txt", "2\n")]])
    done = jm("undo", "-w", str(ws), "--session-dir", str(sessions))
    assert done.exit_code == 0 and "second.txt" in done.stdout
    assert (ws / "first.txt").exists() and not (ws / "second.txt").exists()


def test_cli_undo_refuses_a_conflict_with_its_diff_until_forced(ws: Path, sessions: Path) -> None:
    sid = run_steps(ws, sessions, [[write("notes.md", "agent text\n")]])
    (ws / "notes.md").write_text("agent text\nuser text\n")
    common = ["--session", sid, "--session-dir", str(sessions)]

    refused = jm("undo", *common)
    assert refused.exit_code == 1
    assert "notes.md changed on disk after the agent wrote it" in refused.stderr
    assert "--force" in refused.stderr and "+user text" in refused.stderr
    assert (ws / "notes.md").read_text() == "agent text\nuser text\n"

    forced = jm("undo", "--force", *common)
    assert forced.exit_code == 0 and "reverted notes.md" in forced.stdout
    assert snapshot(ws) == ORIGINAL


def test_cli_undo_takes_one_selector_and_a_known_session(ws: Path, sessions: Path) -> None:
    sid = run_steps(ws, sessions, [[write("a.txt", "a\n")]])
    both = jm("undo", "--turn", "--all", "--session", sid, "--session-dir", str(sessions))
    assert both.exit_code == 2 and "at most one of --turn, --file and --all" in both.stderr
    unknown = jm("undo", "--session", "nosuch", "--session-dir", str(sessions))
    assert unknown.exit_code == 2 and "no session 'nosuch'" in unknown.stderr
    assert (ws / "a.txt").exists()


def test_cli_diff_prints_the_pending_changes(ws: Path, sessions: Path) -> None:
    sid = run_steps(ws, sessions, [[edit("app.py", "return 1", "return 2")], [delete("old.txt")]])
    common = ["--session", sid, "--session-dir", str(sessions)]
    shown = jm("diff", *common)
    assert shown.exit_code == 0
    assert shown.stdout.splitlines()[:2] == ["--- a/app.py", "+++ b/app.py"]
    assert "-    return 1\n+    return 2\n" in shown.stdout
    assert "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" in shown.stdout

    assert jm("undo", "--file", "old.txt", *common).exit_code == 0
    after = jm("diff", "-w", str(ws), "--session-dir", str(sessions))  # latest session
    assert after.exit_code == 0 and "old.txt" not in after.stdout and "app.py" in after.stdout

    assert jm("undo", "--all", *common).exit_code == 0
    nothing = jm("diff", *common)
    assert nothing.exit_code == 0 and nothing.stdout == ""
    assert f"no pending changes in session {sid}" in nothing.stderr
