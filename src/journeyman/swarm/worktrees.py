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
import os
import shutil
import subprocess
import tempfile
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


class WorktreePool:
    """Creates worktrees for the workers of one swarm run in a temporary folder, and removes
    them (and the branches of merged work) at the end."""

    def __init__(self, repo: Repo, run_id: str) -> None:
        self.repo = repo
        self.run_id = run_id
        self.folder = Path(tempfile.mkdtemp(prefix=f"jm-swarm-{run_id}-"))
        self._lock = asyncio.Lock()
        self.worktrees: list[Worktree] = []

    def branch_name(self, worker_id: str) -> str:
        return f"journeyman/swarm-{self.run_id}/{worker_id}"

    async def create(self, worker_id: str, base: str) -> Worktree:
        """A new worktree for `worker_id` on a new branch at `base`."""
        branch = self.branch_name(worker_id)
        path = self.folder / worker_id
        async with self._lock:  # git serialises worktree bookkeeping with a lock file
            await self.repo.arun("worktree", "add", "--quiet", "-B", branch, str(path), base)
        tree = Worktree(path, branch, base)
        self.worktrees.append(tree)
        return tree

    async def commit(self, tree: Worktree, message: str) -> bool:
        """Commit everything the worker changed in `tree`; False when it changed nothing."""
        repo = Repo(tree.path)
        await repo.arun("add", "-A")
        if (await repo.arun("diff", "--cached", "--quiet", check=False)).code == 0:
            return False
        await repo.arun("commit", "--quiet", "--no-verify", "-m", message)
        return True

    async def changed_files(self, tree: Worktree) -> list[str]:
        """Files the branch changed since its base."""
        out = await asyncio.to_thread(
            Repo(tree.path).out, "diff", "--name-only", f"{tree.base}..HEAD"
        )
        return [line for line in out.splitlines() if line]

    async def remove(self, tree: Worktree, *, keep_branch: bool) -> None:
        """Remove the worktree folder; delete its branch unless `keep_branch`."""
        async with self._lock:
            await self.repo.arun("worktree", "remove", "--force", str(tree.path), check=False)
            if not keep_branch:
                await self.repo.arun("branch", "-D", tree.branch, check=False)

    async def close(self) -> None:
        async with self._lock:
            await self.repo.arun("worktree", "prune", check=False)
        shutil.rmtree(self.folder, ignore_errors=True)
