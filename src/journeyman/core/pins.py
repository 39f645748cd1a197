"""Repository content the user approved by hash (`journeyman trust`).

A repository brings instructions and programs: rules files, skills, hooks (with
`--project-hooks`), MCP servers (with `--mcp`). Once the user has reviewed and approved what a
workspace brings, each item's content hash is recorded in the user's own config folder (never
in the repository). From then on the workspace is *pinned*: an item is used only while its
content has the approved hash; one that changed (a `git pull`, a model's edit) or appeared
since is not run or read until the user approves it again, and the run says which.

A workspace the user never pinned is used as before (the flags decide). A copy of a pinned
workspace (a batch task's, on this machine or another) is judged by the original's approvals:
its job carries them (`approvals_of`) and the worker runs it `judged_by` them.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from journeyman.core.errors import ConfigurationError

PINS_FILE = "pinned-content.json"
PINS_VERSION = 1
MAX_PINS_BYTES = 8 * 1024 * 1024


class PinVerdict(StrEnum):
    UNPINNED = "unpinned"
    """The workspace was never pinned: the item is used as the flags say."""
    APPROVED = "approved"
    CHANGED = "changed"
    NEW = "new"

    @property
    def usable(self) -> bool:
        return self in (PinVerdict.UNPINNED, PinVerdict.APPROVED)


@dataclass(frozen=True)
class RepoItem:
    """One thing a repository brings, as the user reviews it."""

    item: str
    """Stable name: "rules AGENTS.md", "skill .claude/skills/x", "hook #1", "mcp server y"."""
    digest: str
    shown: str = ""
    """What it runs or says, in one line, for the review."""


def content_digest(data: bytes | str) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def json_digest(value: Any) -> str:
    """The digest of a JSON-like value, independent of key order."""
    return content_digest(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str))


def refusal(verdict: PinVerdict) -> str:
    """Why an item is not used, for the run's warnings ("<item> skipped: <this>")."""
    if verdict is PinVerdict.CHANGED:
        return "it changed since you approved it; review it with `journeyman trust`"
    return "it is new since you approved this workspace's content; review it: `journeyman trust`"


def pins_path() -> Path:
    from journeyman.core.user_folder import user_config_folder

    return user_config_folder() / PINS_FILE


def workspace_key(workspace: Path) -> str:
    return os.path.realpath(workspace)


class Pins:
    """The user's pins, every workspace's, read from and written to one file."""

    def __init__(self, path: Path, workspaces: dict[str, dict[str, Any]]) -> None:
        self.path = path
        self._workspaces = workspaces

    @classmethod
    def load(cls, path: Path | None = None) -> Pins:
        """The pins on disk (none when the file is missing); a damaged file is a
        `ConfigurationError` naming it: pinned content is never used unchecked."""
        path = path or pins_path()
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path, {})
        except OSError as exc:
            raise ConfigurationError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        try:
            data = json.loads(raw[:MAX_PINS_BYTES])
            if data.get("version") != PINS_VERSION or not isinstance(data["workspaces"], dict):
                raise ValueError(f"version {data.get('version')!r}")
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            raise ConfigurationError(
                f"{path} (the content you approved with `journeyman trust`) is damaged ({exc}); "
                "delete it and approve again"
            ) from None
        return cls(path, data["workspaces"])

    def pinned(self, workspace: Path) -> bool:
        return workspace_key(workspace) in self._workspaces

    def approved(self, workspace: Path) -> dict[str, str]:
        """Item → approved digest."""
        entry = self._workspaces.get(workspace_key(workspace)) or {}
        items = entry.get("items")
        return dict(items) if isinstance(items, dict) else {}

    def approved_at(self, workspace: Path) -> float | None:
        entry = self._workspaces.get(workspace_key(workspace)) or {}
        when = entry.get("approved_at")
        return float(when) if isinstance(when, int | float) else None

    def verdict(self, workspace: Path, item: str, digest: str) -> PinVerdict:
        if not self.pinned(workspace):
            return PinVerdict.UNPINNED
        return verdict_against(self.approved(workspace), item, digest)

    def approve(self, workspace: Path, items: Iterable[RepoItem]) -> None:
        """Pin `workspace` to exactly `items` (anything approved before and gone is dropped)."""
        self._workspaces[workspace_key(workspace)] = {
            "approved_at": time.time(),
            "items": {item.item: item.digest for item in items},
        }
        self._save()

    def revoke(self, workspace: Path) -> bool:
        """Unpin `workspace`; whether it was pinned."""
        gone = self._workspaces.pop(workspace_key(workspace), None) is not None
        if gone:
            self._save()
        return gone

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": PINS_VERSION, "workspaces": self._workspaces}, indent=1)
        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".pins-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


def verdict_against(approved: Mapping[str, str], item: str, digest: str) -> PinVerdict:
    """The verdict on `item` (its content hashing to `digest`) in a workspace pinned to
    `approved` (item → digest)."""
    known = approved.get(item)
    if known is None:
        return PinVerdict.NEW
    return PinVerdict.APPROVED if known == digest else PinVerdict.CHANGED


def approvals_of(folder: Path, pins: Pins | None = None) -> dict[str, str] | None:
    """What the user approved in `folder` (item → digest) when it is pinned, else None.

    Raises `ConfigurationError` when the pins file is damaged."""
    pins = pins or Pins.load()
    return pins.approved(folder) if pins.pinned(folder) else None


def pinned_sources(folders: Iterable[Path]) -> dict[str, dict[str, str]]:
    """The approvals of those of `folders` the user pinned, by real path (`workspace_key`),
    the pins file read once. Raises `ConfigurationError` when it is damaged."""
    pins = Pins.load()
    found: dict[str, dict[str, str]] = {}
    for folder in folders:
        approved = approvals_of(folder, pins)
        if approved is not None:
            found[workspace_key(folder)] = approved
    return found


_JUDGED_BY: ContextVar[Mapping[str, str] | None] = ContextVar("judged_by", default=None)


@contextmanager
def judged_by(approved: Mapping[str, str] | None) -> Iterator[None]:
    """Within the block (and the asyncio tasks and `to_thread` calls it starts), every
    workspace is judged as pinned to `approved`: the approvals of the pinned workspace it is a
    copy of. None: each workspace is judged by its own pins, as usual."""
    if approved is None:
        yield
        return
    token = _JUDGED_BY.set(dict(approved))
    try:
        yield
    finally:
        _JUDGED_BY.reset(token)


class PinCheck:
    """The verdicts of one run on one workspace: the pins file read once, lazily (or the
    approvals of the workspace it was copied from, inside `judged_by`)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._copied_from = _JUDGED_BY.get()
        self._pins: Pins | None = None

    def verdict(self, item: str, digest: str) -> PinVerdict:
        if self._copied_from is not None:
            return verdict_against(self._copied_from, item, digest)
        if self._pins is None:
            self._pins = Pins.load()
        return self._pins.verdict(self.workspace, item, digest)
