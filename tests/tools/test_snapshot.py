"""Files changed by shell commands reach the undo journal: snapshots in a shadow repository."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.cli.app import app
from journeyman.core.messages import ToolCall
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from journeyman.session.undo import FileChangeTracker
from journeyman.tools.context import FileChangeIntent, ToolContext
from journeyman.tools.sandbox import BubblewrapSandbox
from journeyman.tools.shell import RunCommandArgs, RunCommandTool
from journeyman.tools.snapshot import (
    MAX_FILE_BYTES,
    FileVersionChange,
    WorkspaceSnapshots,
    forget_snapshots,
    reconcile_interrupted,
    shadow_repository,
)
from journeyman.tools.watch import ChangeWatch
from tests.fakes.agents import finish, turn

from .sandboxes import needs_bwrap

ORIGINAL = {
    "app.py": "def f():\n    return 1\n",
    "old.txt": "bye\n",
    ".gitignore": "build/\n",
}


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for name, text in ORIGINAL.items():
        (root / name).write_text(text)
    return root


def test_compare_reports_created_modified_and_deleted_text_files(ws: Path, tmp_path: Path) -> None:
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    (ws / "app.py").write_text("def f():\n    return 2\n")
    (ws / "old.txt").unlink()
    (ws / "pkg").mkdir()
    (ws / "pkg" / "new.py").write_text("x = 1\n")
    (ws / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0binary")
    (ws / "build").mkdir()
    (ws / "build" / "out.txt").write_text("ignored by .gitignore\n")
    (ws / "node_modules" / "left-pad").mkdir(parents=True)
    (ws / "node_modules" / "left-pad" / "index.js").write_text("a dependency, not authored\n")
    (ws / ".gitignore").touch()  # a new mtime, the same text: not a change
    found = snaps.changes()
    assert found.changes == [
        FileVersionChange("app.py", "def f():\n    return 1\n", "def f():\n    return 2\n"),
        FileVersionChange("old.txt", "bye\n", None),
        FileVersionChange("pkg/new.py", None, "x = 1\n"),
    ]
    assert found.skipped == ["logo.png"]  # binary: listed, not journaled
    snaps.record()
    assert snaps.changes().changes == [] and snaps.changes().skipped == []


def test_the_workspaces_own_repository_is_left_alone(ws: Path, tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ws, capture_output=True, text=True, check=True
        ).stdout

    git("init", "-q")
    git("add", "app.py")
    status_before = git("status", "--porcelain")
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    (ws / "app.py").write_text("changed\n")
    assert [c.path for c in snaps.changes().changes] == ["app.py"]
    assert git("status", "--porcelain") == status_before.replace("A  app.py", "AM app.py")
    assert not any(p.name.startswith("index-") for p in (ws / ".git").iterdir())


def test_a_new_session_starts_from_an_earlier_index(ws: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    WorkspaceSnapshots(ws, "first", cache_dir=cache).record()
    second = WorkspaceSnapshots(ws, "second", cache_dir=cache)
    assert second.index.exists() is False
    second.record()
    (ws / "app.py").write_text("new\n")
    (ws / "old.txt").unlink()
    (ws / "old.txt").symlink_to("app.py")  # replaced by a link: not journaled as text
    found = second.changes()
    assert [c.path for c in found.changes] == ["app.py"] and found.skipped == ["old.txt"]


def command(cid: str, line: str) -> ToolCall:
    return ToolCall(cid, "run_command", {"command": line})


FINISH = finish()


def test_undo_reverts_what_commands_did_and_diff_shows_it(ws: Path, tmp_path: Path) -> None:
    script = [
        turn(command("c1", "sed -i 's/return 1/return 3/' app.py")),
        turn(command("c2", "rm old.txt && echo hi > made.txt")),
        turn(ToolCall("w", "write_file", {"path": "made.txt", "content": "by the tool\n"})),
        turn(command("c3", "printf '\\000\\001' > blob.bin")),
        FINISH,
    ]
    agent = Agent(
        ScriptedProvider(script),
        workspace=ws,
        config=AgentConfig(session_dir=tmp_path / "sessions", sandbox="local", verify=False),
    )
    result = asyncio.run(agent.run("change files with commands"))
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert (ws / "app.py").read_text() == "def f():\n    return 3\n"

    store = SessionStore(tmp_path / "sessions")
    try:
        changes = store.file_changes(result.session_id)
        assert [(c.tool, c.kind, c.path) for c in changes] == [
            ("run_command", "modified", "app.py"),
            ("run_command", "created", "made.txt"),
            ("run_command", "deleted", "old.txt"),
            ("write_file", "modified", "made.txt"),
        ]
        tracker = FileChangeTracker(store, result.session_id, ws)
        diff = tracker.diff()
        assert "b/app.py" in diff and "-    return 1" in diff and "+    return 3" in diff
        undone = tracker.undo_all()
        assert not undone.conflicts
    finally:
        store.close()
    (ws / "blob.bin").unlink()  # binary output is not journaled: the run's result said so
    assert tree(ws) == {k: v.encode() for k, v in ORIGINAL.items()}


def test_the_model_is_told_when_a_change_cannot_be_journaled(ws: Path, tmp_path: Path) -> None:
    script = [turn(command("c1", "printf '\\000' > blob.bin")), FINISH]
    provider = ScriptedProvider(script)
    agent = Agent(
        provider,
        workspace=ws,
        config=AgentConfig(session_dir=tmp_path / "sessions", sandbox="local", verify=False),
    )
    asyncio.run(agent.run("make a binary"))
    answer = provider.requests[1].messages[-1].content
    assert "not journaled" in answer and "blob.bin" in answer


# --- the size cap, deletion with the last session, commands interrupted by a kill -------------


def stored_blob_sizes(snaps: WorkspaceSnapshots) -> list[int]:
    """Sizes of every blob in the shadow repository (loose or packed)."""
    out = subprocess.run(
        [
            "git",
            f"--git-dir={snaps.git_dir}",
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objecttype) %(objectsize)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [
        int(size) for kind, size in (line.split() for line in out.splitlines()) if kind == "blob"
    ]


def test_files_over_the_cap_are_never_stored_and_named_only_when_changed(
    ws: Path, tmp_path: Path
) -> None:
    big = MAX_FILE_BYTES + 1
    (ws / "data.bin").write_bytes(b"a" * big)
    (ws / "grows.txt").write_text("small\n")
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    (ws / "grows.txt").write_text("x" * big)  # small before the command, large after
    found = snaps.changes()
    assert found.skipped == ["grows.txt"]  # data.bin was not touched: not named
    snaps.record()
    (ws / "data.bin").write_bytes(b"b" * big)
    (ws / "new [big].bin").write_bytes(b"c" * big)
    assert snaps.changes().skipped == ["data.bin", "new [big].bin"]
    snaps.record()
    (ws / "data.bin").unlink()
    (ws / "grows.txt").write_text("small again\n")
    found = snaps.changes()
    assert found.skipped == ["data.bin", "grows.txt"]  # its text before was never stored
    snaps.record()
    assert snaps.changes().skipped == [] and snaps.changes().changes == []
    assert all(size <= MAX_FILE_BYTES for size in stored_blob_sizes(snaps))


def test_shadow_data_goes_with_the_workspaces_last_session(ws: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = WorkspaceSnapshots(ws, "first", cache_dir=cache)
    second = WorkspaceSnapshots(ws, "second", cache_dir=cache)
    first.record()
    second.record()
    forget_snapshots(ws, "first", last_session=False, cache_dir=cache)
    assert not first.index.exists() and second.index.exists()
    forget_snapshots(ws, "second", last_session=True, cache_dir=cache)
    assert not first.git_dir.exists()


def test_sessions_delete_removes_the_shadow_repository_with_the_last_session(
    ws: Path, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    agents = []
    for name in ("one", "two"):
        agent = Agent(
            ScriptedProvider([turn(command("c", f"echo {name} > {name}.txt")), FINISH]),
            workspace=ws,
            config=AgentConfig(session_dir=sessions, sandbox="local", verify=False),
        )
        agents.append(asyncio.run(agent.run("write")).session_id)
    shadow = shadow_repository(ws)
    assert shadow.is_dir() and len(list(shadow.glob("index-*"))) == 2
    runner = CliRunner()
    for number, session in enumerate(agents):
        done = runner.invoke(app, ["sessions", "delete", session, "--session-dir", str(sessions)])
        assert done.exit_code == 0, done.output
        assert shadow.exists() is (number == 0)


def test_a_command_killed_with_the_agent_is_journaled_on_resume(ws: Path, tmp_path: Path) -> None:
    """What `resume` does: reconcile_interrupted() before the first step."""
    cache = tmp_path / "cache"
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=cache)
    snaps.record()
    snaps.begin("sed -i s/1/5/ app.py && rm old.txt")
    (ws / "app.py").write_text("def f():\n    return 5\n")  # the command ran, then kill -9
    (ws / "old.txt").unlink()
    journaled: list[FileChangeIntent] = []
    found = reconcile_interrupted(ws, "s1", journaled.append, cache_dir=cache)
    assert found is not None
    assert [(c.path, c.before, c.after, c.tool) for c in journaled] == [
        ("app.py", ORIGINAL["app.py"], "def f():\n    return 5\n", "run_command"),
        ("old.txt", "bye\n", None, "run_command"),
    ]
    assert reconcile_interrupted(ws, "s1", journaled.append, cache_dir=cache) is None
    assert len(journaled) == 2  # once only


def test_a_finished_command_leaves_nothing_to_reconcile(ws: Path, tmp_path: Path) -> None:
    agent = Agent(
        ScriptedProvider([turn(command("c", "echo x > x.txt")), FINISH]),
        workspace=ws,
        config=AgentConfig(session_dir=tmp_path / "sessions", sandbox="local", verify=False),
    )
    session = asyncio.run(agent.run("write")).session_id
    assert reconcile_interrupted(ws, session, lambda change: None) is None


def test_the_next_command_journals_an_interrupted_one_if_resume_did_not(
    ws: Path, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    agent = Agent(
        ScriptedProvider([turn(command("c", "true")), FINISH]),
        workspace=ws,
        config=AgentConfig(session_dir=sessions, sandbox="local", verify=False),
    )
    session = asyncio.run(agent.run("first")).session_id
    snaps = WorkspaceSnapshots(ws, session)
    snaps.record()
    snaps.begin("echo lost > lost.txt")
    (ws / "lost.txt").write_text("lost\n")  # then the process died
    ctx_changes: list[FileChangeIntent] = []
    ctx = ToolContext(workspace=ws, run_session_id=session, journal=ctx_changes.append)
    result = asyncio.run(RunCommandTool().execute(RunCommandArgs(command="true"), ctx))
    assert [(c.path, c.after) for c in ctx_changes] == [("lost.txt", "lost\n")]
    assert "interrupted" in result.content and "lost.txt" in result.content


# --- the watch shortcut: skipping scans must never lose or misplace a change ----------------


def _git_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []
    real_run = subprocess.run

    def spy(argv: list[str], *args: object, **kwargs: object) -> object:
        if argv and argv[0] == "git":
            calls.append(argv)
        return real_run(argv, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "run", spy)
    return calls


def test_a_command_that_changes_nothing_runs_no_git(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    assert snaps.changes().changes == []
    calls = _git_calls(monkeypatch)
    for _ in range(3):
        snaps.record()
        assert snaps.changes().changes == []
    assert calls == []


def test_a_change_between_commands_by_another_writer_is_not_the_next_commands(
    ws: Path, tmp_path: Path
) -> None:
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    assert snaps.changes().changes == []
    # an editor (or a hook, or a background job) writes between two commands
    (ws / "app.py").write_text("def f():\n    return 7\n")
    (ws / "pkg").mkdir()
    snaps.record()
    (ws / "pkg" / "made.py").write_text("y = 2\n")  # the next command
    (ws / "app.py").write_text("def f():\n    return 8\n")
    found = snaps.changes()
    assert found.changes == [
        FileVersionChange("app.py", "def f():\n    return 7\n", "def f():\n    return 8\n"),
        FileVersionChange("pkg/made.py", None, "y = 2\n"),
    ]


def test_a_same_size_rewrite_that_keeps_the_mtime_is_caught(ws: Path, tmp_path: Path) -> None:
    # Racy git: a write within the timestamp granularity of the record, same size.
    for watch in (True, False):
        snaps = WorkspaceSnapshots(ws, f"s-{watch}", cache_dir=tmp_path / "cache", watch=watch)
        snaps.record()
        assert snaps.changes().changes == []
        snaps.record()
        target = ws / "app.py"
        before = target.read_text()
        info = target.stat()
        target.write_text(before.replace("1", "9"))
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
        assert target.stat().st_size == info.st_size
        found = snaps.changes()
        assert [c.path for c in found.changes] == ["app.py"], watch
        target.write_text(before)


def test_new_folders_are_watched_after_the_next_record(ws: Path, tmp_path: Path) -> None:
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    (ws / "deep" / "er").mkdir(parents=True)
    assert snaps.changes().changes == []
    snaps.record()
    assert snaps.changes().changes == []
    snaps.record()
    (ws / "deep" / "er" / "x.txt").write_text("x\n")
    assert snaps.changes().changes == [FileVersionChange("deep/er/x.txt", None, "x\n")]


def test_without_a_watch_every_record_scans(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ChangeWatch, "arm", lambda self: False)
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    calls = _git_calls(monkeypatch)
    snaps.record()
    (ws / "old.txt").write_text("changed\n")
    assert snaps.changes().changes == [FileVersionChange("old.txt", "bye\n", "changed\n")]
    assert calls


def test_change_watch_sees_writes_renames_and_mode_changes(ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "a.txt").write_text("a\n")
    watch = ChangeWatch(ws)
    if not watch.arm():
        pytest.skip("no inotify here")
    actions = [
        lambda: (ws / "sub" / "a.txt").write_text("b\n"),
        lambda: (ws / "sub" / "a.txt").rename(ws / "sub" / "b.txt"),
        lambda: (ws / "sub" / "b.txt").chmod(0o755),
        lambda: (ws / "sub" / "b.txt").unlink(),
        lambda: (ws / "c.txt").write_text(""),
    ]
    for action in actions:
        assert not watch.changed()
        action()
        assert watch.changed()
        assert watch.arm()
    (ws / ".git").mkdir()
    assert watch.arm()
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")  # not the journal's business
    assert not watch.changed()
    watch.close()


def test_an_empty_workspace_is_not_scanned_again_and_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    snaps = WorkspaceSnapshots(empty, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    calls = _git_calls(monkeypatch)
    snaps.record()
    assert snaps.changes().changes == []
    assert calls == []
    (empty / "new.txt").write_text("n\n")
    assert snaps.changes().changes == [FileVersionChange("new.txt", None, "n\n")]


def test_a_forgotten_index_is_recorded_again(ws: Path, tmp_path: Path) -> None:
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    forget_snapshots(ws, "s1", last_session=False, cache_dir=tmp_path / "cache")
    snaps.record()
    (ws / "old.txt").write_text("changed\n")
    assert snaps.changes().changes == [FileVersionChange("old.txt", "bye\n", "changed\n")]


@needs_bwrap
async def test_commands_in_bubblewrap_are_journaled_across_quiet_commands(
    workspace: Path, ctx: ToolContext, journal: list[FileChangeIntent]
) -> None:
    (workspace / "a.txt").write_text("a\n")
    tool = RunCommandTool(sandbox=BubblewrapSandbox(workspace))
    for command in ("true", "echo quiet", "echo b >> a.txt", "true", "rm a.txt"):
        await tool.execute(RunCommandArgs(command=command), ctx)
    assert [(c.path, c.before, c.after) for c in journal] == [
        ("a.txt", "a\n", "a\nb\n"),
        ("a.txt", "a\nb\n", None),
    ]


def test_the_after_state_of_a_command_is_the_next_ones_before_state(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    (ws / "app.py").write_text("def f():\n    return 2\n")
    (ws / "old.txt").unlink()
    (ws / "pkg" / "sub").mkdir(parents=True)
    (ws / "pkg" / "sub" / "new.py").write_text("x = 1\n")
    assert [c.path for c in snaps.changes().changes] == ["app.py", "old.txt", "pkg/sub/new.py"]
    calls = _git_calls(monkeypatch)
    snaps.record()  # nothing moved since: no scan
    assert calls == []
    (ws / "app.py").write_text("def f():\n    return 3\n")
    (ws / "pkg" / "sub" / "new.py").unlink()
    (ws / "old.txt").write_text("back\n")
    (ws / "pkg" / "sub" / "more.py").write_text("y = 2\n")  # in the folder made last time
    assert snaps.changes().changes == [
        FileVersionChange("app.py", "def f():\n    return 2\n", "def f():\n    return 3\n"),
        FileVersionChange("old.txt", None, "back\n"),
        FileVersionChange("pkg/sub/more.py", None, "y = 2\n"),
        FileVersionChange("pkg/sub/new.py", "x = 1\n", None),
    ]


def test_a_file_gone_before_it_was_read_leaves_the_next_record_to_scan(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    (ws / "flash.txt").write_text("here\n")
    real_disk_text = WorkspaceSnapshots._disk_text

    def vanishing(self: WorkspaceSnapshots, path: str) -> object:
        if path == "flash.txt":
            (ws / "flash.txt").unlink()
        return real_disk_text(self, path)

    monkeypatch.setattr(WorkspaceSnapshots, "_disk_text", vanishing)
    assert snaps.changes().changes == []
    monkeypatch.undo()
    snaps.record()
    (ws / "app.py").write_text("changed\n")
    assert [c.path for c in snaps.changes().changes] == ["app.py"]


def test_a_large_file_made_by_a_command_makes_the_next_record_scan(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snaps = WorkspaceSnapshots(ws, "s1", cache_dir=tmp_path / "cache")
    snaps.record()
    (ws / "big.txt").write_text("x" * (MAX_FILE_BYTES + 1))
    assert snaps.changes().skipped == ["big.txt"]
    calls = _git_calls(monkeypatch)
    snaps.record()
    assert calls  # a full record, which keeps the large file out of the shadow repository
    (ws / "big.txt").write_text("y" * (MAX_FILE_BYTES + 1))
    assert snaps.changes().skipped == ["big.txt"]
