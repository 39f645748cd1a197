"""What a command changed in the workspace, for the undo journal.

The file tools report their writes themselves; a shell command can change any file (`sed -i`,
`rm`, a code generator). Before each command the workspace is recorded in the index of a shadow
git repository that lives outside it (in the user's cache dir, one per workspace, one index per
session): the first record hashes every file, later ones only those whose size or mtime moved.
After the command, the files that differ from that index (modified, deleted, or new and not
ignored) are the ones it changed; their text before comes from the index, their text after
from disk, and both go to the journal like any file tool's write.

The workspace's own `.git`, if any, is never touched, and its `.gitignore` rules apply, so
build outputs and (usually) `.env` files are left out, as are `GENERATED_DIRS`; the shadow
repository is readable by its owner only, since it holds copies of the workspace's files.
Binary files and files over `MAX_FILE_BYTES` are not journaled (`CommandChanges.skipped` says
which). Files over that cap are never stored in the shadow repository either: `record()` notes
their size and modification time instead, and `changes()` names them as not journaled when
those moved. Without a `git` binary nothing is recorded, and the command's result says so.

A command killed with the agent (kill -9, an out-of-memory kill) would lose its changes from
the journal, since they are journaled after it ends. So `begin()` leaves a marker next to the
session's index (which already holds the before-state, in a file that outlives the process)
and `end()` removes it once the changes are journaled. `reconcile_interrupted()` journals
what a marked, unfinished command changed: a resumed session calls it before its first step,
and the next command of the session does it too, should the resume not have.

Scanning a large workspace twice per command costs tens of milliseconds, most often to learn
that nothing changed (`echo`, `pytest`, `git log`). So a `ChangeWatch` (tools/watch.py, Linux
inotify) is armed just before each full record: while it has seen nothing, `record()` keeps the
index as it is (it still holds the workspace) and `changes()` answers "nothing" without running
git. Anything it sees (a command's write, a file tool's, an editor's, a background process's)
makes both scan as above; where it cannot watch, they always scan. `changes()` arms it again
before its own scan and then brings the index up to date with the text files it found changed,
so that the after-state of one command is the before-state of the next unless something moves
in between (binary files and files over the cap leave that to a full `record()`).

`forget_snapshots()` removes a session's index, and the whole shadow repository of the
workspace with its last session.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from journeyman.core.safe_git import safe_git_command, safe_git_env
from journeyman.tools.context import GENERATED_DIRS, FileChangeIntent
from journeyman.tools.watch import ChangeWatch

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


class _Skip:
    """Marks a file that is there but not journaled (binary, too large, a link)."""


SKIP = _Skip()


def _decode(data: bytes) -> str | _Skip:
    if b"\0" in data:
        return SKIP
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return SKIP


class SnapshotUnavailable(Exception):
    """No snapshot could be taken (no git binary, or git failed); the reason is the message."""


def shadow_repository(workspace: Path, cache_dir: Path | None = None) -> Path:
    """Where the shadow repository of `workspace` lives (whether or not it exists)."""
    from platformdirs import user_cache_dir

    root = cache_dir or Path(os.environ.get(CACHE_ENV) or user_cache_dir("journeyman"))
    key = hashlib.sha256(os.path.realpath(workspace).encode()).hexdigest()[:16]
    return root / "shadow" / key


class WorkspaceSnapshots:
    """Snapshots of one workspace for one session, in a shadow repository outside it.

    `record()` before a command stores the workspace in the shadow index (one git call);
    `changes()` after it lists what differs from that index (two git calls, a third to read
    the old text when something changed) and reads the new text from disk.
    """

    def __init__(
        self,
        workspace: Path,
        session_id: str,
        cache_dir: Path | None = None,
        *,
        watch: bool = True,
    ) -> None:
        self.workspace = workspace
        self.git_dir = shadow_repository(workspace, cache_dir)
        session = session_id or "default"
        self.index = self.git_dir / f"index-{session}"
        self.large = self.git_dir / f"large-{session}.json"
        """Files over the cap at the last record: path -> [size, mtime in ns]."""
        self.excludes = self.git_dir / f"exclude-{session}"
        """The same files as ignore patterns, so that git never stores them."""
        self.marker = self.git_dir / f"running-{session}.json"
        """Present while a command runs (`begin` .. `end`)."""
        self._watch = ChangeWatch(workspace) if watch else None
        self._unchanged_since_record = False
        """The index holds the workspace as it is: the watch has seen nothing since the last
        full `record()` of this object began."""
        self._index_stamp: tuple[int, int, int] | None = None
        """The index file as that record left it (None: absent, as git leaves an empty one)."""
        self._recorded_at_ns: int | None = None
        """When the last record (or the scan that became one) began, in ns since the epoch."""

    def unchanged(self) -> bool:
        """Whether `record()` and `changes()` would find nothing to do (no scan, no git)."""
        return self._still_recorded()

    def _still_recorded(self) -> bool:
        return (
            self._unchanged_since_record
            and self._watch is not None
            and not self._watch.changed()
            and _stamp(self.index) == self._index_stamp
        )

    def record(self) -> None:
        """Store the workspace as it is now in the shadow index (files over the cap aside)."""
        if self._still_recorded():
            return
        self._unchanged_since_record = False
        self._ensure_repository()
        # armed before the scan, so that a change made while git reads the files counts
        watching = self._watch is not None and self._watch.arm()
        listed = self._git(
            "ls-files", "-z", "--cached", "--others", "--exclude-standard", own=False
        )
        large = _large_files(self.workspace, [p for p in listed.split("\0") if p])
        _write_durably(self.excludes, "".join(f"{_ignore_pattern(p)}\n" for p in large).encode())
        _write_durably(self.large, json.dumps(large).encode())
        if large:  # tracked while small, large now: out of the index, so git does not store it
            paths = "".join(f"{p}\0" for p in large).encode("utf-8", "surrogateescape")
            self._git_bytes("update-index", "-z", "--force-remove", "--stdin", stdin=paths)
        last_written = _stamp(self.index)
        self._recorded_at_ns = time.time_ns()
        self._git("add", "--all", "--", ".")
        if last_written is not None:
            self._rehash_recent(last_written[2])
        self._index_stamp = _stamp(self.index)
        self._unchanged_since_record = watching

    def begin(self, command: str) -> None:
        """Mark a command as running: its changes are not journaled yet."""
        marker = {"command": command, "started": time.time(), "pid": os.getpid()}
        _write_durably(self.marker, json.dumps(marker).encode())

    def end(self) -> None:
        """The command's changes are journaled: remove the marker."""
        self.marker.unlink(missing_ok=True)

    def interrupted(self) -> dict[str, object] | None:
        """The marker of a command that started and never ended, if any."""
        try:
            found = json.loads(self.marker.read_text())
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else {}

    def changes(self) -> CommandChanges:
        """The text files that differ from the last `record()`: created, modified, deleted."""
        found = CommandChanges()
        if self._still_recorded():
            return found
        self._unchanged_since_record = False
        # armed before the scan: if nothing moves from here on, the index brought up to date
        # with what this scan finds is the next command's before-state (no full record then)
        watching = self._watch is not None and self._watch.arm()
        scanned_at_ns = time.time_ns()
        fields = self._git("diff-files", "-z", "--raw", "--no-renames").split("\0")
        old_blobs: dict[str, str] = {}
        # each entry: ":<old mode> <new mode> <old blob> <new blob> <status>" then the path
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            if not meta.startswith(":"):
                continue
            old_mode, _, old_blob, _, _ = meta[1:].split(" ")
            if old_mode in (SYMLINK_MODE, GITLINK_MODE):
                found.skipped.append(path)  # a link or a nested repository, not a text file
                continue
            old_blobs[path] = old_blob
        old_blobs.update(self._touched_since_record(old_blobs))
        created = [
            p
            for p in self._git("ls-files", "-z", "--others", "--exclude-standard").split("\0")
            if p
        ]
        old_texts = self._blob_texts(list(old_blobs.values()))
        for path, blob in old_blobs.items():
            before = old_texts.get(blob)
            after = self._disk_text(path)
            if before is None or isinstance(after, _Skip):
                found.skipped.append(path)
            elif before != after:
                found.changes.append(FileVersionChange(path, before, after))
        for path in created:
            after = self._disk_text(path)
            if isinstance(after, _Skip):
                found.skipped.append(path)
            elif after is not None:
                found.changes.append(FileVersionChange(path, None, after))
        found.skipped += self._large_changed()
        found.changes.sort(key=lambda c: c.path)
        found.skipped = sorted(set(found.skipped))
        if watching and not found.skipped:
            self._keep_as_recorded([*old_blobs, *created])
            self._recorded_at_ns = scanned_at_ns
        return found

    def _rehash_recent(self, since_ns: int) -> None:
        """Hash again the files changed since the index was last written: `git add` trusts
        stat data compared by the second, which misses a same-size rewrite with its mtime put
        back within that second (racy git)."""
        since = since_ns - 1_000_000_000  # the filesystem clock's coarseness
        recent = []
        for path in self._git("ls-files", "-z", "--cached").split("\0"):
            if not path:
                continue
            try:
                info = os.lstat(self.workspace / path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_ctime_ns >= since:
                recent.append(path)
        if recent:
            listed = "".join(f"{p}\0" for p in recent).encode("utf-8", "surrogateescape")
            self._git_bytes("update-index", "-z", "--add", "--stdin", stdin=listed)

    def _touched_since_record(self, known: dict[str, str]) -> dict[str, str]:
        """Recorded files whose status changed at or after the last record began, with their
        recorded blob: git compares stat data at a granularity that misses a same-size rewrite
        whose mtime was put back within the same second (racy git), so their content is
        compared instead. Files already reported by git are left out."""
        if self._recorded_at_ns is None:
            return {}
        since = self._recorded_at_ns - 1_000_000_000  # the filesystem clock's coarseness
        touched: dict[str, str] = {}
        for entry in self._git("ls-files", "-z", "--stage").split("\0"):
            meta, _, path = entry.partition("\t")
            if not path or path in known:
                continue
            mode, blob, _stage = meta.split(" ")
            if mode in (SYMLINK_MODE, GITLINK_MODE):
                continue
            try:
                changed_ns = os.lstat(self.workspace / path).st_ctime_ns
            except OSError:
                continue  # gone: git's own report covers deletions
            if changed_ns >= since:
                touched[path] = blob
        return touched

    def _keep_as_recorded(self, paths: list[str]) -> None:
        """Bring the index up to date for `paths` (all that differed from it), as a full
        `record()` would; files over the cap or not text never come here (they need one)."""
        if paths:
            listed = "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape")
            try:
                self._git_bytes("update-index", "-z", "--add", "--remove", "--stdin", stdin=listed)
            except SnapshotUnavailable:
                return  # the next record() scans
        self._index_stamp = _stamp(self.index)
        self._unchanged_since_record = True

    def _large_changed(self) -> list[str]:
        """Files over the cap at the last record whose size or mtime moved (or that are gone)."""
        try:
            large = json.loads(self.large.read_text())
        except (OSError, ValueError):
            return []
        moved = []
        for path, (size, mtime) in large.items():
            try:
                info = (self.workspace / path).lstat()
            except OSError:
                moved.append(path)
                continue
            if (info.st_size, info.st_mtime_ns) != (size, mtime):
                moved.append(path)
        return moved

    def _disk_text(self, path: str) -> str | _Skip | None:
        """The file's text now; None when it is gone, SKIP when it is not a small text file."""
        full = self.workspace / path
        if full.is_symlink():
            return SKIP
        try:
            if full.stat().st_size > MAX_FILE_BYTES:
                return SKIP
            data = full.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            return SKIP
        return _decode(data)

    def _blob_texts(self, blobs: list[str]) -> dict[str, str | None]:
        """Text of each blob (None when binary or too large), read with one git call."""
        if not blobs:
            return {}
        out = self._git_bytes("cat-file", "--batch", stdin="\n".join(blobs) + "\n")
        texts: dict[str, str | None] = {}
        position = 0
        for blob in blobs:
            header_end = out.index(b"\n", position)
            header = out[position:header_end].decode().split(" ")
            position = header_end + 1
            if len(header) != 3:  # "<blob> missing"
                texts[blob] = None
                continue
            size = int(header[2])
            decoded = _decode(out[position : position + size]) if size <= MAX_FILE_BYTES else SKIP
            position += size + 1
            texts[blob] = None if isinstance(decoded, _Skip) else decoded
        return texts

    def _ensure_repository(self) -> None:
        if not (self.git_dir / "HEAD").is_file():
            if shutil.which("git") is None:
                raise SnapshotUnavailable("git is not installed")
            self.git_dir.mkdir(parents=True, exist_ok=True)
            self.git_dir.chmod(0o700)  # it holds copies of the workspace's files: owner only
            self._git("init", "--quiet", "--bare", str(self.git_dir), bare=True)
            exclude = self.git_dir / "info" / "exclude"
            exclude.parent.mkdir(exist_ok=True)
            exclude.write_text("".join(f"{pattern}\n" for pattern in GENERATED_DIRS))
        if not self.index.exists():
            # start from another session's index: git then re-reads only the files whose size
            # or mtime differ from what it recorded, instead of hashing the whole workspace
            others = sorted(self.git_dir.glob("index-*"), key=lambda p: p.stat().st_mtime)
            if others:
                # with its times: git and `_rehash_recent` judge the stat data it holds against
                # when it was written, and a fresh time would make racily clean entries look safe
                shutil.copy2(others[-1], self.index)
            # once a session: the repository only matters while a command runs (the journal
            # keeps the texts), so git may pack and prune old objects as it sees fit
            with contextlib.suppress(SnapshotUnavailable):
                self._git("gc", "--auto", "--quiet")

    def _git(self, *args: str, bare: bool = False, own: bool = True) -> str:
        output = self._git_bytes(*args, bare=bare, own=own)
        return output.decode("utf-8", errors="surrogateescape")

    def _git_bytes(
        self, *args: str, bare: bool = False, stdin: str | bytes | None = None, own: bool = True
    ) -> bytes:
        """Run git on the shadow repository; `own` applies the session's large-file excludes."""
        env = safe_git_env(
            {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(self.git_dir),
                "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_INDEX_FILE": str(self.index),
                "LC_ALL": "C",
            }
        )
        where = [] if bare else [f"--git-dir={self.git_dir}", f"--work-tree={self.workspace}"]
        settings = ["-c", "core.autocrlf=false"]
        settings += ["-c", f"core.excludesFile={self.excludes if own else os.devnull}"]
        try:
            proc = subprocess.run(
                safe_git_command(*settings, *where, *args),
                cwd=self.workspace,
                env=env,
                capture_output=True,
                input=stdin.encode() if isinstance(stdin, str) else stdin,
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


def _large_files(workspace: Path, paths: list[str]) -> dict[str, list[int]]:
    """Of `paths`, the regular files over MAX_FILE_BYTES: path -> [size, mtime in ns]."""
    large = {}
    for path in paths:
        try:
            info = (workspace / path).lstat()
        except OSError:
            continue
        if info.st_size > MAX_FILE_BYTES and not (workspace / path).is_symlink():
            large[path] = [info.st_size, info.st_mtime_ns]
    return large


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """A file's inode, size and mtime; None when it does not exist."""
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _ignore_pattern(path: str) -> str:
    """A gitignore line matching exactly `path` (relative to the workspace root)."""
    escaped = "".join("\\" + ch if ch in "\\*?[]!# " else ch for ch in path)
    return "/" + escaped


def _write_durably(path: Path, data: bytes) -> None:
    """Write `path` whole: a process killed meanwhile leaves the old or the new content.

    Not flushed to the disk (an fsync costs more than the rest of a snapshot): this outlives
    the agent's process, as git's index does, not a power cut.
    """
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    partial = path.with_name(path.name + ".tmp")
    partial.write_bytes(data)
    os.replace(partial, path)


def reconcile_interrupted(
    workspace: Path,
    session_id: str,
    journal: Callable[[FileChangeIntent], None],
    *,
    tool: str = "run_command",
    cache_dir: Path | None = None,
) -> CommandChanges | None:
    """Journal what a command of the session changed before the agent died mid-command.

    When the session's marker says a command started and never ended, the files that differ
    from the before-state recorded for it are passed to `journal` (as that tool's changes) and
    the marker is removed. Returns them, or None when no command was interrupted (or no
    snapshot can be read: then the marker stays for a later try).
    """
    return journal_interrupted(WorkspaceSnapshots(workspace, session_id, cache_dir), journal, tool)


def interrupted_changes(snapshots: WorkspaceSnapshots) -> CommandChanges | None:
    """What a command of the session changed before the agent died in it, or None when no
    command was interrupted (or no snapshot can be read). Nothing is journaled and the marker
    stays: the caller journals the changes, then calls `snapshots.end()`. This part may run in
    a worker thread; the journaling must run where the session store was opened."""
    if snapshots.interrupted() is None:
        return None
    try:
        return snapshots.changes()
    except SnapshotUnavailable:
        return None


def journal_interrupted(
    snapshots: WorkspaceSnapshots, journal: Callable[[FileChangeIntent], None], tool: str
) -> CommandChanges | None:
    """`reconcile_interrupted` for snapshots already at hand."""
    found = interrupted_changes(snapshots)
    if found is None:
        return None
    for change in found.changes:
        journal(FileChangeIntent(change.path, change.before, change.after, tool))
    snapshots.end()
    return found


def forget_snapshots(
    workspace: Path, session_id: str, *, last_session: bool, cache_dir: Path | None = None
) -> None:
    """Remove a deleted session's snapshot data; with its workspace's last session, remove
    the whole shadow repository (it holds copies of the workspace's files)."""
    snapshots = WorkspaceSnapshots(workspace, session_id, cache_dir)
    if last_session:
        shutil.rmtree(snapshots.git_dir, ignore_errors=True)
        return
    for path in (snapshots.index, snapshots.large, snapshots.excludes, snapshots.marker):
        path.unlink(missing_ok=True)
