"""Skills: folders holding a SKILL.md that teaches the model one kind of task (the Agent Skills
format), found in the user's folder and in the workspace.

A skill is a folder with a ``SKILL.md``: front matter between two ``---`` lines holding at least
``name`` and ``description``, then the instructions in Markdown; other files (scripts, references,
templates) may sit beside it. Only each skill's name and description go into the system prompt
(`render_skills_section`); the model reads the instructions when it needs them, with the `skill`
tool (`tools.skill`), so many installed skills cost little of every prompt.

Where skills come from, in this order:

1. ``<user config dir>/skills/<skill>/SKILL.md``: the user's own skills;
2. ``<workspace>/.journeyman/skills/``, ``.claude/skills/`` and ``.agents/skills/``: the
   repository's, in the folders this agent and others use, so a repository written for another
   agent works here.

When two skills have the same name, the first found is kept and the other is skipped with a
warning: a repository never shadows a skill of the user's own, and ``.journeyman/skills/`` wins
over the other agents' folders.

The rules of the format followed: a name is 1 to 64 lowercase letters, digits and single
hyphens, not starting or ending with one (so a name never holds a path character); a
description is non-empty, at most 1,024 characters. The front matter is read as the small part
of YAML such files use (``key: value``, quoted values, ``|`` and ``>`` blocks, nested tables,
which are ignored); other keys (``license``, ``compatibility``, ``metadata``, ``allowed-tools``)
are accepted and not used: a skill never grants a tool or a permission. A name that differs
from its folder's is accepted with a warning.

What is read, and what is refused (each refusal a warning naming the skill and why; nothing here
raises): a repository's skills folder, skill folder or SKILL.md is read only when it resolves
inside the workspace (a link out is refused); the user's folder may link anywhere (the user
chose it). A SKILL.md must be a regular file of at most `MAX_SKILL_BYTES`, UTF-8 text, with
well-formed front matter. At most `MAX_SKILLS` skills are loaded and at most
`MAX_FOLDER_ENTRIES` entries of each skills folder are looked at; what is left out is named.
Nothing is read until `skills` or `warnings` is first used.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import islice
from pathlib import Path

from journeyman.core.display import printable
from journeyman.core.pins import PinCheck, content_digest, refusal
from journeyman.tools.host_read import RefusedFile, read_host_file

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
WORKSPACE_SKILL_FOLDERS = (".journeyman/skills", ".claude/skills", ".agents/skills")
"""The repository's skills folders, relative to the workspace, the one that wins a name first."""
MAX_SKILL_BYTES = 64 * 1024
"""A SKILL.md larger than this is skipped (with a warning)."""
MAX_SKILLS = 200
"""Most skills loaded; the rest are skipped with a warning naming them."""
MAX_FOLDER_ENTRIES = 1000
"""Most entries of one skills folder looked at (a folder of a million entries is not listed)."""
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_WARNINGS = 20
"""Most warnings listed one by one; the rest are counted in one more line."""
SKILLS_PROMPT_CHARS = 6000
"""Most characters of the skill lines in the system prompt: past it, the longest descriptions
are cut (at a word) so that every skill keeps its line."""

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*)|[ \t]*)$")
_NESTED_START = re.compile(r"(?:-(?:\s|$)|[^\s:#][^:#]*:(?:\s|$))")


class SkillSource(StrEnum):
    USER = "user"
    """The user's own folder."""
    REPOSITORY = "repository"
    """A skills folder of the workspace."""


@dataclass(frozen=True)
class Skill:
    """One loaded skill."""

    name: str
    description: str
    """On one line, whitespace collapsed, invisible characters shown as escapes."""
    body: str
    """The instructions: SKILL.md after its front matter."""
    folder: Path
    """The skill's folder, symlinks resolved."""
    source: SkillSource
    display: str
    """Where it was found: workspace-relative, or ``~/...`` (absolute outside home)."""
    workspace_path: str | None
    """The folder relative to the workspace (for `read_file`), None for a skill outside it."""
    size: int
    """Bytes of its SKILL.md."""


@dataclass
class _Found:
    skills: dict[str, Skill] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    over_limit: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    """Real paths of the SKILL.md files read (a folder linked from two places is read once)."""


class SkillsLoader:
    """Finds and reads the skills of one workspace and user, once, on first access."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        user_folder: str | os.PathLike[str] | None,
        *,
        folders: Sequence[str] = WORKSPACE_SKILL_FOLDERS,
        max_skills: int = MAX_SKILLS,
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.user_folder = Path(user_folder) if user_folder is not None else None
        self.folders = tuple(folders)
        self.max_skills = max_skills
        self._found: _Found | None = None
        self._pins = PinCheck(self.workspace)

    @property
    def skills(self) -> list[Skill]:
        """The loaded skills, by name."""
        found = self._load()
        return sorted(found.skills.values(), key=lambda s: s.name)

    @property
    def warnings(self) -> list[str]:
        """One line per skill or folder that was skipped, naming it and why."""
        found = self._load()
        lines = list(found.warnings)
        if found.over_limit:
            shown = ", ".join(found.over_limit[:10])
            more = len(found.over_limit) - 10
            lines.append(
                f"{len(found.over_limit)} skill(s) not loaded, over the limit of "
                f"{self.max_skills}: {shown}" + (f" and {more} more" if more > 0 else "")
            )
        if len(lines) > MAX_WARNINGS:
            rest = len(lines) - MAX_WARNINGS
            lines = [*lines[:MAX_WARNINGS], f"... and {rest} more skill warning(s)"]
        return lines

    def searched(self) -> list[tuple[str, SkillSource]]:
        """The folders looked in, as shown to the user, with their source."""
        places = [(_display(self.user_folder), SkillSource.USER)] if self.user_folder else []
        return places + [(folder, SkillSource.REPOSITORY) for folder in self.folders]

    def reload(self) -> None:
        """Forget what was read; the next access reads the folders again."""
        self._found = None

    def _load(self) -> _Found:
        if self._found is not None:
            return self._found
        found = _Found()
        if self.user_folder is not None:
            self._load_folder(self.user_folder, SkillSource.USER, found)
        for folder in self.folders:
            self._load_folder(self.workspace / folder, SkillSource.REPOSITORY, found)
        for warning in found.warnings:
            log.info("skills: %s", warning)  # `warnings` is how the user is told
        self._found = found
        return found

    def _load_folder(self, root: Path, source: SkillSource, found: _Found) -> None:
        inside = [self.workspace] if source is SkillSource.REPOSITORY else None
        shown = self._shown(root, source)
        if not root.is_dir():
            return
        if inside is not None and not _within(root, inside):
            found.warnings.append(
                f"skills folder {shown} skipped: it links outside the workspace "
                f"(to {printable(os.path.realpath(root))})"
            )
            return
        try:
            with os.scandir(root) as listing:
                entries = list(islice(listing, MAX_FOLDER_ENTRIES + 1))
        except OSError as exc:
            found.warnings.append(f"skills folder {shown} skipped: {exc.strerror or exc}")
            return
        if len(entries) > MAX_FOLDER_ENTRIES:
            found.warnings.append(
                f"skills folder {shown}: only {MAX_FOLDER_ENTRIES:,} of its entries were looked at"
            )
            entries = entries[:MAX_FOLDER_ENTRIES]
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith(".") or not _is_folder(entry):
                continue
            self._load_skill(Path(entry.path), source, found, inside)

    def _load_skill(
        self, folder: Path, source: SkillSource, found: _Found, inside: list[Path] | None
    ) -> None:
        shown = self._shown(folder, source)
        if inside is not None and not _within(folder, inside):
            found.warnings.append(
                f"skill {shown} skipped: it links outside the workspace "
                f"(to {printable(os.path.realpath(folder))})"
            )
            return
        path = folder / SKILL_FILE
        real = os.path.realpath(path)
        if real in found.seen:
            return  # the same folder reached through a link: read once
        if len(found.skills) >= self.max_skills:
            if os.path.lexists(path):
                found.over_limit.append(shown)
            return
        try:
            raw = read_host_file(path, limit=MAX_SKILL_BYTES, inside=inside)
        except FileNotFoundError:
            return  # a folder that is not a skill (shared files, a README)
        except RefusedFile as refused:
            found.warnings.append(f"skill {shown} skipped: {SKILL_FILE} {refused.reason}")
            return
        except OSError as exc:
            found.warnings.append(
                f"skill {shown} skipped: {SKILL_FILE} could not be read ({exc.strerror or exc})"
            )
            return
        found.seen.add(real)
        if source is SkillSource.REPOSITORY:
            verdict = self._pins.verdict(skill_item(shown), skill_digest(folder))
            if not verdict.usable:
                found.warnings.append(f"skill {shown} skipped: {refusal(verdict)}")
                return
        try:
            skill = _parse_skill(raw, folder, source, shown, self.workspace)
        except SkillFormatError as error:
            found.warnings.append(f"skill {shown} skipped: {error}")
            return
        if skill.name != folder.name:
            found.warnings.append(
                f"skill {shown}: its name {skill.name!r} differs from its folder's; it is "
                f"known as {skill.name!r}"
            )
        kept = found.skills.get(skill.name)
        if kept is not None:
            whose = "your own skill" if kept.source is SkillSource.USER else "the skill"
            found.warnings.append(
                f"skill {shown} skipped: {whose} of the same name, {kept.display}, is used"
            )
            return
        found.skills[skill.name] = skill

    def _shown(self, path: Path, source: SkillSource) -> str:
        if source is SkillSource.USER:
            return _display(path)
        try:
            return printable(path.relative_to(self.workspace).as_posix())
        except ValueError:
            return printable(str(path))


def skill_item(shown: str) -> str:
    """A repository skill's name among the content `journeyman trust` approves."""
    return f"skill {shown}"


MAX_DIGEST_FILES = 500
MAX_DIGEST_FILE_BYTES = 8 * 1024 * 1024


def skill_digest(folder: Path) -> str:
    """One hash over a skill's whole folder (its SKILL.md, scripts and files; a link counts as
    where it points, never followed), so changing any script changes it."""
    lines: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = Path(root, name)
            relative = path.relative_to(folder).as_posix()
            if path.is_symlink():
                lines.append(f"{relative} -> {os.readlink(path)}")
            elif len(lines) >= MAX_DIGEST_FILES or path.stat().st_size > MAX_DIGEST_FILE_BYTES:
                lines.append(f"{relative} {path.stat().st_size} {path.stat().st_mtime_ns}")
            else:
                lines.append(f"{relative} {content_digest(path.read_bytes())}")
    return content_digest("\n".join(lines))


def _display(path: Path | None) -> str:
    if path is None:
        return ""
    home = Path.home()
    if path.is_relative_to(home):
        return printable(f"~/{path.relative_to(home).as_posix()}")
    return printable(str(path))


def _within(path: Path, roots: Sequence[Path]) -> bool:
    resolved = Path(os.path.realpath(path))
    return any(resolved == root or resolved.is_relative_to(root) for root in roots)


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows a link: where it leads is checked next
    except OSError:
        return False


class SkillFormatError(ValueError):
    """A SKILL.md that does not follow the format; the message says what is wrong."""


def _parse_skill(
    raw: bytes, folder: Path, source: SkillSource, shown: str, workspace: Path
) -> Skill:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SkillFormatError(
            f"{SKILL_FILE} is not UTF-8 text (byte {error.start:,} is not)"
        ) from None
    fields, body = parse_front_matter(text)
    name = _text_field(fields, "name")
    if len(name) > MAX_NAME_CHARS or not _NAME.fullmatch(name):
        raise SkillFormatError(
            f"its name {printable(repr(name[:80]))} is not a skill name (1 to {MAX_NAME_CHARS} "
            "lowercase letters, digits and single hyphens, such as pdf-tools)"
        )
    description = printable(" ".join(_text_field(fields, "description").split()))
    if not description:
        raise SkillFormatError("its description is empty")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillFormatError(
            f"its description is {len(description):,} characters, over the "
            f"{MAX_DESCRIPTION_CHARS:,} the format allows"
        )
    real = Path(os.path.realpath(folder))
    inside = real.is_relative_to(workspace)
    return Skill(
        name=name,
        description=description,
        body=body.strip(),
        folder=real,
        source=source,
        display=shown,
        workspace_path=real.relative_to(workspace).as_posix() if inside else None,
        size=len(raw),
    )


# --- front matter --------------------------------------------------------------------------


@dataclass(frozen=True)
class _RawField:
    """A top-level key's value as written: the rest of its line and its indented lines."""

    rest: str
    block: tuple[str, ...]
    line: int


def parse_front_matter(text: str) -> tuple[dict[str, _RawField], str]:
    """The top-level fields of the front matter of `text` and the text after it. Raises
    `SkillFormatError` when there is no front matter or a line cannot be read."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != "---":
        raise SkillFormatError(f"{SKILL_FILE} does not start with front matter (a '---' line)")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise SkillFormatError("its front matter has no closing '---' line")
    fields: dict[str, _RawField] = {}
    header = lines[1:end]
    i = 0
    while i < len(header):
        line = header[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        number = i + 2  # the line's number in the file
        match = _KEY.match(line)
        if line[0] in " \t" or match is None:
            raise SkillFormatError(f"front matter line {number} is not a 'key: value' line")
        j = i + 1
        while j < len(header) and (not header[j].strip() or header[j][0] in " \t"):
            j += 1
        key = match.group(1)
        if key in fields:
            raise SkillFormatError(f"front matter line {number}: {key!r} is given twice")
        fields[key] = _RawField((match.group(2) or "").strip(), tuple(header[i + 1 : j]), number)
        i = j
    return fields, "\n".join(lines[end + 1 :])


def _text_field(fields: dict[str, _RawField], key: str) -> str:
    """The text of `key`; `SkillFormatError` when it is missing or not text."""
    raw = fields.get(key)
    if raw is None:
        raise SkillFormatError(f"its front matter has no {key!r}")
    value = _scalar(raw)
    if value is None:
        raise SkillFormatError(f"front matter line {raw.line}: {key!r} is not text")
    return value


def _scalar(raw: _RawField) -> str | None:
    """The text of a scalar value, or None for a list, a table or a YAML construct not read
    here (anchors, aliases, tags)."""
    rest, block = raw.rest, list(raw.block)
    filled = [line for line in block if line.strip()]
    if not rest:
        if not filled:
            return ""
        if _NESTED_START.match(filled[0].strip()):
            return None  # a list or a table
        return " ".join(line.strip() for line in filled)
    if rest[0] in "|>":
        if not re.fullmatch(r"[|>][+-]?[1-9]?(?:\s+#.*)?", rest):
            return None
        indent = min(len(line) - len(line.lstrip()) for line in filled) if filled else 0
        kept = [line[indent:] for line in block]
        joined = "\n".join(kept) if rest[0] == "|" else " ".join(s.strip() for s in kept)
        return joined.strip()
    if rest[0] in "\"'":
        return _quoted(" ".join([rest, *(line.strip() for line in filled)]), raw.line)
    if rest[0] in "[{&*!%@`":
        return None
    rest = re.split(r"\s+#", rest, maxsplit=1)[0]
    return " ".join([rest, *(line.strip() for line in filled)]).strip()


def _quoted(text: str, line: int) -> str:
    quote = text[0]
    i = 1
    while i < len(text):
        char = text[i]
        if quote == '"' and char == "\\":
            i += 2
            continue
        if char == quote:
            if quote == "'" and text[i + 1 : i + 2] == "'":
                i += 2
                continue
            break
        i += 1
    else:
        raise SkillFormatError(f"front matter line {line}: a quoted value is not closed")
    after = text[i + 1 :].strip()
    if after and not after.startswith("#"):
        raise SkillFormatError(f"front matter line {line}: text after a quoted value")
    inner = text[1:i]
    if quote == "'":
        return inner.replace("''", "'")
    try:
        return _ESCAPE.sub(_unescape, inner)
    except KeyError:
        raise SkillFormatError(
            f"front matter line {line}: a double-quoted value has an unknown escape"
        ) from None


_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.DOTALL)
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v",
    "f": "\f", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\",
    "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip
"""YAML's one-character escapes in double-quoted text."""


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if len(code) > 1:
        return chr(int(code[1:], 16))
    return _ESCAPES[code]


# --- the system prompt ---------------------------------------------------------------------

SKILLS_HEADING = "# Skills"

SKILLS_INTRO = (
    "Each skill below holds instructions, and sometimes scripts or reference files, for one "
    "kind of task. When the task at hand matches a skill's description, call skill with its "
    "name first and follow what it says."
)


def render_skills_section(skills: SkillsLoader | Sequence[Skill]) -> str:
    """The system prompt section naming each skill with its description, or "" when there is
    none. Past `SKILLS_PROMPT_CHARS`, descriptions are cut so every skill keeps its line."""
    listed = skills.skills if isinstance(skills, SkillsLoader) else list(skills)
    if not listed:
        return ""
    cut = _description_cut([(s.name, s.description) for s in listed], SKILLS_PROMPT_CHARS)
    lines = [_line(s.name, s.description, cut) for s in listed]
    return f"{SKILLS_HEADING}\n\n{SKILLS_INTRO}\n\n" + "\n".join(lines)


def _line(name: str, description: str, cut: int) -> str:
    if len(description) <= cut:
        return f"- {name}: {description}"
    if cut == 0:
        return f"- {name}"
    shown = description[: cut - 1]
    space = shown.rfind(" ")
    if space > cut // 2:
        shown = shown[:space]
    return f"- {name}: {shown.rstrip(' ,;:.')}…"


def _description_cut(entries: Sequence[tuple[str, str]], budget: int) -> int:
    """The largest description length at which all lines fit in `budget` characters (0: names
    alone, which may still pass it)."""

    def size(cut: int) -> int:
        return sum(
            len(name) + 3 + (min(len(text), cut) + 2 if cut else 0) for name, text in entries
        )

    longest = max(len(text) for _, text in entries)
    if size(longest) <= budget:
        return longest
    low, high = 0, longest
    while low < high:
        middle = (low + high + 1) // 2
        if size(middle) <= budget:
            low = middle
        else:
            high = middle - 1
    return low
