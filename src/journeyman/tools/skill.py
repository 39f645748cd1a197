"""skill: a skill's instructions and the list of its files, on the model's request.

The system prompt names each skill with its description only (`context.skills`); this tool
returns one skill's instructions (its SKILL.md after the front matter) and lists the files
beside it, with their sizes. It reads and runs nothing else: a skill in the workspace lists its
files by workspace path, to be read with read_file (so the user's read rules apply) and run
with run_command (sandbox, approvals, deny rules); a skill from the user's own folder, which
commands cannot see, lists its files by their path in the skill, and ``file`` returns the text
of one of them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import Field

from journeyman.core.display import printable
from journeyman.core.messages import ToolResult
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext, echo
from journeyman.tools.host_read import RefusedFile, read_host_file

SKILL_TOOL = "skill"
SKILL_FILE = "SKILL.md"
MAX_LISTED_FILES = 100
"""Most files of a skill listed."""
MAX_LISTED_DEPTH = 4
"""Folders deeper than this under a skill's folder are not listed."""
MAX_EXAMINED_FILES = 10 * MAX_LISTED_FILES
"""Most entries looked at while listing (most may be left out: links, files read rules cover)."""
MAX_SKILL_FILE_BYTES = 256 * 1024
"""Largest file of a user's skill that `file` returns."""


class SkillEntry(Protocol):
    """What the tool needs of a skill (`context.skills.Skill` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def body(self) -> str: ...

    @property
    def folder(self) -> Path: ...

    @property
    def display(self) -> str: ...

    @property
    def workspace_path(self) -> str | None: ...


class SkillArgs(ToolArgs):
    name: str = Field(description="The skill's name, as the Skills section lists it.")
    """The skill's name, as the system prompt's Skills section lists it."""
    file: str | None = Field(
        default=None,
        description="Only for a skill outside the workspace: one of its files, by the path "
        "its listing gives, to read instead of the instructions.",
    )
    """A file of a skill outside the workspace to return instead of its instructions."""


class SkillTool(BaseTool):
    name = SKILL_TOOL
    description = (
        "Read the instructions of one of the skills listed in the system prompt, with the list "
        "of the files that come with it. Reading a skill runs nothing."
    )
    args_model = SkillArgs
    kind = ToolKind.READ
    parallel_safe = True
    permission_arg = "name"

    def __init__(self, skills: Sequence[SkillEntry]) -> None:
        self.skills = {skill.name: skill for skill in skills}

    async def execute(self, args: SkillArgs, ctx: ToolContext) -> ToolResult:
        skill = self.skills.get(args.name)
        if skill is None:
            known = ", ".join(sorted(self.skills)) or "none"
            return fail(
                self.name,
                f"{self.name}: there is no skill named {echo(args.name)}; the skills are: {known}",
            )
        if args.file is not None:
            return await asyncio.to_thread(self._file, skill, args.file)
        if skill.workspace_path is not None and ctx.unreadable is not None:
            rule = ctx.unreadable(f"{skill.workspace_path}/{SKILL_FILE}")
            if rule is not None:
                return fail(
                    self.name,
                    f"{self.name}: the deny rule `{rule}` keeps {skill.display} from you",
                )
        where = skill.workspace_path
        listing = await asyncio.to_thread(
            list_skill_files, skill.folder, ctx.unreadable if where else None, where or ""
        )
        text = _reply(skill, listing, can_run=ctx.offers("run_command"))
        return ok(self.name, text, skill=skill.name, files=len(listing.files))

    def _file(self, skill: SkillEntry, relative: str) -> ToolResult:
        if skill.workspace_path is not None:
            return fail(
                self.name,
                f"{self.name}: {skill.name} is in the workspace; read its files with "
                f"read_file (e.g. {skill.workspace_path}/{relative.lstrip('/')})",
            )
        problem = _outside(relative)
        if problem:
            return fail(self.name, f"{self.name}: {echo(relative)} {problem}")
        path = skill.folder / relative
        try:
            raw = read_host_file(path, limit=MAX_SKILL_FILE_BYTES, inside=[skill.folder])
        except FileNotFoundError:
            return fail(
                self.name,
                f"{self.name}: {skill.name} has no file {echo(relative)}; call "
                f"{self.name} with name={skill.name!r} alone to list its files",
            )
        except RefusedFile as refused:
            return fail(self.name, f"{self.name}: {echo(relative)} is not read: {refused.reason}")
        except OSError as exc:
            return fail(self.name, f"{self.name}: {echo(relative)}: {exc.strerror or exc}")
        if b"\0" in raw[:8192]:
            return fail(self.name, f"{self.name}: {echo(relative)} is a binary file")
        return ok(self.name, raw.decode("utf-8", errors="replace"), skill=skill.name)


def _outside(relative: str) -> str:
    """Why `relative` cannot name a file of a skill ("" when it can)."""
    if not relative or "\0" in relative:
        return "is not a path"
    if os.path.isabs(relative) or ".." in Path(relative).parts:
        return "is not a path inside the skill's folder"
    return ""


@dataclass
class SkillFiles:
    """The files of a skill's folder (SKILL.md aside), by their path in the folder."""

    files: list[tuple[str, int]] = field(default_factory=list)
    """(path relative to the skill's folder, bytes), in path order."""
    more: bool = False
    """More files exist than were listed."""
    left_out: int = 0
    """Files not listed: links out of the skill's folder, or covered by a read rule."""


def list_skill_files(
    folder: Path, unreadable: Callable[[str], str | None] | None = None, workspace: str = ""
) -> SkillFiles:
    """Up to `MAX_LISTED_FILES` files under `folder`, links that lead out of it left out, and
    (for a skill in the workspace) those `unreadable` keeps from the model."""
    listing = SkillFiles()
    root = Path(os.path.realpath(folder))
    examined = 0
    for current, dirs, names in os.walk(root):
        here = Path(current)
        depth = len(here.relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if depth < MAX_LISTED_DEPTH and d != ".git")
        for name in sorted(names):
            examined += 1
            if examined > MAX_EXAMINED_FILES:
                listing.more = True
                return listing
            path = here / name
            rel = path.relative_to(root).as_posix()
            if rel == SKILL_FILE:
                continue
            real = Path(os.path.realpath(path))
            if not real.is_relative_to(root) or not real.is_file():
                listing.left_out += 1
                continue
            if unreadable is not None and unreadable(_joined(workspace, rel)):
                listing.left_out += 1
                continue
            if len(listing.files) >= MAX_LISTED_FILES:
                listing.more = True
                return listing
            try:
                size = real.stat().st_size
            except OSError:
                continue
            listing.files.append((rel, size))
    return listing


def _joined(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


def _reply(skill: SkillEntry, listing: SkillFiles, *, can_run: bool) -> str:
    where = skill.workspace_path
    head = f"Skill {skill.name} ({skill.display}/{SKILL_FILE}):\n\n{skill.body or '(no text)'}"
    if not listing.files:
        return f"{head}\n\n[no other files come with this skill]"
    if where is not None:
        running = (
            ", and run a script with run_command only as the instructions say"
            if can_run
            else "; no command can be run here"
        )
        intro = (
            f"Files of this skill, by workspace path (paths in its instructions are relative "
            f"to {printable(where)}; read them with read_file{running}):"
        )
    else:
        intro = (
            "Files of this skill, which lives outside the workspace (read one with "
            f"skill(name={skill.name!r}, file=PATH); commands cannot see them):"
        )
    lines = [
        f"  {printable(_joined(where or '', rel))} ({size:,} bytes)" for rel, size in listing.files
    ]
    notes = []
    if listing.more:
        notes.append(f"[only the first {MAX_LISTED_FILES} files are listed]")
    if listing.left_out:
        notes.append(
            f"[{listing.left_out} file(s) not listed: links out of the folder or files "
            "you may not read]"
        )
    return "\n".join([head, "", intro, *lines, *notes])
