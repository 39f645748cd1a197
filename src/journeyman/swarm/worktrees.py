"""The git side of a swarm: checking the workspace, one worktree and branch per worker,
committing a worker's changes, and cleaning up.

A swarm needs a git repository with at least one commit: every worker starts from the
workspace's HEAD in a worktree of its own, so workers never see each other's half-done edits.
A workspace that is not a repository is refused (the user is told to `git init` and commit);
one with uncommitted changes to tracked files is refused too (the swarm merges its work into
the current branch, and those changes would be neither in the workers' base nor safe from the
merges). Untracked files are left alone and are not part of the workers' base.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from journeyman.core.errors import ConfigurationError
from journeyman.core.safe_git import safe_git_command, safe_git_env
from journeyman.tools.sandbox.git_scan import repository_config_names

FALLBACK_IDENTITY = {
    "GIT_AUTHOR_NAME": "journeyman swarm",
    "GIT_AUTHOR_EMAIL": "swarm@journeyman.invalid",
    "GIT_COMMITTER_NAME": "journeyman swarm",
    "GIT_COMMITTER_EMAIL": "swarm@journeyman.invalid",
}
"""Who commits a worker's changes when the repository has no user configured."""


class GitError(Exception):
    """A git command failed."""

    def __init__(self, args: tuple[str, ...], code: int, output: str) -> None:
        self.command = " ".join(("git", *args))
        self.code = code
        self.output = output
        super().__init__(f"{self.command} exited with status {code}: {output.strip()[-500:]}")


@dataclass(frozen=True)
class GitResult:
    code: int
    output: str
    """stdout and stderr together."""


class Repo:
    """git commands in one repository (or worktree)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._env: dict[str, str] | None = None
        self._config_names: list[str] | None = None

    def env(self) -> dict[str, str]:
        if self._env is None:
            env = safe_git_env(os.environ)
            email = subprocess.run(
                self.command("config", "user.email"),
                cwd=self.root,
                env=env,
                capture_output=True,
                text=True,
            )
            if not email.stdout.strip():
                env.update({k: v for k, v in FALLBACK_IDENTITY.items() if k not in env})
            self._env = env
        return self._env

    def command(self, *args: str) -> list[str]:
        """git with the safe overrides (no program the repository names runs), then `args`."""
        if self._config_names is None:
            self._config_names = repository_config_names(self.root)
        return safe_git_command(*args, config_names=self._config_names)

    def run(self, *args: str, check: bool = True) -> GitResult:
        done = subprocess.run(
            self.command(*args),
            cwd=self.root,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        result = GitResult(done.returncode, done.stdout + done.stderr)
        if check and done.returncode != 0:
            raise GitError(args, done.returncode, result.output)
        return result

    async def arun(self, *args: str, check: bool = True) -> GitResult:
        return await asyncio.to_thread(self.run, *args, check=check)

    def out(self, *args: str) -> str:
        done = subprocess.run(
            self.command(*args), cwd=self.root, env=self.env(), capture_output=True, text=True
        )
        if done.returncode != 0:
            raise GitError(args, done.returncode, done.stdout + done.stderr)
        return done.stdout.strip()


def open_repo(workspace: Path) -> Repo:
    """The repository at `workspace`, checked for a swarm; raises `ConfigurationError` (bad
    input) saying what to do when it is not one, has no commit, or has uncommitted changes."""
    if shutil.which("git") is None:
        raise ConfigurationError("the swarm needs git, and git is not on PATH; install it")
    if not workspace.is_dir():
        raise ConfigurationError(f"workspace {workspace} is not a directory")
    probe = subprocess.run(
        safe_git_command("rev-parse", "--show-toplevel"),
        cwd=workspace,
        env=safe_git_env(os.environ),
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        raise ConfigurationError(
            f"workspace {workspace} is not a git repository; the swarm gives each worker a git "
            "worktree and merges their branches. Run `git init && git add -A && git commit -m "
            "start` there first"
        )
    repo = Repo(Path(probe.stdout.strip()))
    if repo.run("rev-parse", "--verify", "--quiet", "HEAD", check=False).code != 0:
        raise ConfigurationError(
            f"the repository at {repo.root} has no commit yet; workers start from HEAD. "
            "Commit the current files first (`git add -A && git commit -m start`)"
        )
    files = repo.out("diff", "--name-only", "HEAD").splitlines()  # staged or not
    if files:
        shown = ", ".join(files[:8]) + (f" and {len(files) - 8} more" if len(files) > 8 else "")
        raise ConfigurationError(
            f"the repository at {repo.root} has uncommitted changes ({shown}); the swarm "
            "merges its workers' branches into the current branch, so commit or set aside "
            "these changes first"
        )
    if (repo.root / ".git").is_dir() and any(
        (repo.root / ".git" / name).exists() for name in ("MERGE_HEAD", "rebase-merge")
    ):
        raise ConfigurationError(
            f"the repository at {repo.root} is in the middle of a merge or rebase; finish it first"
        )
    return repo


@dataclass
class Worktree:
    """One worker's checkout: its folder and its branch."""

    path: Path
    branch: str
    base: str
    """The commit it started from."""


POOL_PREFIX = "jm-swarm-"
"""How the temporary folder of a swarm's worktrees is named: `jm-swarm-<run id>-<random>`."""
BRANCH_PREFIX = "journeyman/swarm-"
"""How a worker's branch is named: `journeyman/swarm-<run id>/<worker id>`."""
OWNER_FILE = "owner.json"
"""In a pool's folder: which repository and process it belongs to."""
LIVE_LOCK = ".live"
"""In a pool's folder: locked for as long as the swarm runs; a free lock means it died."""


@dataclass(frozen=True)
class WorkerCommit:
    """What `WorktreePool.commit` took from a worker's worktree."""

    committed: bool
    """Something was committed (the worker's branch has changes)."""
    switched_from: str | None = None
    """The worker left its branch for this one (or a detached HEAD); its commits were taken."""
    refused: str | None = None
    """Why the worker's work cannot be taken (its HEAD does not start from the base)."""


class WorktreePool:
    """Creates worktrees for the workers of one swarm run in a temporary folder, and removes
    them (and the branches of merged work) at the end.

    The folder holds an owner file and a lock held while the swarm runs, so a swarm that was
    killed leaves a folder whose lock is free: the next swarm on the repository (or
    `journeyman swarm --clean`) finds it and removes what it left (`swarm.leftovers`)."""

    def __init__(self, repo: Repo, run_id: str) -> None:
        self.repo = repo
        self.run_id = run_id
        self.folder = Path(tempfile.mkdtemp(prefix=f"{POOL_PREFIX}{run_id}-"))
        self._live = os.open(self.folder / LIVE_LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._live, fcntl.LOCK_EX | fcntl.LOCK_NB)
        owner = {
            "repository": str(repo.root),
            "run_id": run_id,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
        }
        (self.folder / OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")
        self._lock = asyncio.Lock()
        self.worktrees: list[Worktree] = []

    def branch_name(self, worker_id: str) -> str:
        return f"{BRANCH_PREFIX}{self.run_id}/{worker_id}"

    async def create(self, worker_id: str, base: str) -> Worktree:
        """A new worktree for `worker_id` on a new branch at `base`."""
        branch = self.branch_name(worker_id)
        path = self.folder / worker_id
        async with self._lock:  # git serialises worktree bookkeeping with a lock file
            await self.repo.arun("worktree", "add", "--quiet", "-B", branch, str(path), base)
        tree = Worktree(path, branch, base)
        self.worktrees.append(tree)
        return tree

    async def commit(self, tree: Worktree, message: str) -> WorkerCommit:
        """Commit everything the worker changed in `tree` onto its branch.

        A worker may have switched to another branch of its worktree (or detached HEAD) and
        committed there: when that HEAD starts from the base, the worker's branch is moved to
        it, so those commits are merged too; otherwise its work is refused with the reason."""
        repo = Repo(tree.path)
        switched = await _switched_branch(repo, tree.branch)
        if switched is not None:
            head = (await repo.arun("rev-parse", "HEAD")).output.strip()
            starts_at_base = await repo.arun(
                "merge-base", "--is-ancestor", tree.base, head, check=False
            )
            if starts_at_base.code != 0:
                return WorkerCommit(
                    False,
                    switched_from=switched,
                    refused=f"the worker left its branch for {switched}, which does not start "
                    f"from the swarm's base {tree.base[:12]}; its work there is not merged",
                )
            # keeps the worktree's uncommitted changes; the branch now holds the worker's commits
            await repo.arun("checkout", "--quiet", "-B", tree.branch)
        await repo.arun("add", "-A")
        if (await repo.arun("diff", "--cached", "--quiet", check=False)).code != 0:
            await repo.arun("commit", "--quiet", "--no-verify", "-m", message)
        ahead = await repo.arun("rev-list", "--count", f"{tree.base}..HEAD")
        return WorkerCommit(int(ahead.output.strip() or 0) > 0, switched_from=switched)

    async def changed_files(self, tree: Worktree) -> list[str]:
        """Files the branch changed since its base."""
        out = await asyncio.to_thread(
            Repo(tree.path).out, "diff", "--name-only", f"{tree.base}..HEAD"
        )
        return [line for line in out.splitlines() if line]

    async def remove(self, tree: Worktree, *, keep_branch: bool) -> None:
        """Remove the worktree folder; delete its branch unless `keep_branch`."""
        async with self._lock:
            for _ in range(3):  # another git process may hold the repository's lock a moment
                removed = await self.repo.arun(
                    "worktree", "remove", "--force", str(tree.path), check=False
                )
                if removed.code == 0 or not tree.path.exists():
                    break
                await asyncio.sleep(0.2)
            await self.repo.arun("worktree", "prune", check=False)
            if not keep_branch:
                for _ in range(3):
                    if (await self.repo.arun("branch", "-D", tree.branch, check=False)).code == 0:
                        break
                    await asyncio.sleep(0.2)

    async def close(self) -> None:
        async with self._lock:
            await self.repo.arun("worktree", "prune", check=False)
        shutil.rmtree(self.folder, ignore_errors=True)
        os.close(self._live)


async def _switched_branch(repo: Repo, branch: str) -> str | None:
    """What the worktree has checked out when it is not `branch`: another branch's name, or
    "a detached HEAD"; None when it is still on `branch`."""
    ref = await repo.arun("symbolic-ref", "--quiet", "HEAD", check=False)
    name = ref.output.strip().removeprefix("refs/heads/")
    if ref.code != 0:
        return "a detached HEAD"
    return None if name == branch else name
