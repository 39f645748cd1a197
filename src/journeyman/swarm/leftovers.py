"""What a swarm that died (kill -9, a lost machine) left in a repository: worktrees, their
temporary folders, and worker branches. The next swarm on the repository removes them before
it starts, and `journeyman swarm --clean` does it on demand.

A swarm is alive while it holds the lock in its folder (`worktrees.LIVE_LOCK`); the lock goes
with the process, so a free lock is a dead swarm. Folders from before the lock existed are
left alone unless asked (`everything=True`). A dead swarm's branch that holds commits not merged
into the current branch may be work worth keeping: it is kept and named. A finished swarm's
branches (those of failed subtasks, kept on purpose) are left alone. `everything` deletes every
worker branch of a swarm not running; a deleted branch is reported with its last commit so it
can be brought back (`git branch NAME SHA`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.swarm.worktrees import (
    BRANCH_PREFIX,
    LIVE_LOCK,
    OWNER_FILE,
    POOL_PREFIX,
    Repo,
)


@dataclass
class Cleanup:
    """What was found and what was done with it."""

    worktrees: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    branches: dict[str, str] = field(default_factory=dict)
    """Deleted branch → its last commit."""
    kept: dict[str, int] = field(default_factory=dict)
    """Branch kept because it holds commits not merged → how many."""

    def empty(self) -> bool:
        return not (self.worktrees or self.folders or self.branches or self.kept)

    def describe(self) -> str:
        parts = []
        if self.worktrees:
            parts.append(f"removed {len(self.worktrees)} worktree(s)")
        if self.folders:
            parts.append(f"{len(self.folders)} temporary folder(s)")
        if self.branches:
            shown = ", ".join(f"{name} ({sha[:12]})" for name, sha in self.branches.items())
            parts.append(f"deleted branch(es) {shown}")
        text = "left by a swarm that did not finish: " + (", ".join(parts) or "nothing removed")
        if self.kept:
            shown = ", ".join(f"{name} ({n} unmerged commit(s))" for name, n in self.kept.items())
            text += (
                f"; kept {shown}: merge what you need, then `journeyman swarm --clean` deletes them"
            )
        return text


def clean_leftovers(repo: Repo, *, everything: bool = False) -> Cleanup:
    """Remove what dead swarms left in `repo`; `everything` also takes folders from before
    liveness locks and branches with unmerged commits."""
    cleanup = Cleanup()
    live_runs: set[str] = set()
    dead_folders: list[Path] = []
    registered = _registered_worktrees(repo)
    for folder in _pool_folders(registered):
        state = _folder_state(folder, repo)
        if state == "other":
            continue
        run_id = _run_id(folder)
        if state == "live" or (state == "unknown" and not everything):
            live_runs.add(run_id)
            continue
        dead_folders.append(folder)
    for path, branch in registered:
        folder = path.parent
        if folder in dead_folders or (not path.exists() and _run_of(branch) not in live_runs):
            repo.run("worktree", "remove", "--force", str(path), check=False)
            cleanup.worktrees.append(str(path))
    repo.run("worktree", "prune", check=False)
    for folder in dead_folders:
        shutil.rmtree(folder, ignore_errors=True)
        cleanup.folders.append(str(folder))
    dead_runs = {_run_id(folder) for folder in dead_folders}
    _clean_branches(repo, live_runs, dead_runs if not everything else None, cleanup)
    return cleanup


def _pool_folders(registered: list[tuple[Path, str | None]]) -> list[Path]:
    """Swarm folders in the temporary folder and those git knows worktrees in."""
    found = {path.parent for path, _ in registered if path.parent.name.startswith(POOL_PREFIX)}
    temp = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        found.update(p for p in temp.glob(f"{POOL_PREFIX}*") if p.is_dir() and not p.is_symlink())
    return sorted(found)


def _folder_state(folder: Path, repo: Repo) -> str:
    """ "live", "dead", "unknown" (no owner file: made before locks) or "other" (another
    repository's)."""
    if not folder.exists():
        return "dead"
    try:
        owner = json.loads((folder / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "unknown"
    if not isinstance(owner, dict) or owner.get("repository") != str(repo.root):
        return "other"
    try:
        handle = os.open(folder / LIVE_LOCK, os.O_RDWR)
    except OSError:
        return "dead"
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return "live"
    finally:
        os.close(handle)
    return "dead"


def _run_id(folder: Path) -> str:
    """`jm-swarm-<run id>-<random>` → the run id."""
    return folder.name.removeprefix(POOL_PREFIX).split("-", 1)[0]


def _run_of(branch: str | None) -> str | None:
    if branch is None or not branch.startswith(BRANCH_PREFIX):
        return None
    return branch.removeprefix(BRANCH_PREFIX).split("/", 1)[0]


def _registered_worktrees(repo: Repo) -> list[tuple[Path, str | None]]:
    """(path, branch) of every worktree git knows that a swarm made."""
    listing = repo.run("worktree", "list", "--porcelain", check=False).output
    found: list[tuple[Path, str | None]] = []
    path: Path | None = None
    branch: str | None = None
    for line in [*listing.splitlines(), ""]:
        if line.startswith("worktree "):
            path, branch = Path(line.removeprefix("worktree ")), None
        elif line.startswith("branch "):
            branch = line.removeprefix("branch refs/heads/")
        elif not line and path is not None:
            if path.parent.name.startswith(POOL_PREFIX) or _run_of(branch):
                found.append((path, branch))
            path = None
    return found


def _clean_branches(
    repo: Repo, live_runs: set[str], dead_runs: set[str] | None, cleanup: Cleanup
) -> None:
    """Delete the worker branches of `dead_runs` that hold nothing unmerged (those that do are
    kept and named); with `dead_runs` None, every worker branch of a swarm not running."""
    listing = repo.run(
        "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/journeyman/"
    ).output
    in_use = {branch for _, branch in _registered_worktrees(repo) if branch}
    for line in listing.splitlines():
        name, _, sha = line.partition(" ")
        run = _run_of(name)
        if run is None or run in live_runs or name in in_use:
            continue
        if dead_runs is not None and run not in dead_runs:
            continue  # a finished swarm's branch: kept on purpose, named in its outcome
        unmerged = repo.run("rev-list", "--count", f"HEAD..{name}", check=False)
        ahead = int(unmerged.output.strip()) if unmerged.code == 0 else 0
        if ahead and dead_runs is not None:
            cleanup.kept[name] = ahead
            continue
        if repo.run("branch", "-D", name, check=False).code == 0:
            cleanup.branches[name] = sha
