"""A task's workspace on its way to a Ray worker and its changes on the way back, as plain
bytes (they travel through Ray's object store; no folder is shared between machines).

Out: `pack_workspace` — a clean clone of a repository given by URL as that URL and its commit
(the worker clones it); any other git repository as a `git bundle` of its checked-out commit
plus an archive of what differs from that commit (files changed, untracked or ignored, and the
list of tracked files removed); any other folder as one tar archive. Either is refused by name, with
its size, past `max_bytes`. `unpack_workspace` rebuilds it in the worker's own folder.

Back: `snapshot` records the unpacked files (content hashes, modes, link targets; `.git`
apart), `collect_changes` archives what differs when the task ends (and, when the agent
committed, a bundle of its new commits), `apply_changes` writes that into the driver's copy.

Every archive is unpacked the safe way (Python's "data" filter and checks of our own): no
absolute path, no `..`, no link leading outside the folder, no device, nothing written through
a link; a path that breaks a rule is refused by name.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from journeyman.core.errors import AgentError
from journeyman.core.safe_git import safe_git_command, safe_git_env

MAX_WORKSPACE_BYTES = 256 * 1024 * 1024
"""Default limit on a packed workspace (and on the changes a task sends back)."""
GIT_TIMEOUT_S = 600.0


class TravelError(AgentError):
    """A workspace could not be packed, unpacked or brought back."""


@dataclass(frozen=True)
class WorkspacePack:
    """A workspace as bytes."""

    kind: Literal["bundle", "tar", "url"]
    data: bytes
    """The bundle (kind "bundle") or the whole folder's tar archive (kind "tar"); nothing for
    a clean clone of a repository the worker clones itself (kind "url")."""
    head: str | None = None
    """The commit checked out (bundle, url)."""
    url: str | None = None
    """Where the worker clones the repository from (url)."""
    overlay: bytes = b""
    """Tar of the files that differ from `head` (bundle)."""
    removed: tuple[str, ...] = ()
    """Tracked files missing from the working tree (bundle)."""

    @property
    def size(self) -> int:
        return len(self.data) + len(self.overlay)


@dataclass(frozen=True)
class WorkspaceChanges:
    """What a task changed in its workspace."""

    files: bytes
    """Tar of the files added or changed (links as links)."""
    removed: tuple[str, ...]
    commits: bytes | None = None
    """A bundle of the commits made on top of the shipped one, when HEAD moved (empty when it
    moved back to one of the shipped commit's ancestors)."""
    head: str | None = None
    """The commit checked out at the end, when it moved."""

    @property
    def empty(self) -> bool:
        return not self.removed and self.commits is None and not _members(self.files)


def too_big(what: str, size: int, limit: int) -> TravelError:
    return TravelError(
        f"{what} is {_mb(size)} packed, over the {_mb(limit)} limit for sending through Ray's "
        "object store; make it smaller (a git repository with base_commit travels as a bundle "
        "of its history) or raise the limit (JOURNEYMAN_RAY_MAX_WORKSPACE_MB)"
    )


def _mb(size: int) -> str:
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


# --------------------------------------------------------------------------- packing


def pack_workspace(
    folder: Path, name: str, max_bytes: int = MAX_WORKSPACE_BYTES, *, url: str | None = None
) -> WorkspacePack:
    """`folder` as bytes; `name` says whose it is in a refusal. With `url` (where `folder` was
    cloned from), a clone nothing changed yet travels as that URL and its commit alone."""
    if (folder / ".git").is_dir() and _git_head(folder) is not None:
        pack = _pack_repository(folder, name, max_bytes, url)
    else:
        pack = WorkspacePack("tar", _tar_of(folder, _walk(folder), name, max_bytes))
    if pack.size > max_bytes:
        raise too_big(name, pack.size, max_bytes)
    return pack


def _pack_repository(folder: Path, name: str, max_bytes: int, url: str | None) -> WorkspacePack:
    head = _git_head(folder)
    assert head is not None
    differ = _git_paths(folder, "diff", "--name-only", "--no-renames", "-z", "HEAD")
    others = _git_paths(folder, "ls-files", "-z", "--others")
    if url is not None and not differ and not others:
        return WorkspacePack("url", b"", head=head, url=url)
    with tempfile.TemporaryDirectory(prefix="jm-pack-") as scratch:
        bundle = Path(scratch) / "ws.bundle"
        _git(folder, "bundle", "create", "--quiet", str(bundle), "HEAD")
        data = bundle.read_bytes()
    if len(data) > max_bytes:
        raise too_big(name, len(data), max_bytes)
    present = [p for p in (*differ, *others) if os.path.lexists(folder / p)]
    removed = tuple(sorted(p for p in differ if not os.path.lexists(folder / p)))
    overlay = _tar_of(folder, sorted(set(present)), name, max_bytes - len(data))
    return WorkspacePack("bundle", data, head=head, overlay=overlay, removed=removed)


def _walk(folder: Path) -> list[str]:
    """Every folder, file and link under `folder` (relative, POSIX; links not followed)."""
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        relative = Path(root).relative_to(folder)
        if relative != Path("."):
            found.append(relative.as_posix())
        for entry in dirs[:]:
            if (Path(root) / entry).is_symlink():
                found.append((relative / entry).as_posix())
                dirs.remove(entry)
        found.extend((relative / entry).as_posix() for entry in files)
    return sorted(found)


def _tar_of(folder: Path, paths: list[str], name: str, max_bytes: int) -> bytes:
    """A tar of `paths` (relative to `folder`): regular files, links and empty folders (other
    kinds of file are left out); refused past `max_bytes` before it is read."""
    total = 0
    chosen: list[tuple[str, os.stat_result]] = []
    for path in paths:
        info = os.lstat(folder / path)
        if stat.S_ISREG(info.st_mode):
            total += info.st_size + 512
        elif not (stat.S_ISLNK(info.st_mode) or stat.S_ISDIR(info.st_mode)):
            continue  # sockets, pipes, devices: nothing to carry
        chosen.append((path, info))
    if total > max_bytes:
        raise too_big(name, total, max_bytes)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path, _info in chosen:
            archive.add(folder / path, arcname=path, recursive=False)
    return buffer.getvalue()


# --------------------------------------------------------------------------- unpacking


def unpack_workspace(pack: WorkspacePack, target: Path) -> None:
    """Rebuild the packed workspace in `target` (which must not exist yet)."""
    if pack.kind == "url":
        assert pack.url is not None and pack.head is not None
        _git(None, "clone", "--quiet", "--no-checkout", "--", pack.url, str(target))
        _git(target, "checkout", "--quiet", "--detach", pack.head)
    elif pack.kind == "bundle":
        assert pack.head is not None
        with tempfile.TemporaryDirectory(prefix="jm-unpack-") as scratch:
            bundle = Path(scratch) / "ws.bundle"
            bundle.write_bytes(pack.data)
            _git(None, "clone", "--quiet", "--no-checkout", str(bundle), str(target))
        _git(target, "checkout", "--quiet", "--detach", pack.head)
        _git(target, "remote", "remove", "origin")  # the bundle's temp path means nothing here
        _remove(target, pack.removed)
        safe_extract(pack.overlay, target)
    else:
        target.mkdir(parents=True)
        safe_extract(pack.data, target)


def safe_extract(data: bytes, target: Path) -> None:
    """Extract a tar into `target` under the rules in the module docstring."""
    if not data:
        return
    root = Path(os.path.realpath(target))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        members = archive.getmembers()
        links = {_relative(m.name) for m in members if m.issym()}
        for member in members:
            _check_member(member, root, links)
            existing = root / member.name
            if existing.is_symlink() or (existing.exists() and not existing.is_dir()):
                existing.unlink()  # replaced, never written through
            elif existing.is_dir() and not member.isdir():
                shutil.rmtree(existing)  # a folder the task replaced with a file or a link
            member.mode &= 0o777  # no set-id or sticky bits; owned by whoever unpacks
            member.uid, member.gid, member.uname, member.gname = os.getuid(), os.getgid(), "", ""
        try:
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
                archive.extractall(root, members=members, filter="data")
            else:
                archive.extractall(root, members=members)  # checked above, member by member
        except (tarfile.TarError, OSError) as error:
            raise TravelError(f"cannot unpack a workspace archive: {error}") from None


def _check_member(member: tarfile.TarInfo, root: Path, links: set[str]) -> None:
    name = member.name
    relative = _relative(name)
    if not (member.isfile() or member.isdir() or member.issym()):
        raise TravelError(f"refused {name!r} in a workspace archive: not a file, folder or link")
    if member.issym():
        link = PurePosixPath(member.linkname)
        resolved = os.path.normpath(PurePosixPath(relative).parent / link)
        if link.is_absolute() or resolved == ".." or resolved.startswith("../"):
            raise TravelError(
                f"refused the link {name!r} -> {member.linkname!r} in a workspace archive: "
                "it leads outside the workspace"
            )
    _check_parents(root, relative, name, links)


def _relative(name: str) -> str:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\x00" in name or not path.parts:
        raise TravelError(f"refused {name!r} in a workspace archive: an absolute path or `..`")
    return path.as_posix()


def _check_parents(
    root: Path, relative: str, name: str, links: frozenset[str] | set[str] = frozenset()
) -> None:
    """No folder on the way to `relative` may be a link, on disk or among the archive's `links`
    (nothing is written through one)."""
    current = root
    parts = PurePosixPath(relative).parts
    for depth, part in enumerate(parts[:-1]):
        current = current / part
        if current.is_symlink() or "/".join(parts[: depth + 1]) in links:
            raise TravelError(
                f"refused {name!r} in a workspace archive: {part!r} on its way is a link"
            )


def _remove(root: Path, paths: tuple[str, ...]) -> None:
    for path in sorted(paths, reverse=True):  # what a folder holds before the folder
        relative = _relative(path)
        _check_parents(root, relative, path)
        target = root / relative
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)  # its files were listed too, unless untracked by the task


# --------------------------------------------------------------------------- changes


Snapshot = dict[str, tuple[str, int, str]]
"""Relative path → (kind, permission bits, content hash or link target)."""


def snapshot(folder: Path) -> Snapshot:
    """What `folder` holds now, `.git` apart."""
    found: Snapshot = {}
    for path in _walk(folder):
        if path == ".git" or path.startswith(".git/"):
            continue
        info = os.lstat(folder / path)
        if stat.S_ISLNK(info.st_mode):
            found[path] = ("link", 0, os.readlink(folder / path))
        elif stat.S_ISREG(info.st_mode):
            found[path] = ("file", info.st_mode & 0o777, _digest(folder / path))
        elif stat.S_ISDIR(info.st_mode):
            found[path] = ("dir", info.st_mode & 0o777, "")
    return found


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def collect_changes(
    folder: Path, before: Snapshot, head: str | None, max_bytes: int = MAX_WORKSPACE_BYTES
) -> WorkspaceChanges:
    """What changed in `folder` since `before` (and since commit `head`, for a repository)."""
    after = snapshot(folder)
    changed = sorted(path for path, seen in after.items() if before.get(path) != seen)
    removed = tuple(sorted(path for path in before if path not in after))
    files = _tar_of(folder, changed, "the task's changes", max_bytes)
    commits = None
    now = _git_head(folder) if head is not None else None
    if head is not None and now is not None and now != head:
        commits = b""  # HEAD went back to a commit the driver's copy holds: no bundle needed
        if not _is_ancestor(folder, now, head):
            with tempfile.TemporaryDirectory(prefix="jm-changes-") as scratch:
                bundle = Path(scratch) / "commits.bundle"
                _git(folder, "bundle", "create", "--quiet", str(bundle), "HEAD", f"^{head}")
                commits = bundle.read_bytes()
    if len(files) + len(commits or b"") > max_bytes:
        raise too_big("the task's changes", len(files) + len(commits or b""), max_bytes)
    return WorkspaceChanges(files, removed, commits, now if commits is not None else None)


def apply_changes(changes: WorkspaceChanges, folder: Path) -> None:
    """Bring `folder` (the driver's copy) to the state the worker's copy ended in."""
    if changes.commits is not None and changes.head is not None:
        if changes.commits:
            with tempfile.TemporaryDirectory(prefix="jm-apply-") as scratch:
                bundle = Path(scratch) / "commits.bundle"
                bundle.write_bytes(changes.commits)
                _git(folder, "fetch", "--quiet", str(bundle), "HEAD")
        _git(folder, "update-ref", "--no-deref", "HEAD", changes.head)
        _git(folder, "read-tree", "HEAD")  # the index follows; the files come next
    _remove(folder, changes.removed)
    safe_extract(changes.files, folder)


def _members(data: bytes) -> list[str]:
    if not data:
        return []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        return archive.getnames()


# --------------------------------------------------------------------------- git


def _git_head(folder: Path) -> str | None:
    with contextlib.suppress(TravelError):
        return _git(folder, "rev-parse", "--verify", "--quiet", "HEAD").strip() or None
    return None


def _is_ancestor(folder: Path, older: str, newer: str) -> bool:
    try:
        _git(folder, "merge-base", "--is-ancestor", older, newer)
    except TravelError:
        return False
    return True


def _git_paths(folder: Path, *args: str) -> list[str]:
    return [p for p in _git(folder, *args).split("\x00") if p]


def _git(folder: Path | None, *args: str) -> str:
    where = ("-C", str(folder)) if folder is not None else ()
    command = safe_git_command(*where, *args)
    try:
        done = subprocess.run(
            command,
            env=safe_git_env(os.environ),
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise TravelError(f"git {args[0]} failed: {error}") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TravelError(f"git {args[0]} in {folder} failed: {detail[0]}")
    return done.stdout


__all__ = [
    "MAX_WORKSPACE_BYTES",
    "Snapshot",
    "TravelError",
    "WorkspaceChanges",
    "WorkspacePack",
    "apply_changes",
    "collect_changes",
    "pack_workspace",
    "safe_extract",
    "snapshot",
    "unpack_workspace",
]
