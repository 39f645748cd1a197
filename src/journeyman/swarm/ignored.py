"""Files a worker made that git ignores (`build/`, `settings.local.toml`, ...): a merge would
leave them behind with the worktree, so they are carried into the workspace by name, or
refused by name with the reason. Nothing a worker made disappears without a word.

Caches and environments that any test run leaves (`__pycache__`, `.pytest_cache`, a `.venv`)
are neither carried nor reported one by one; files that would make the host run code
(`*.pth`, `sitecustomize.py`, anything inside a virtual environment) and links are never
carried: the host does not act on what a sandboxed command wrote.
"""

from __future__ import annotations

import filecmp
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from journeyman.swarm.worktrees import Repo

CACHE_PARTS = frozenset(
    {
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        ".nox",
        ".eggs",
        "node_modules",
        "htmlcov",
        ".coverage",
    }
)
"""Path parts of what test runs and installs leave behind: never carried, counted only."""
CACHE_SUFFIXES = (".pyc", ".pyo", ".egg-info")
ENVIRONMENT_PARTS = frozenset({".venv", "venv", ".env-venv"})
HOST_CODE_NAMES = frozenset({"sitecustomize.py", "usercustomize.py"})
MAX_CARRIED_BYTES = 50 * 1024 * 1024
"""Bytes of ignored files carried from one worker; the rest are refused by name."""


@dataclass
class IgnoredOutputs:
    """What became of the ignored files one worker made."""

    carried: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    """Path → why it was not carried."""
    caches: int = 0
    """Cache and environment files left behind (not listed)."""

    def describe(self) -> str:
        parts = []
        if self.carried:
            parts.append(f"carried {len(self.carried)} ignored file(s): {_names(self.carried)}")
        if self.refused:
            shown = "; ".join(f"{path} ({why})" for path, why in list(self.refused.items())[:6])
            more = len(self.refused) - 6
            parts.append(
                f"did not carry {len(self.refused)} ignored file(s): {shown}"
                + (f" and {more} more" if more > 0 else "")
            )
        return "; ".join(parts)


def ignored_files(tree: Path) -> list[str]:
    """Files in the worktree `tree` that git ignores (none exist when a worktree is made, so
    these are the worker's, or its checks')."""
    out = Repo(tree).run("ls-files", "-z", "--others", "--ignored", "--exclude-standard")
    return sorted(name for name in out.output.split("\0") if name)


def carry_ignored(tree: Path, workspace: Path) -> IgnoredOutputs:
    """Copy the ignored files a worker made in `tree` into `workspace`, each only when the
    workspace has no such file or has the same bytes; everything else is refused by name."""
    outcome = IgnoredOutputs()
    budget = MAX_CARRIED_BYTES
    root = workspace.resolve()
    for name in ignored_files(tree):
        relative = PurePosixPath(name)
        if _is_cache(relative):
            outcome.caches += 1
            continue
        source = tree / name
        why = _never_carried(relative, source, tree)
        target = workspace / name
        if why is None:
            why = _target_problem(target, root, source)
        if why is None and source.stat().st_size > budget:
            why = f"over the {MAX_CARRIED_BYTES // (1024 * 1024)} MB carried per worker"
        if why == "same":
            continue
        if why is not None:
            outcome.refused[name] = why
            continue
        budget -= source.stat().st_size
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        outcome.carried.append(name)
    return outcome


def _is_cache(path: PurePosixPath) -> bool:
    return any(part in CACHE_PARTS or part.endswith(CACHE_SUFFIXES) for part in path.parts)


def _never_carried(relative: PurePosixPath, source: Path, tree: Path) -> str | None:
    if source.is_symlink():
        return "a link: links a worker made are not followed on the host"
    if not source.is_file():
        return "not a regular file"
    if relative.suffix == ".pth" or relative.name in HOST_CODE_NAMES:
        return "Python runs it at start-up; copy it by hand if you trust it"
    parents = [tree.joinpath(*relative.parts[:i]) for i in range(1, len(relative.parts))]
    if any(p.name in ENVIRONMENT_PARTS or (p / "pyvenv.cfg").exists() for p in parents):
        return "inside a virtual environment the worker made"
    return None


def _target_problem(target: Path, root: Path, source: Path) -> str | None:
    """Why `target` may not be written ("same" when it already holds these bytes)."""
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.resolve().is_relative_to(root):
        return "its folder in the workspace leads outside it"
    if target.is_symlink() or (target.exists() and not target.is_file()):
        return "the workspace has something else at that path"
    if target.exists():
        if filecmp.cmp(source, target, shallow=False):
            return "same"
        return "the workspace has a different file there, which is kept"
    if not os.access(parent, os.W_OK):
        return "its folder in the workspace is not writable"
    return None


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:6])
    return shown + (f" and {len(paths) - 6} more" if len(paths) > 6 else "")
