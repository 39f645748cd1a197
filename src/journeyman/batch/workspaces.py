"""Each task's own workspace: a fresh copy of its folder, or a clone of its repository at
`base_commit` — never the original — with its `setup` command run once.

The layout under `--out/workspaces/` keeps the tasks' folders and the batch's own bookkeeping in
separate namespaces, so no task id can collide with either:

    workspaces/<folder_name(task id)>/attempt-<N>/            the workspace of attempt N
    workspaces/<folder_name(task id)>/attempt-<N>.setup-done  its setup ran
    workspaces/.staging/<folder_name(task id)>/attempt-<N>/   a copy being made (renamed when whole)

`folder_name` maps every string to a distinct name that is lower-case ASCII, never starts with
a dot and is short enough for any filesystem, so `.staging` (and anything else starting with a
dot) is the batch's alone, and ids that differ only in case or in Unicode normalisation stay
apart on filesystems that fold them.

Batches started before this layout (`workspaces/<id>` and `workspaces/<id>.attemptN`) keep
their folders: `Workspaces(root, legacy=True)` names them as they were, and `legacy_collisions`
lists the ids for which those names were ambiguous (such a batch is refused on resume).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from journeyman.batch.task_file import BatchTask, is_git_url
from journeyman.core.errors import AgentError, ConfigurationError
from journeyman.core.safe_git import safe_git_command, safe_git_env

SETUP_TIMEOUT_S = 1800.0
"""Longest a task's setup command may run."""
SETUP_DONE = ".setup-done"
"""Suffix of the marker (beside a workspace, not in it) that its setup already ran."""
STAGING = ".staging"
"""Where copies are made before they are renamed into place (no task folder starts with a dot)."""
WORKSPACES = "workspaces"
"""The folder of `--out` that holds the tasks' workspaces."""
LAYOUT_VERSION = 2
"""The layout described above; batches recorded without one use the legacy layout (1)."""
KEEP_CHOICES = ("all", "failed", "none")
"""What `--keep` may say: which tasks' workspaces stay once they end."""

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_MAX_NAME = 120
"""Longest folder name (bytes); longer encodings are cut and end in a digest of the id."""
_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"} | {f"{p}{n}" for p in ("com", "lpt") for n in range(1, 10)}
)
"""Names some filesystems will not create (whatever the extension)."""


class WorkspaceError(AgentError):
    """A task's workspace could not be prepared; the task fails without running."""


class OutFolderError(ConfigurationError):
    """`--out` and a task's workspace overlap (one inside the other)."""


def folder_name(task_id: str) -> str:
    """A folder name for `task_id`, distinct for distinct ids (also where case or Unicode
    normalisation is folded), safe on any filesystem, never starting with a dot.

    Lower-case letters, digits, `-`, `_` and `.` stay as they are; an upper-case letter becomes
    `^` and its lower case; any other byte of its UTF-8 form (and a leading or trailing dot)
    becomes `~` and two hex digits. An encoding longer than 120 bytes is cut and ends in `~~`
    and a digest of the whole id (no shorter encoding holds `~~`)."""
    pieces: list[str] = []
    for index, char in enumerate(task_id):
        edge = index == 0 or index == len(task_id) - 1
        if char in _PLAIN and not (char == "." and edge):
            pieces.append(char)
        elif "A" <= char <= "Z":
            pieces.append("^" + char.lower())
        else:
            pieces.extend(f"~{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
    if not pieces:
        return "~"  # the empty id
    if "".join(pieces).split(".")[0] in _RESERVED:  # plain letters only: escape the first
        pieces[0] = f"~{ord(pieces[0]):02x}"
    name = "".join(pieces)
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    kept, size = [], 0
    for piece in pieces:
        if size + len(piece) > _MAX_NAME - 34:
            break
        kept.append(piece)
        size += len(piece)
    return "".join(kept) + "~~" + digest


class Workspaces:
    """The task workspaces of one batch, under `root` (`--out/workspaces`)."""

    def __init__(self, root: Path, *, legacy: bool = False) -> None:
        self.root = root
        self.legacy = legacy
        """The folders of a batch started before `LAYOUT_VERSION` 2 (see the module's doc)."""

    def task_folder(self, task_id: str) -> Path:
        """The folder of all of a task's attempts (legacy layout: its first attempt's)."""
        return self.root / (task_id if self.legacy else folder_name(task_id))

    def attempt_folder(self, task_id: str, attempt: int = 1) -> Path:
        """Where `task_id`'s workspace for `attempt` lives (each attempt starts afresh)."""
        if self.legacy:
            return self.root / (task_id if attempt == 1 else f"{task_id}.attempt{attempt}")
        return self.task_folder(task_id) / f"attempt-{attempt}"

    def staging_folder(self, task_id: str, attempt: int = 1) -> Path:
        """Where the copy for `attempt` is made before it is renamed into place."""
        if self.legacy:
            target = self.attempt_folder(task_id, attempt)
            return target.with_name(target.name + ".partial")
        return self.root / STAGING / folder_name(task_id) / f"attempt-{attempt}"

    def setup_marker(self, task_id: str, attempt: int = 1) -> Path:
        target = self.attempt_folder(task_id, attempt)
        if self.legacy:
            return self.root / ".state" / f"{target.name}{SETUP_DONE}"
        return target.with_name(target.name + SETUP_DONE)

    def prepare(self, task: BatchTask, attempt: int = 1) -> Path:
        """The task's workspace for `attempt`: made on first use, reused as it is afterwards
        (a resumed task continues on the files its session left)."""
        target = self.attempt_folder(task.id, attempt)
        marker = self.setup_marker(task.id, attempt)
        if target.is_dir() and (task.setup is None or marker.exists()):
            return target
        source = Path(task.workspace).expanduser()
        if not is_git_url(task.workspace) and not source.is_dir():
            raise WorkspaceError(f"task {task.id}: its workspace {source} is not a folder")
        if target.exists():  # an earlier preparation was cut off: start it again
            remove_tree(target)
        staged = self.staging_folder(task.id, attempt)
        if staged.exists():
            remove_tree(staged)
        staged.parent.mkdir(parents=True, exist_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        _copy_source(task, source, staged)
        staged.rename(target)  # whole or absent: a kill mid-copy never leaves half a workspace
        if not self.legacy:
            with contextlib.suppress(OSError):
                staged.parent.rmdir()  # the task's own staging folder, empty now
        if task.setup:
            _setup(task, target)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        return target

    def remove_task(self, task_id: str, attempts: int) -> bool:
        """Remove every workspace of `task_id` (its attempts 1..`attempts`); False when some of
        it could not be removed (it is then left as it is)."""
        if self.legacy:
            folders = [self.attempt_folder(task_id, n) for n in range(1, attempts + 1)]
            markers = [self.setup_marker(task_id, n) for n in range(1, attempts + 1)]
        else:
            folders, markers = [self.task_folder(task_id)], []
        removed = True
        for folder in folders:
            try:
                remove_tree(folder)
            except OSError:
                removed = False
        for marker in markers:
            with contextlib.suppress(OSError):
                marker.unlink(missing_ok=True)
        return removed

    def clear_staging(self) -> None:
        """Remove copies a killed run left half made (no other process runs this batch)."""
        if not self.legacy:
            with contextlib.suppress(OSError):
                remove_tree(self.root / STAGING)


def _copy_source(task: BatchTask, source: Path, into: Path) -> None:
    """`into` becomes a copy of the task's folder, or a clone of its repository (a local one,
    or one given by URL) at `base_commit`."""
    if is_git_url(task.workspace) and task.base_commit:
        _clone_url(task.workspace, into, task.base_commit, task.id)
        return
    if task.base_commit:
        _clone_at(source, into, task.base_commit, task.id)
        return
    try:
        shutil.copytree(source, into, symlinks=True)
    except (OSError, shutil.Error) as error:
        raise WorkspaceError(f"task {task.id}: cannot copy {source}: {error}") from None


def fresh_copy(task: BatchTask, target: Path) -> None:
    """Make `target` the task's workspace as it starts (the start of a graded tree): a copy of
    its folder, or a clone of its repository at `base_commit`, with its `setup` run. Whatever
    was at `target` goes first; the copy is made beside it and renamed when whole."""
    source = Path(task.workspace).expanduser()
    if not is_git_url(task.workspace) and not source.is_dir():
        raise WorkspaceError(f"task {task.id}: its workspace {source} is not a folder")
    remove_tree(target)
    partial = target.with_name(target.name + ".partial")
    remove_tree(partial)
    target.parent.mkdir(parents=True, exist_ok=True)
    _copy_source(task, source, partial)
    partial.rename(target)
    if task.setup:
        _setup(task, target)


GRADING_FOLDER = ".grading"
"""Beside each workspace, where the task's changes are graded in a fresh copy (a dot name: the
batch's own namespace, which no task's folder can take)."""


def grading_path(workspace: Path) -> Path:
    """Where a task's workspace is graded: beside it under `.grading` (hidden from the agent
    with the rest of `--out`), never inside it."""
    return workspace.parent / GRADING_FOLDER / workspace.name


def legacy_collisions(task_ids: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of ids whose legacy folders clash: one id is another's with `.partial` or
    `.attemptN` added, or they differ only in case (folded by some filesystems)."""
    ids = sorted(set(task_ids))
    known = set(ids)
    folded: dict[str, str] = {}
    clashes: list[tuple[str, str]] = []
    for task_id in ids:
        stem, dot, suffix = task_id.rpartition(".")
        if (
            dot
            and stem in known
            and (suffix == "partial" or (suffix.startswith("attempt") and suffix[7:].isdigit()))
        ):
            clashes.append((stem, task_id))
        other = folded.setdefault(task_id.casefold(), task_id)
        if other != task_id:
            clashes.append((other, task_id))
    return clashes


def workspace_path(task: BatchTask, under: Path, attempt: int = 1) -> Path:
    """Where `task`'s workspace for `attempt` lives under `under` (`--out/workspaces`)."""
    return Workspaces(under).attempt_folder(task.id, attempt)


def prepare_workspace(task: BatchTask, under: Path, attempt: int = 1) -> Path:
    """`Workspaces(under).prepare(task, attempt)`: the task's workspace, made or reused."""
    return Workspaces(under).prepare(task, attempt)


def check_out_folder(out: Path, tasks: Sequence[BatchTask]) -> None:
    """Refuse (`OutFolderError`) an `out` that is a task's workspace or lies inside one (each
    copy would hold `out`, which holds the copies), and a workspace that is `out` itself or
    lies in its `workspaces/` folder (the batch rewrites and removes what is there). Symlinks
    are resolved; the message names both paths as given and as resolved."""
    real_out = out.expanduser().resolve()
    managed = real_out / WORKSPACES
    for task in tasks:
        given = Path(task.workspace).expanduser()
        real = given.resolve()
        if real_out == real or real_out.is_relative_to(real):
            where = "is" if real_out == real else "is inside"
            raise OutFolderError(
                f"--out {_shown(out, real_out)} {where} the workspace of task {task.id}, "
                f"{_shown(given, real)}: each task's copy of that folder would hold --out, "
                "which holds the copies. Give an --out outside every task's workspace"
            )
        if real.is_relative_to(managed):
            raise OutFolderError(
                f"task {task.id}'s workspace {_shown(given, real)} is inside the batch's own "
                f"workspaces folder {managed} (under --out {_shown(out, real_out)}), which the "
                "batch rewrites and removes. Give the task a workspace outside it"
            )


def _shown(path: Path, real: Path) -> str:
    return str(path) if Path(os.path.abspath(path)) == real else f"{path} (resolved: {real})"


def remove_tree(path: Path) -> None:
    """Remove `path` (a folder, or a file or symlink), read-only entries included; a missing
    path is no error."""
    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    if not path.exists():
        return

    def writable_then_retry(function: Any, name: str, _error: Any) -> None:
        parent = os.path.dirname(name)
        with contextlib.suppress(OSError):
            os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        if function in (os.rmdir, os.unlink, os.remove):
            function(name)
        else:  # listing a folder it may not read: open it up, then remove it whole
            os.chmod(name, os.lstat(name).st_mode | stat.S_IRWXU)
            remove_tree(Path(name))

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=writable_then_retry)
    else:
        shutil.rmtree(path, onerror=writable_then_retry)


def _clone_url(url: str, target: Path, commit: str, task_id: str) -> None:
    """A clone of the repository at `url`, checked out at `commit`."""
    steps = [
        safe_git_command("clone", "--quiet", "--no-checkout", "--", url, str(target)),
        safe_git_command("-C", str(target), "checkout", "--quiet", "--detach", commit),
    ]
    _run_steps(steps, task_id, f"{commit} of {url}")


def _clone_at(source: Path, target: Path, commit: str, task_id: str) -> None:
    """A clone sharing the repository's objects (the original is never written to)."""
    if not (source / ".git").exists() and not (source / "HEAD").is_file():
        raise WorkspaceError(
            f"task {task_id}: it has a base_commit, but its workspace {source} is not a git "
            "repository; give the repository's top folder, or drop base_commit"
        )
    steps = [
        safe_git_command("clone", "--quiet", "--shared", "--no-checkout", str(source), str(target)),
        safe_git_command("-C", str(target), "checkout", "--quiet", "--detach", commit),
    ]
    _run_steps(steps, task_id, f"{commit} of {source}")


def _run_steps(steps: list[list[str]], task_id: str, what: str) -> None:
    env = safe_git_env(os.environ)
    for name, step in zip(("git clone", "git checkout"), steps, strict=True):
        try:
            done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise WorkspaceError(f"task {task_id}: {name} failed: {error}") from None
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise WorkspaceError(f"task {task_id}: cannot check out {what}: {detail[0]}")


def _setup(task: BatchTask, workspace: Path) -> None:
    assert task.setup is not None
    try:
        done = subprocess.run(
            task.setup,
            shell=True,
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=SETUP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise WorkspaceError(
            f"task {task.id}: setup {task.setup!r} ran past {SETUP_TIMEOUT_S:g} s"
        ) from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise WorkspaceError(
            f"task {task.id}: setup {task.setup!r} exited {done.returncode}: "
            + (" | ".join(tail) or "no output")
        )


__all__ = [
    "KEEP_CHOICES",
    "LAYOUT_VERSION",
    "STAGING",
    "WORKSPACES",
    "OutFolderError",
    "WorkspaceError",
    "Workspaces",
    "check_out_folder",
    "folder_name",
    "fresh_copy",
    "grading_path",
    "legacy_collisions",
    "prepare_workspace",
    "remove_tree",
    "workspace_path",
]
