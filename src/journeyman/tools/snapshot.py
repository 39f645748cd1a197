"""What a command changed in the workspace, for the undo journal.

The file tools report their writes themselves; a shell command can change any file (`sed -i`,
`rm`, a code generator). Before and after each command the workspace is recorded in a shadow
git repository that lives outside it (in the user's cache dir, one per workspace, one index per
session): the first snapshot hashes every file, later ones only those whose size or mtime
moved. Comparing the two trees gives the files the command created, modified or deleted, with
their exact text before and after, which go to the journal like any file tool's write.

The workspace's own `.git`, if any, is never touched, and its `.gitignore` rules apply, so
build outputs, virtual environments and (usually) `.env` files are left out; the shadow
repository is readable by its owner only, since it holds copies of the workspace's files.
Binary files and files over `MAX_FILE_BYTES` are not journaled (`CommandChanges.skipped` says
which). Without a `git` binary nothing is recorded, and the command's result says so.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from platformdirs import user_cache_dir

MAX_FILE_BYTES = 1_000_000
"""Larger files changed by a command are listed as skipped, not journaled."""
GIT_TIMEOUT_S = 60.0
"""A snapshot that takes longer than this is abandoned (the command still runs)."""
SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"
CACHE_ENV = "JOURNEYMAN_CACHE_DIR"
"""Moves the cache folder that holds the shadow repositories."""


@dataclass(frozen=True)
class FileVersionChange:
    path: str
    """Workspace-relative, with forward slashes."""
    before: str | None
    """Text before the command; None when the command created the file."""
    after: str | None
    """Text after the command; None when the command deleted the file."""


@dataclass
class CommandChanges:
    changes: list[FileVersionChange] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Changed files that were not journaled (binary or too large): undo cannot restore them."""


class SnapshotUnavailable(Exception):
    """No snapshot could be taken (no git binary, or git failed); the reason is the message."""


class WorkspaceSnapshots:
    """Snapshots of one workspace for one session, in a shadow repository outside it."""

    def __init__(self, workspace: Path, session_id: str, cache_dir: Path | None = None) -> None:
        self.workspace = workspace
        root = cache_dir or Path(os.environ.get(CACHE_ENV) or user_cache_dir("journeyman"))
        key = hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
        self.git_dir = root / "shadow" / key
        self.index = self.git_dir / f"index-{session_id or 'default'}"

    def take(self) -> str:
        """Record the workspace as it is now; returns the id of the recorded tree."""
        self._ensure_repository()
        self._git("add", "--all", "--", ".")
        return self._git("write-tree").strip()

    def compare(self, before: str, after: str) -> CommandChanges:
        """The text files that differ between two trees of `take`."""
        found = CommandChanges()
        if before == after:
            return found
        listing = self._git("diff-tree", "-r", "-z", "--no-renames", before, after)
        fields = listing.split("\0")
        # each entry: ":<mode> <mode> <blob> <blob> <status>" then the path
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            if not meta.startswith(":"):
                continue
            old_mode, new_mode, old_blob, new_blob, status = meta[1:].split(" ")
            if {old_mode, new_mode} & {SYMLINK_MODE, GITLINK_MODE}:
                found.skipped.append(path)  # a link or a nested repository, not a text file
                continue
            old = None if status == "A" else self._text(old_blob)
            new = None if status == "D" else self._text(new_blob)
            if (status != "A" and old is None) or (status != "D" and new is None):
                found.skipped.append(path)
                continue
            found.changes.append(FileVersionChange(path, old, new))
        return found

    def _text(self, blob: str) -> str | None:
        """The blob's content as text; None when it is binary or too large."""
        size = int(self._git("cat-file", "-s", blob).strip())
        if size > MAX_FILE_BYTES:
            return None
        data = self._git_bytes("cat-file", "blob", blob)
        if b"\0" in data:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def _ensure_repository(self) -> None:
        if not (self.git_dir / "HEAD").is_file():
            if shutil.which("git") is None:
                raise SnapshotUnavailable("git is not installed")
            self.git_dir.mkdir(parents=True, exist_ok=True)
            self.git_dir.chmod(0o700)  # it holds copies of the workspace's files: owner only
            self._git("init", "--quiet", "--bare", str(self.git_dir), bare=True)
        if not self.index.exists():
            # start from another session's index: git then re-reads only the files whose size
            # or mtime differ from what it recorded, instead of hashing the whole workspace
            others = sorted(self.git_dir.glob("index-*"), key=lambda p: p.stat().st_mtime)
            if others:
                shutil.copyfile(others[-1], self.index)

    def _git(self, *args: str, bare: bool = False) -> str:
        return self._git_bytes(*args, bare=bare).decode("utf-8", errors="surrogateescape")

    def _git_bytes(self, *args: str, bare: bool = False) -> bytes:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.git_dir),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_INDEX_FILE": str(self.index),
            "LC_ALL": "C",
        }
        where = [] if bare else [f"--git-dir={self.git_dir}", f"--work-tree={self.workspace}"]
        settings = ["-c", "core.autocrlf=false", "-c", "core.fsmonitor=false"]
        try:
            proc = subprocess.run(
                ["git", *settings, *where, *args],
                cwd=self.workspace,
                env=env,
                capture_output=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except FileNotFoundError as error:
            raise SnapshotUnavailable("git is not installed") from error
        except subprocess.TimeoutExpired as error:
            raise SnapshotUnavailable(f"git {args[0]} took over {GIT_TIMEOUT_S:g} s") from error
        if proc.returncode != 0:
            detail = proc.stderr.decode(errors="replace").strip().splitlines()
            raise SnapshotUnavailable(f"git {args[0]} failed: {detail[-1] if detail else '?'}")
        return proc.stdout
