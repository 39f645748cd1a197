"""Nothing a swarm's worker made is lost without a word: files git ignores are carried into
the workspace or refused by name, commits made on another branch of the worktree are merged,
and what a killed swarm left (worktrees, folders, branches) is removed by the next one or by
`journeyman swarm --clean`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from journeyman.swarm.leftovers import clean_leftovers
from journeyman.swarm.worktrees import Repo
from tests.fakes.swarm import GIT_IDENTITY, Step, SwarmModel, git, git_repo
from tests.support.cli import clean_env, jm

from .test_swarm_run import run_swarm, subtask


def writes(*files: tuple[str, str]) -> object:
    def script(attempt: int, turn: int) -> Step:
        if turn < len(files):
            path, content = files[turn]
            return Step(calls=[("write_file", {"path": path, "content": content})])
        return Step(calls=[("finish", {"summary": "done"})])

    return script


def test_ignored_outputs_are_carried_or_refused_by_name(tmp_path: Path) -> None:
    model = SwarmModel(
        [subtask("a", ["a.txt"])],
        {
            "w1": writes(  # type: ignore[dict-item]
                ("a.txt", "A\n"),
                ("build/out.txt", "built\n"),
                ("settings.local.toml", "mine = 2\n"),
                ("hook.pth", "import os\n"),
                ("same.local.toml", "x = 1\n"),
            )
        },
    )
    files = {"a.txt": "a\n", ".gitignore": "build/\n*.local.toml\n*.pth\n__pycache__/\n"}
    repo = git_repo(tmp_path / "repo", files)
    (repo / "settings.local.toml").write_text("mine = 1\n")  # the user's own, untracked
    (repo / "same.local.toml").write_text("x = 1\n")
    result, _, repo = run_swarm(tmp_path, model, files, verify="python -c 'import a' || true")
    assert result.success, result.summary()
    (worker,) = result.workers
    assert worker.ignored.carried == ["build/out.txt"]
    assert (repo / "build" / "out.txt").read_text() == "built\n"
    assert (repo / "settings.local.toml").read_text() == "mine = 1\n"  # never overwritten
    assert set(worker.ignored.refused) == {"settings.local.toml", "hook.pth"}
    assert "kept" in worker.ignored.refused["settings.local.toml"]
    assert "start-up" in worker.ignored.refused["hook.pth"]
    assert not (repo / "hook.pth").exists()
    assert "2 ignored file(s) a worker made were not carried" in result.summary()
    assert result.to_dict()["workers"][0]["ignored_refused"]["hook.pth"]


def test_commits_on_another_branch_of_the_worktree_are_merged(tmp_path: Path) -> None:
    side = (
        "git checkout -q -b side && echo changed > a.txt && git commit -q -am 'on side' && "
        "echo also > b.txt && git add b.txt && git commit -q -m more"
    )

    def script(attempt: int, turn: int) -> Step:
        if turn == 0:
            return Step(calls=[("run_command", {"command": side})])
        return Step(calls=[("finish", {"summary": "done"})])

    model = SwarmModel([subtask("a", ["a.txt"])], {"w1": script})
    os.environ.update(GIT_IDENTITY)  # the worker's git commits need a name
    result, _, repo = run_swarm(tmp_path, model, {"a.txt": "a\n"}, verify="true")
    assert result.success, result.summary()
    assert (repo / "a.txt").read_text() == "changed\n"
    assert (repo / "b.txt").read_text() == "also\n"
    assert "on side" in git(repo, "log", "--format=%s")


KILLED_SWARM = """
import asyncio, os, signal, sys
from pathlib import Path
from journeyman.swarm.worktrees import Repo, WorktreePool

async def main():
    repo = Repo(Path(sys.argv[1]))
    pool = WorktreePool(repo, "deadbeef")
    head = repo.out("rev-parse", "HEAD")
    busy = await pool.create("w1", head)
    (busy.path / "work.txt").write_text("half done")
    await pool.commit(busy, "w1's work")
    await pool.create("w2", head)  # nothing committed
    print(pool.folder, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_a_killed_swarms_leftovers_are_cleaned_and_unmerged_work_kept(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_SWARM), str(repo)],
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_IDENTITY},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    folder = Path(done.stdout.strip())
    assert folder.is_dir() and len(git(repo, "worktree", "list").splitlines()) == 3

    cleanup = clean_leftovers(Repo(repo))
    assert not folder.exists()
    assert git(repo, "worktree", "list").count("\n") == 1
    assert list(cleanup.branches) == ["journeyman/swarm-deadbeef/w2"]
    assert cleanup.kept == {"journeyman/swarm-deadbeef/w1": 1}
    assert "kept journeyman/swarm-deadbeef/w1 (1 unmerged commit(s))" in cleanup.describe()
    assert clean_leftovers(Repo(repo)).empty()  # said once; the branch stays until --clean
    assert "journeyman/swarm-deadbeef/w1" in git(repo, "branch", "--list")

    shown = jm("swarm", "--clean", "--workspace", str(repo), env=clean_env())
    assert shown.returncode == 0, shown.stderr
    assert "deleted branch journeyman/swarm-deadbeef/w1 (was " in shown.stdout
    assert "journeyman/swarm" not in git(repo, "branch", "--list")
    again = jm("swarm", "--clean", "--workspace", str(repo), env=clean_env())
    assert again.returncode == 0 and "nothing to clean" in again.stdout


def test_a_running_swarms_worktrees_are_never_touched(tmp_path: Path) -> None:
    import asyncio

    from journeyman.swarm.worktrees import WorktreePool

    repo_path = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    repo = Repo(repo_path)

    async def live() -> None:
        pool = WorktreePool(repo, "cafe0001")
        tree = await pool.create("w1", repo.out("rev-parse", "HEAD"))
        try:
            cleanup = clean_leftovers(repo, everything=True)
            assert cleanup.empty(), cleanup.describe()
            assert tree.path.is_dir()
        finally:
            await pool.remove(tree, keep_branch=False)
            await pool.close()

    asyncio.run(live())


def test_clean_needs_no_goal_and_refuses_one(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    both = jm("swarm", "do it", "--clean", "--workspace", str(repo), env=clean_env())
    assert both.returncode == 2 and "--clean takes no GOAL" in both.stderr
    neither = jm("swarm", "--workspace", str(repo), env=clean_env())
    assert neither.returncode == 2 and "give the swarm a GOAL" in neither.stderr
