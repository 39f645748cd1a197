"""The tasks file and each task's workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journeyman.batch.task_file import BatchTask, TaskFileError
from journeyman.batch.tasks import load_tasks
from journeyman.batch.workspaces import WorkspaceError, prepare_workspace
from tests.support.git import git


def write(path: Path, *lines: object) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_tasks_load_with_their_limits_and_grading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative workspace is taken from the current folder
    (tmp_path / "ws").mkdir()
    path = write(
        tmp_path / "t.jsonl",
        {"id": "a", "task": "fix it", "workspace": "ws", "limits": {"max_iterations": 5}},
        "",
        "# a comment",
        {"id": "b", "task": "x", "workspace": "ws", "grading": {"test_cmd": "pytest -q"}},
    )
    tasks = load_tasks(path)
    assert [t.id for t in tasks] == ["a", "b"]
    assert tasks[0].limits.max_iterations == 5
    assert tasks[1].grading is not None and tasks[1].grading.test_cmd == "pytest -q"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{broken", ":2: not valid JSON"),
        ("[1, 2]", ":2: expected a JSON object"),
        ({"id": "b", "task": "x"}, ":2: workspace: missing"),
        ({"id": "b", "task": "x", "workspace": "w", "colour": 1}, ":2: colour: unknown field"),
        ({"id": "a", "task": "x", "workspace": "w"}, ":2: task id 'a' is already used on line 1"),
        ({"id": "../up", "task": "x", "workspace": "w"}, ":2: id:"),
        ({"id": "b", "task": "x", "workspace": "w", "limits": {"max_iterations": 0}}, ":2: limits"),
    ],
)
def test_a_bad_line_is_refused_with_its_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: object, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w").mkdir()
    path = write(tmp_path / "t.jsonl", {"id": "a", "task": "x", "workspace": "w"}, line)
    with pytest.raises(TaskFileError) as refused:
        load_tasks(path)
    assert expected in refused.value.message


def test_an_empty_or_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="does not exist"):
        load_tasks(tmp_path / "nope.jsonl")
    with pytest.raises(TaskFileError, match="holds no task"):
        load_tasks(write(tmp_path / "empty.jsonl", ""))


def test_a_repository_task_gets_a_clone_at_its_commit_and_the_original_is_untouched(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "one")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("two\n")
    git(repo, "commit", "-qam", "two")
    before = git(repo, "worktree", "list")
    task = BatchTask(id="r1", task="x", workspace=str(repo), base_commit=first)
    workspace = prepare_workspace(task, tmp_path / "out")
    assert (workspace / "a.txt").read_text() == "one\n"
    assert (repo / "a.txt").read_text() == "two\n" and git(repo, "worktree", "list") == before
    bad = BatchTask(id="r2", task="x", workspace=str(repo), base_commit="0" * 40)
    with pytest.raises(WorkspaceError, match="cannot check out"):
        prepare_workspace(bad, tmp_path / "out")


def test_workspaces_that_cannot_be_prepared_are_refused_when_the_file_loads(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "one")
    commit = git(repo, "rev-parse", "HEAD")
    inside = repo / "sub"  # a plain folder inside a repository is not one
    inside.mkdir()
    good = {"id": "ok", "task": "x", "workspace": str(repo), "base_commit": commit[:10]}
    cases = [
        ({"id": "gone", "task": "x", "workspace": str(tmp_path / "nope")}, "does not exist"),
        ({"id": "file", "task": "x", "workspace": str(repo / "a.txt")}, "is a file, not a folder"),
        (
            {"id": "plain", "task": "x", "workspace": str(inside), "base_commit": commit},
            f"its workspace {inside} is not a git repository",
        ),
        (
            {"id": "lost", "task": "x", "workspace": str(repo), "base_commit": "0" * 40},
            f"its base_commit {'0' * 40} is not there in the repository {repo}",
        ),
    ]
    assert [t.id for t in load_tasks(write(tmp_path / "ok.jsonl", good))] == ["ok"]
    for line, expected in cases:
        path = write(tmp_path / "t.jsonl", good, line)
        with pytest.raises(TaskFileError) as refused:
            load_tasks(path)
        assert refused.value.message.startswith(f"{path}:2: task {line['id']}: ")
        assert expected in refused.value.message and "fatal:" not in refused.value.message
    many = write(
        tmp_path / "many.jsonl",
        *({**good, "id": f"t{i}", "base_commit": "f" * 40} for i in range(8)),
    )
    with pytest.raises(TaskFileError, match="and 3 more like these"):
        load_tasks(many)


def test_a_batch_with_a_missing_workspace_exits_2_before_running(tmp_path: Path) -> None:
    from tests.support.cli import clean_env, journeyman

    tasks = write(tmp_path / "t.jsonl", {"id": "a", "task": "x", "workspace": str(tmp_path / "x")})
    done = journeyman("batch", str(tasks), "--out", str(tmp_path / "out"), env=clean_env())
    assert done.returncode == 2 and f"{tasks}:1: task a: its workspace" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_a_folder_task_gets_a_copy_and_its_setup_runs_once(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "f.txt").write_text("x")
    task = BatchTask(id="c1", task="x", workspace=str(source), setup="echo ran >> setup.log")
    workspace = prepare_workspace(task, tmp_path / "out")
    again = prepare_workspace(task, tmp_path / "out")  # a resumed task keeps its files
    assert again == workspace and (workspace / "setup.log").read_text() == "ran\n"
    assert not (source / "setup.log").exists()
    fresh = prepare_workspace(task, tmp_path / "out", attempt=2)
    assert fresh != workspace and (fresh / "setup.log").read_text() == "ran\n"
    failing = BatchTask(id="c2", task="x", workspace=str(source), setup="echo nope >&2; exit 3")
    with pytest.raises(WorkspaceError, match="exited 3: nope"):
        prepare_workspace(failing, tmp_path / "out")
