"""Permissions: whether a tool call may run, must be approved by the user, or is refused.

A decision combines the permission mode with allow / ask / deny rules, in this order:

1. a matching **deny** rule refuses the call, in every mode (``bypass`` included);
2. in ``plan`` mode a file-edit tool is refused, whatever the allow rules say (plan mode never
   changes files; an allow rule can still let a command such as ``git status`` run);
3. a matching **allow** rule lets the call run;
4. the **mode** gives a baseline (table below);
5. where that baseline is "allow", a matching **ask** rule turns it into "ask"; ``bypass``
   ignores ask rules (it never asks), ``trusted`` honours them.

=============  ============  ============  ===============  ==============
mode           read-only     file edits    commands, other  ask rules
=============  ============  ============  ===============  ==============
plan           allow         deny (hard)   deny             apply
default        allow         ask           ask              apply
accept_edits   allow         allow         ask              apply
trusted        allow         allow         allow            apply
bypass         allow         allow         allow            ignored
=============  ============  ============  ===============  ==============

So ``trusted`` asks only where the user wrote an ask rule, and ``bypass`` never asks; both
keep deny rules, which are the user's hard limits (we chose this over skipping deny rules too,
because a sandboxed unattended run is exactly where a forgotten ``rm -rf`` does damage).
An allow rule beats ``ask`` rules (step 3 before step 5): to be asked about ``git push`` while
``git status`` runs freely, allow ``run_command(git status*)`` rather than ``run_command(git *)``.

What a call is: each tool declares its `kind` (read / edit / command / finish / other) and
its `permission_arg`; the policy asks the run's tools (`ToolRegistry.kind_of`,
``permission_arg_of``) and keeps no list of tool names. Read and finish tools take the
"read-only" column above, edit tools the "file edits" column, everything else the last one. A
tool the policy does not know is "other" unless the caller says it reads only.

Rule syntax: ``tool`` (any arguments) or ``tool(pattern)``. The tool part may use ``*`` and
``?`` (``mcp__github__*``). The pattern matches the tool's *permission argument*, read as:

- a **command** when the tool is of kind command or the argument is named ``command``
  (``run_command``): ``*`` matches any text, spaces and ``/`` included.

  *Deny and ask rules* match when the pattern matches the whole command, any part of it, or
  any program the command runs as `journeyman.policy.commands` finds them: parts separated by
  ``;``, ``&&``, ``||``, ``|``, ``&``, newlines and parentheses; quotes and backslashes
  removed (``\\rm``, ``"rm"``); the program by its base name (``/bin/rm``); the commands in
  ``$(...)``, backticks and ``<(...)``; the command after wrappers such as ``env``,
  ``command``, ``exec``, ``nice``, ``nohup``, ``timeout``, ``sudo``, ``time``, ``xargs``,
  ``strace``, ``script -c``, ``unshare``, ``setpriv``, ``prlimit``, ``eval`` and ``bash -c``
  / ``sh -c`` (recursively); ``git`` with its global options left out (``git -C . -c k=v
  --no-pager push`` is ``git push``); ``find -delete`` as ``rm``, and the commands of
  ``find -exec``. What only the running shell knows fails closed: a program named by an
  expansion (``$CMD``, ``$(echo rm)``, ``eval "$x"``), a quote left open, an unquoted glob
  in a program name, and constructs that rename programs or run text later (``alias``,
  ``trap``, ``coproc``, ``hash -p``, a shell reading commands from its input) match *every*
  deny and ask rule of the tool, and the refusal names the construct; a git alias matches
  every rule for ``git``. Arguments with expansions match every pattern they could match
  once filled in (``rm $X`` matches ``rm -rf *``). Not followed: commands a program reads
  from a file or its own language (``sh script.sh``, ``python -c``, ``make``), and
  functions or aliases defined in an earlier call. So ``deny = ["run_command(rm *)"]``
  refuses ``rm x`` also when spelled ``\\rm x``, ``/bin/rm x``, ``command rm x``,
  ``env rm x``, ``sudo rm x``, ``bash -c 'rm x'``, ``ls | xargs rm``, ``find . -delete``,
  ``$(echo rm) x`` or ``make && rm x``, but not ``python -c "import shutil; ..."``: rules
  are a guard against mistakes, read from the text of the call; a sandbox, not a deny rule,
  is what contains a determined program. Deny rules err towards refusing: ``command -v rm``
  or a here-document line reading ``rm x`` is refused too.

  *Allow rules* apply only when every part of the command, as written, is matched by some
  allow rule, and never to a command with ``$(...)``, backticks, process substitution or
  output redirection to a file (so ``git status*`` does not allow ``git status; rm -rf ~``
  or ``git status > setup.py``). They see the text as written: ``run_command(git *)`` does
  not allow ``env git status``.
- a **workspace path** when the tool is of kind edit or the argument is named ``path`` (file
  tools), and each of the paths a tool lists for the call when it defines ``paths_of(args)``
  (``apply_patch``: every file the patch touches, both ends of a move; a deny rule matching
  any of them refuses the call, an allow rule must cover all of them, and a hook that fails
  makes every deny and ask rule of the tool match). Paths are taken relative to the
  workspace and normalised (``./a/../b`` is ``b``); ``*`` and ``?`` stay within one path
  segment, ``**`` spans any number of segments (``src/**`` is everything under ``src``).
  A path is checked both as written and with symlinks resolved: a deny or ask rule matches
  if either form matches, an allow rule only if both do.

  Deny and ask path rules go by the *kind* of the tool they name, not only its name: a rule
  for a read tool (``read_file(secrets/**)``, ``grep(...)``) holds for every tool that reads
  or edits files, and a rule for an edit tool (``edit_file(x)``, ``write_file(x)``) for every
  tool that edits them, ``apply_patch`` included, even when the run does not offer the tool
  the rule names. Listing and search tools leave the files a read deny rule covers out of
  their results and say so (`PermissionPolicy.unreadable`, given to tools as
  ``ToolContext.unreadable``). A bare tool name (``deny = ["edit_file"]``) still means that
  tool only, and allow rules only ever cover the tools they name.
- plain **text** for any other permission argument (``fetch(https://docs.python.org/*)``):
  ``*`` matches any text.
- tools that declare no permission argument (most MCP and user tools): the pattern is
  matched, like text, against the arguments as compact JSON with sorted keys, e.g.
  ``deploy(*"env":"prod"*)``. A bare name is the dependable way to cover such a tool.

A backslash makes the next character literal (``\\*``). A rule whose permission argument is
missing from the call, or is not a string, does not match (bare-name rules still do).

There is no setting that makes a tool an edit: a tool's kind is what it declares (user tools
with ``@tool(kind=...)``, MCP tools from their annotations, see `integrations.mcp.bridge`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import functools
import json
import logging
import os
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from journeyman.core.errors import PermissionDeniedError
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.core.tool_kind import ToolKind
from journeyman.policy.choices import PermissionMode as PermissionMode
from journeyman.policy.commands import SimpleCommand, could_match, programs

log = logging.getLogger(__name__)


class DecisionKind(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class ArgKind(StrEnum):
    """How a rule's pattern reads the permission argument."""

    COMMAND = "command"
    PATH = "path"
    TEXT = "text"
    JSON = "json"
    """No permission argument: the pattern matches all arguments as compact JSON."""


def arg_kind(kind: ToolKind | str, permission_arg: str | None) -> ArgKind:
    """How patterns read the permission argument of a tool of `kind` (see the module doc)."""
    if permission_arg is None:
        return ArgKind.JSON
    if kind == ToolKind.COMMAND or permission_arg == "command":
        return ArgKind.COMMAND
    if kind == ToolKind.EDIT or permission_arg == "path":
        return ArgKind.PATH
    return ArgKind.TEXT


class ToolDeclarations(Protocol):
    """What the run's tools declare; `ToolRegistry` is one."""

    def kind_of(self, call: ToolCall | str, /) -> ToolKind | None:
        """The tool's kind, or None when no such tool is known."""
        ...

    def permission_arg_of(self, call: ToolCall | str, /) -> str | None:
        """The argument rules match on, or None."""
        ...

    def paths_of(self, call: ToolCall | str, args: Mapping[str, Any], /) -> list[str] | None:
        """The paths the call touches, for a tool that says (its `paths_of`); else None."""
        ...


@functools.lru_cache(maxsize=1)
def builtin_declarations() -> ToolDeclarations:
    """The declarations of the built-in tools: what a policy given no tools goes by."""
    from journeyman.tools.builtin import default_tools  # sandboxes, git: lazily
    from journeyman.tools.registry import ToolRegistry

    return ToolRegistry(default_tools(edit_tool="both"))


# --------------------------------------------------------------------------------- patterns


def glob_escape(text: str) -> str:
    """`text` as a pattern that matches exactly itself."""
    return re.sub(r"([\\*?])", r"\\\1", text)


@functools.lru_cache(maxsize=1024)
def _compile(spec: str, kind: ArgKind) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    path = kind is ArgKind.PATH
    while i < len(spec):
        char = spec[i]
        if char == "\\" and i + 1 < len(spec):
            out.append(re.escape(spec[i + 1]))
            i += 2
            continue
        if char == "*" and spec.startswith("**", i) and path:
            at_start = i == 0 or spec[i - 1] == "/"
            if at_start and spec.startswith("**/", i):
                out.append("(?:.*/)?")  # zero or more leading directories
                i += 3
                continue
            if at_start and i + 2 == len(spec) and i > 0:
                out.pop()  # the "/" before a trailing "**": `src/**` also matches `src`
                out.append("(?:/.*)?")
                i += 2
                continue
            out.append(".*")
            i += 2
            continue
        if char == "*":
            while spec.startswith("*", i + 1):
                i += 1
            out.append("[^/]*" if path else ".*")
        elif char == "?":
            out.append("[^/]" if path else ".")
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


_RULE = re.compile(r"\s*([^()\s]+)\s*(?:\((.*)\))?\s*", re.DOTALL)


@dataclass(frozen=True)
class PermissionRule:
    """One parsed ``tool`` or ``tool(pattern)`` rule."""

    tool: str
    pattern: str | None = None
    """The text inside the parentheses; None for a bare tool name (any arguments)."""
    source: str = ""
    """Where the rule came from ("config", "remembered", ...), for messages."""

    @classmethod
    def parse(cls, text: str, source: str = "") -> PermissionRule:
        match = _RULE.fullmatch(text)
        if match is None:
            raise ValueError(
                f"permission rule {text!r} is not `tool` or `tool(pattern)`, "
                "e.g. `run_command(git status*)` or `write_file(src/**)`"
            )
        tool, pattern = match.group(1), match.group(2)
        if pattern is not None and not pattern.strip():
            raise ValueError(
                f"permission rule {text!r} has an empty pattern; write just {tool!r} to "
                "cover any arguments"
            )
        return cls(tool, pattern.strip() if pattern is not None else None, source)

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"

    def names(self, tool_name: str) -> bool:
        """Whether the tool part of the rule covers `tool_name`."""
        return fnmatch.fnmatchcase(tool_name, self.tool)

    def matches_value(self, value: str, kind: ArgKind) -> bool:
        if self.pattern is None:
            return True
        return _compile(self.pattern, kind).fullmatch(value) is not None

    def matches_any_program(self, found: Iterable[SimpleCommand]) -> bool:
        """Whether the command pattern matches, or could match, any of the programs `found`."""
        if self.pattern is None:
            return True
        compiled = _compile(self.pattern, ArgKind.COMMAND)
        return any(could_match(compiled, self.pattern, command) for command in found)


def parse_rules(
    texts: Iterable[str | PermissionRule], source: str = ""
) -> tuple[PermissionRule, ...]:
    return tuple(
        t if isinstance(t, PermissionRule) else PermissionRule.parse(t, source) for t in texts
    )


# ----------------------------------------------------------------- what a call is matched on


@dataclass(frozen=True)
class _Subject:
    """A call reduced to what rules match: the values of its permission argument."""

    tool: str
    kind: ArgKind
    any_values: tuple[str, ...]
    """A deny or ask rule matches if it matches any of these."""
    all_values: tuple[str, ...]
    """An allow rule applies if every one of these is matched by some allow rule."""
    coverable: bool
    """False when no pattern may allow the call (substitutions, redirection, missing argument)."""
    programs: tuple[SimpleCommand, ...] = ()
    """For commands: every program the command runs (deny and ask rules match these too)."""
    unknown: bool = False
    """What the call touches could not be worked out: every deny and ask rule matches."""
    tool_kind: ToolKind = ToolKind.OTHER
    """What the called tool declares itself to be (path rules of its kind apply to it)."""


def split_command(command: str) -> tuple[list[str], bool]:
    """The parts of a shell command line, and whether it is too dynamic to allow by pattern.

    Parts are separated by unquoted ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines. The
    command is "risky" when it substitutes commands (``$(...)``, backticks, ``<(...)``) or
    redirects output to a file other than /dev/null.
    """
    parts: list[str] = []
    current: list[str] = []
    risky = False
    quote: str | None = None
    i, n = 0, len(command)
    while i < n:
        char = command[i]
        if quote == "'":
            current.append(char)
            if char == "'":
                quote = None
            i += 1
            continue
        if char == "\\" and i + 1 < n:
            current.append(command[i : i + 2])
            i += 2
            continue
        if quote == '"':
            current.append(char)
            if char == '"':
                quote = None
            elif char == "`" or command.startswith("$(", i):
                risky = True
            i += 1
            continue
        if char in "'\"":
            quote = char
            current.append(char)
            i += 1
            continue
        if char == "`" or command.startswith(("$(", "<(", ">("), i):
            risky = True
            current.append(char)
            i += 1
            continue
        if char == ">":
            end = i + 1
            while end < n and command[end] in ">|":
                end += 1
            if end < n and command[end] == "&":  # >&2, 2>&1: duplicates a descriptor
                current.append(command[i : end + 1])
                i = end + 1
                continue
            target_start = end
            while target_start < n and command[target_start] in " \t":
                target_start += 1
            target_end = target_start
            while target_end < n and command[target_end] not in " \t\n;&|<>()":
                target_end += 1
            if command[target_start:target_end] != "/dev/null":
                risky = True
            current.append(command[i:target_end])
            i = target_end
            continue
        if char in ";\n|&":
            if char == "&" and current and current[-1].endswith(("<", ">")):
                current.append(char)
                i += 1
                continue
            parts.append("".join(current))
            current = []
            i += 1
            while i < n and command[i] in "|&;":
                i += 1
            continue
        current.append(char)
        i += 1
    parts.append("".join(current))
    if quote is not None:
        risky = True
    return [p.strip() for p in parts if p.strip()], risky


def _normalise_path(value: str, workspace: Path | None) -> list[str]:
    """The path as written (normalised, workspace-relative) and with symlinks resolved."""
    forms: list[str] = []
    if workspace is not None and os.path.isabs(value):
        absolute = os.path.normpath(value)
        lexical = _relative_to(absolute, workspace) or absolute
    else:
        lexical = posixpath.normpath(value.replace(os.sep, "/")) if value else value
    forms.append(lexical)
    if workspace is not None and "\0" not in value:  # no file has a NUL in its name
        real = os.path.realpath(workspace / value)
        resolved = _relative_to(real, workspace) or real
        if resolved not in forms:
            forms.append(resolved)
    return forms


def _relative_to(path: str, root: Path) -> str | None:
    try:
        return Path(path).relative_to(root).as_posix() or "."
    except ValueError:
        return None


# -------------------------------------------------------------------------------- the policy


def mode_baseline(mode: PermissionMode, *, read_only: bool, edit: bool) -> DecisionKind:
    """What a mode says about a call that no rule covers."""
    if read_only or mode in (PermissionMode.TRUSTED, PermissionMode.BYPASS):
        return DecisionKind.ALLOW
    if mode is PermissionMode.PLAN:
        return DecisionKind.DENY
    if mode is PermissionMode.ACCEPT_EDITS and edit:
        return DecisionKind.ALLOW
    return DecisionKind.ASK


@dataclass(frozen=True)
class PermissionDecision:
    kind: DecisionKind
    reason: str
    """Why, in a sentence that can be shown to the user and the model."""
    rule: PermissionRule | None = None
    """The rule that decided, when one did."""


class PermissionsConfig(BaseModel):
    """The ``[permissions]`` section of the config file."""

    model_config = ConfigDict(extra="forbid")

    mode: PermissionMode = PermissionMode.DEFAULT
    """Baseline for calls no rule covers: plan, default, accept_edits, trusted or bypass."""
    allow: list[str] = []
    """Rules for calls that run without asking, e.g. "run_command(git status*)"."""
    ask: list[str] = []
    """Rules for calls that need the user's approval even where the mode would allow them."""
    deny: list[str] = []
    """Rules for calls that are always refused, in every mode, e.g. "run_command(rm -rf *)"."""

    @model_validator(mode="before")
    @classmethod
    def _no_edit_tools(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "edit_tools" in data:
            raise ValueError(
                "permissions.edit_tools is no longer a setting: each tool declares whether it "
                "edits files (user tools with @tool(kind=...)); remove the key, and use allow "
                "rules such as 'my_tool(src/**)' to let a tool run without asking"
            )
        return data

    @field_validator("allow", "ask", "deny")
    @classmethod
    def _rules_parse(cls, value: list[str]) -> list[str]:
        for text in value:
            PermissionRule.parse(text)
        return value


class PermissionPolicy:
    """Decides allow / ask / deny for one call; pure apart from resolving symlinks."""

    def __init__(
        self,
        mode: PermissionMode | str = PermissionMode.DEFAULT,
        *,
        allow: Iterable[str | PermissionRule] = (),
        ask: Iterable[str | PermissionRule] = (),
        deny: Iterable[str | PermissionRule] = (),
        workspace: str | os.PathLike[str] | None = None,
        tools: ToolDeclarations | None = None,
    ) -> None:
        """`tools` answers what each tool declares (the run's `ToolRegistry`); None means the
        built-in tools only."""
        self.mode = PermissionMode(mode)
        self.allow = parse_rules(allow, "allow")
        self.ask = parse_rules(ask, "ask")
        self.deny = parse_rules(deny, "deny")
        self.workspace = Path(os.path.realpath(workspace)) if workspace is not None else None
        self.tools = tools if tools is not None else builtin_declarations()
        self._rule_kinds: dict[tuple[PermissionRule, int], frozenset[ToolKind]] = {}

    @classmethod
    def from_config(
        cls,
        config: PermissionsConfig,
        workspace: str | os.PathLike[str] | None = None,
        *,
        mode: PermissionMode | str | None = None,
        tools: ToolDeclarations | None = None,
    ) -> PermissionPolicy:
        """A policy from the config section; `mode` (e.g. ``--permission-mode``) overrides it."""
        return cls(
            mode if mode is not None else config.mode,
            allow=config.allow,
            ask=config.ask,
            deny=config.deny,
            workspace=workspace,
            tools=tools,
        )

    def kind_of(self, tool_name: str, read_only: bool | None = None) -> ToolKind:
        """The kind `tool_name` declares; for a tool the policy does not know, READ when the
        caller says it reads only, else OTHER."""
        kind = self.tools.kind_of(tool_name)
        if kind is None:
            return ToolKind.READ if read_only else ToolKind.OTHER
        try:
            return ToolKind(kind)
        except ValueError:  # a tool declaring a kind that does not exist is treated as "other"
            return ToolKind.OTHER

    def decide(
        self, tool_name: str, args: Mapping[str, Any], read_only: bool | None = None
    ) -> PermissionDecision:
        """Allow, ask or deny one call. `read_only` is consulted only for a tool the policy's
        `tools` do not know; a known tool's declared kind decides."""
        subject = self._subject(tool_name, args)
        rule = _first_match(self.deny, subject, self._applies)
        if rule is not None:
            return PermissionDecision(DecisionKind.DENY, _matching(rule, subject, "deny"), rule)
        kind = self.kind_of(tool_name, read_only)
        edit = kind is ToolKind.EDIT
        read_only = kind in (ToolKind.READ, ToolKind.FINISH)
        if self.mode is PermissionMode.PLAN and edit:
            return PermissionDecision(
                DecisionKind.DENY, "plan mode does not change files; describe the change instead"
            )
        rule = _covering(self.allow, subject)
        if rule is not None:
            return PermissionDecision(
                DecisionKind.ALLOW, f"the allow rule `{rule}` covers this call", rule
            )
        baseline = mode_baseline(self.mode, read_only=read_only, edit=edit)
        if baseline is DecisionKind.ALLOW and self.mode is not PermissionMode.BYPASS:
            rule = _first_match(self.ask, subject, self._applies)
            if rule is not None:
                return PermissionDecision(DecisionKind.ASK, _matching(rule, subject, "ask"), rule)
        return PermissionDecision(
            baseline, _mode_reason(self.mode, baseline, read_only=read_only, edit=edit)
        )

    def unreadable(self, path: str) -> str | None:
        """The deny rule that keeps the model from reading `path` (workspace-relative), as
        text, or None. Listing and search tools leave such files out of what they show."""
        rules = [
            rule
            for rule in self.deny
            if rule.pattern is not None and ToolKind.READ in self._path_kinds(rule)
        ]
        if not rules:
            return None
        forms = _normalise_path(path, self.workspace)
        for rule in rules:
            if any(rule.matches_value(form, ArgKind.PATH) for form in forms):
                return str(rule)
        return None

    def _applies(self, rule: PermissionRule, subject: _Subject) -> bool:
        """Whether a deny or ask `rule` concerns the call: it names the tool, or it is a path
        rule for tools of a kind this tool's paths answer to (read rules cover every tool that
        reads or edits files, edit rules every tool that edits them)."""
        if rule.names(subject.tool):
            return True
        if rule.pattern is None or subject.kind is not ArgKind.PATH:
            return False
        answers_to = _PATH_RULE_KINDS.get(subject.tool_kind, frozenset())
        return not answers_to.isdisjoint(self._path_kinds(rule))

    def _path_kinds(self, rule: PermissionRule) -> frozenset[ToolKind]:
        """The kinds of the path-taking tools `rule` names, among the run's tools and the
        built-in ones (a rule for `edit_file` speaks for edits even when the run offers
        `apply_patch` instead)."""
        builtin = builtin_declarations()
        names = [*getattr(self.tools, "names", ()), *getattr(builtin, "names", ())]
        key = (rule, len(names))  # tools registered later (MCP) are looked at again
        cached = self._rule_kinds.get(key)
        if cached is not None:
            return cached
        kinds: set[ToolKind] = set()
        for name in dict.fromkeys(names):
            if not rule.names(name):
                continue
            declared = self.tools if self.tools.kind_of(name) is not None else builtin
            kind = declared.kind_of(name)
            if kind is None or kind not in (ToolKind.READ, ToolKind.EDIT):
                continue
            if arg_kind(kind, declared.permission_arg_of(name)) is ArgKind.PATH:
                kinds.add(ToolKind(kind))
        found = frozenset(kinds)
        self._rule_kinds[key] = found
        return found

    def covered(self, tool_name: str, args: Mapping[str, Any], rules: Sequence[str]) -> bool:
        """Whether `rules` (remembered "always" answers) would allow this call like allow rules."""
        parsed = parse_rules(rules, "remembered")
        return _covering(parsed, self._subject(tool_name, args)) is not None

    def suggest_rules(self, tool_name: str, args: Mapping[str, Any]) -> list[str]:
        """The narrowest rules that would allow exactly this call in future ("always").

        One rule per part of a compound command and per form of a symlinked path; empty when
        the call cannot be allowed by pattern (a command with substitutions, a missing argument).
        """
        subject = self._subject(tool_name, args)
        if not subject.coverable:
            return []
        return [f"{glob_escape(tool_name)}({glob_escape(v)})" for v in subject.all_values]

    def _subject(self, tool_name: str, args: Mapping[str, Any]) -> _Subject:
        subject = self._what_is_matched(tool_name, args)
        return dataclasses.replace(subject, tool_kind=self.kind_of(tool_name))

    def _what_is_matched(self, tool_name: str, args: Mapping[str, Any]) -> _Subject:
        try:
            paths = self.tools.paths_of(tool_name, args)
        except Exception as exc:  # a tool's own hook failed: refuse rather than guess
            log.warning("%s: could not list the paths of a call: %s", tool_name, exc)
            return _Subject(tool_name, ArgKind.PATH, (), (), False, unknown=True)
        if paths is not None:
            forms = tuple(
                dict.fromkeys(f for path in paths for f in _normalise_path(path, self.workspace))
            )
            return _Subject(tool_name, ArgKind.PATH, forms, forms, bool(forms))
        field_name = self.tools.permission_arg_of(tool_name)
        style = arg_kind(self.kind_of(tool_name), field_name)
        if field_name is None:
            dump = json.dumps(
                dict(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
            )
            return _Subject(tool_name, ArgKind.JSON, (dump,), (dump,), True)
        value = args.get(field_name)
        if not isinstance(value, str):
            return _Subject(tool_name, style, (), (), False)
        if style is ArgKind.COMMAND:
            parts, risky = split_command(value)
            everything = (value, *[p for p in parts if p != value])
            return _Subject(
                tool_name,
                style,
                everything,
                tuple(parts),
                bool(parts) and not risky,
                programs(value),
            )
        if style is ArgKind.PATH:
            forms = tuple(_normalise_path(value, self.workspace))
            return _Subject(tool_name, style, forms, forms, bool(value))
        return _Subject(tool_name, style, (value,), (value,), True)


def _first_match(
    rules: Sequence[PermissionRule],
    subject: _Subject,
    applies: Callable[[PermissionRule, _Subject], bool] | None = None,
) -> PermissionRule | None:
    """The first of `rules` that matches; `applies` says which rules concern the call (by
    default those naming its tool)."""
    for rule in rules:
        if not (applies(rule, subject) if applies is not None else rule.names(subject.tool)):
            continue
        if rule.pattern is None or subject.unknown:
            return rule
        if any(rule.matches_value(v, subject.kind) for v in subject.any_values):
            return rule
        if subject.programs and rule.matches_any_program(subject.programs):
            return rule
    return None


_PATH_RULE_KINDS: Mapping[ToolKind, frozenset[ToolKind]] = {
    ToolKind.READ: frozenset({ToolKind.READ}),
    ToolKind.EDIT: frozenset({ToolKind.READ, ToolKind.EDIT}),
}
"""For a call of each kind, the kinds whose path rules also apply to its paths. An edit
tool reads what it changes (and shows lines of it when a match fails), so read rules cover
it too."""


def _matching(rule: PermissionRule, subject: _Subject, kind: str) -> str:
    """Why the `kind` (deny, ask) `rule` matched `subject`, naming the shell construct when
    only one did."""
    what = f"the {kind} rule `{rule}`"
    if not rule.names(subject.tool):
        return (
            f"{what} matches this call: a path rule for a tool that reads or edits files "
            f"holds for every tool of that kind ({subject.tool} included)"
        )
    exact = rule.pattern is None or any(
        rule.matches_value(v, subject.kind) for v in subject.any_values
    )
    if not exact:
        plain = [c for c in subject.programs if not c.construct]
        if not rule.matches_any_program(plain):
            constructs = [c for c in subject.programs if c.construct]
            for command in constructs:
                if rule.matches_any_program([command]):
                    return (
                        f"{what} may match: {command.construct} (rules cannot see what that "
                        "runs); write the command without it"
                    )
    return f"{what} matches this call"


def _covering(rules: Sequence[PermissionRule], subject: _Subject) -> PermissionRule | None:
    named = [r for r in rules if r.names(subject.tool)]
    for rule in named:
        if rule.pattern is None:
            return rule
    if not subject.coverable or not subject.all_values:
        return None
    first: PermissionRule | None = None
    for value in subject.all_values:
        found = next((r for r in named if r.matches_value(value, subject.kind)), None)
        if found is None:
            return None
        first = first or found
    return first


def _mode_reason(mode: PermissionMode, kind: DecisionKind, *, read_only: bool, edit: bool) -> str:
    if read_only:
        return "read-only tools run without asking"
    what = "file edits" if edit else "commands and other tools that change things"
    if kind is DecisionKind.DENY:
        return f"{mode.value} mode allows only read-only tools"
    if kind is DecisionKind.ASK:
        return f"{what} need approval in {mode.value} mode"
    return f"{what} run without asking in {mode.value} mode"


# ----------------------------------------------------------------- asking and remembering


class ApprovalAnswer(StrEnum):
    ALLOW = "allow"
    """Run this call once."""
    DENY = "deny"
    ALWAYS = "always"
    """Run it, and allow the same call in this project from now on without asking."""


@dataclass(frozen=True)
class ApprovalRequest:
    """What the user is asked about."""

    tool_name: str
    args: Mapping[str, Any]
    reason: str
    """Why approval is needed (the mode, or the ask rule)."""
    mode: PermissionMode
    project: str
    remember_as: tuple[str, ...] = ()
    """The rules an "always" answer would store; empty when "always" cannot be remembered."""
    rule: PermissionRule | None = None


class Approver(Protocol):
    """Asks the user; any async callable taking an `ApprovalRequest` fits.

    It should not raise (an exception counts as "deny"), and should time out to "deny".
    """

    async def __call__(self, request: ApprovalRequest, /) -> ApprovalAnswer: ...


class RememberedPermissions(Protocol):
    """Where "always" answers are kept, per project (the workspace path) and tool.

    The session store implements this on SQLite; `InMemoryRememberedPermissions` lasts a run.
    """

    def remembered(self, project: str, tool_name: str) -> Sequence[str]:
        """The rules stored for this project and tool (``tool(pattern)`` texts)."""
        ...

    def remember(self, project: str, tool_name: str, rule: str) -> None:
        """Store one rule; storing one that is already there changes nothing."""
        ...


@dataclass
class InMemoryRememberedPermissions:
    rules: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def remembered(self, project: str, tool_name: str) -> Sequence[str]:
        return tuple(self.rules.get((project, tool_name), ()))

    def remember(self, project: str, tool_name: str, rule: str) -> None:
        stored = self.rules.setdefault((project, tool_name), [])
        if rule not in stored:
            stored.append(rule)


class DecidedBy(StrEnum):
    """What settled a call that could not simply run."""

    DENY_RULE = "deny_rule"
    PLAN_MODE = "plan_mode"
    PERMISSION_MODE = "permission_mode"
    """The mode allows only read-only tools (a refusal without a rule)."""
    REMEMBERED = "remembered"
    """A rule stored by an earlier "always" answer."""
    YES = "yes"
    """``--yes``: every call that would need asking is approved."""
    NO_APPROVER = "no_approver"
    """Nobody could be asked (a non-interactive run): refused."""
    APPROVER_FAILED = "approver_failed"
    """Asking failed (the approver raised): refused."""
    USER = "user"
    """The user answered for this call only (allow once, or deny)."""
    USER_ALWAYS = "user_always"
    """The user allowed it and every call like it from now on."""


@dataclass(frozen=True)
class ApprovalOutcome:
    """How a call that needed a decision beyond the policy's plain "allow" was settled."""

    granted: bool
    decided_by: DecidedBy
    reason: str
    """Why the call needed it (the policy's reason: the rule or the mode)."""


PERMISSION_ERROR_KIND = "permission"
"""`ToolResult.metadata["error"]` of a refused call."""


class PermissionGate:
    """Policy, approver and memory together: may this call run?

    `check` returns None when the call may run, or the text of the refusal to show the model.
    Without an approver the run is non-interactive: calls that need approval are refused with
    a message that says how to allow them, unless `yes` is set (``--yes``), which approves
    every such call (deny rules and plan mode still refuse).
    """

    def __init__(
        self,
        policy: PermissionPolicy,
        *,
        approver: Approver | None = None,
        memory: RememberedPermissions | None = None,
        project: str | os.PathLike[str] | None = None,
        yes: bool = False,
    ) -> None:
        self.policy = policy
        self.approver = approver
        self.memory: RememberedPermissions = (
            memory if memory is not None else InMemoryRememberedPermissions()
        )
        where = project if project is not None else policy.workspace
        self.project = os.path.realpath(where) if where is not None else ""
        self.yes = yes
        self.denials: Counter[str] = Counter()
        """How often each exact call (tool + arguments) was refused in this run."""
        self._asking = asyncio.Lock()

    async def check(
        self, tool_name: str, args: Mapping[str, Any], *, read_only: bool | None = None
    ) -> str | None:
        """None when the call may run (asking the user if needed), else the refusal text."""
        refusal, _outcome = await self.decide(tool_name, args, read_only=read_only)
        return refusal

    async def decide(
        self, tool_name: str, args: Mapping[str, Any], *, read_only: bool | None = None
    ) -> tuple[str | None, ApprovalOutcome | None]:
        """`check`, with how the call was decided when it could not simply run (None for a
        call the policy allows outright: read-only, an allow rule, a permissive mode)."""
        decision = self.policy.decide(tool_name, args, read_only)
        if decision.kind is DecisionKind.ALLOW:
            return None, None
        if decision.kind is DecisionKind.DENY:
            refusal = self._refuse(
                tool_name,
                args,
                f"{tool_name}: not allowed: {decision.reason}. "
                "Do not retry it; find another way or ask the user to change "
                "the permission rules.",
            )
            if decision.rule is not None:
                by = DecidedBy.DENY_RULE
            elif self.policy.mode is PermissionMode.PLAN:
                by = DecidedBy.PLAN_MODE
            else:
                by = DecidedBy.PERMISSION_MODE
            return refusal, ApprovalOutcome(False, by, decision.reason)
        if self._remembered(tool_name, args):
            return None, ApprovalOutcome(True, DecidedBy.REMEMBERED, decision.reason)
        if self.yes:
            return None, ApprovalOutcome(True, DecidedBy.YES, decision.reason)
        if self.approver is None:
            hint = self.policy.suggest_rules(tool_name, args)
            example = f" such as `{hint[0]}`" if hint else ""
            refusal = self._refuse(
                tool_name,
                args,
                f"{tool_name}: needs the user's approval ({decision.reason}), but this run "
                "cannot ask anyone, so the call was refused. Continue without it if you can; "
                f"the user can rerun with --yes, add an allow rule{example}, or choose a more "
                "permissive --permission-mode.",
            )
            return refusal, ApprovalOutcome(False, DecidedBy.NO_APPROVER, decision.reason)
        async with self._asking:  # one question at a time, even for concurrent calls
            if self._remembered(tool_name, args):
                return None, ApprovalOutcome(True, DecidedBy.REMEMBERED, decision.reason)
            return await self._ask(tool_name, args, decision)

    async def check_call(
        self, call: ToolCall, *, read_only: bool | None = None
    ) -> ToolResult | None:
        """`check` for a model's call: None to run it, else the error result to send back.

        The policy goes by what the called tool declares; `read_only` only matters for a tool
        the policy's declarations do not know.

        The result's metadata holds ``error: "permission"`` and ``denials``: how many times
        this exact call has been refused in the run (1 the first time).
        """
        refusal, _outcome = await self.decide_call(call, read_only=read_only)
        return refusal

    async def decide_call(
        self, call: ToolCall, *, read_only: bool | None = None
    ) -> tuple[ToolResult | None, ApprovalOutcome | None]:
        """`check_call`, with how the call was decided (see `decide`)."""
        message, outcome = await self.decide(call.name, call.arguments, read_only=read_only)
        if message is None:
            return None, outcome
        refusal = ToolResult(
            call.id,
            call.name,
            message,
            is_error=True,
            metadata={
                "error": PERMISSION_ERROR_KIND,
                "denials": self.denials[_call_key(call.name, call.arguments)],
            },
        )
        return refusal, outcome

    async def _ask(
        self, tool_name: str, args: Mapping[str, Any], decision: PermissionDecision
    ) -> tuple[str | None, ApprovalOutcome]:
        remember_as = tuple(self.policy.suggest_rules(tool_name, args))
        request = ApprovalRequest(
            tool_name=tool_name,
            args=args,
            reason=decision.reason,
            mode=self.policy.mode,
            project=self.project,
            remember_as=remember_as,
            rule=decision.rule,
        )
        assert self.approver is not None
        refused_by = DecidedBy.USER
        try:
            answer = ApprovalAnswer(await self.approver(request))
        except Exception as exc:  # an approver bug refuses the call rather than ending the run
            log.warning("permission approver failed for %s: %s", tool_name, exc)
            answer, refused_by = ApprovalAnswer.DENY, DecidedBy.APPROVER_FAILED
        if answer is ApprovalAnswer.DENY:
            refusal = self._refuse(
                tool_name,
                args,
                f"{tool_name}: the user declined this call. Do not repeat it; take another "
                "approach or ask the user what they want.",
            )
            return refusal, ApprovalOutcome(False, refused_by, decision.reason)
        if answer is ApprovalAnswer.ALWAYS:
            for rule in remember_as:
                try:
                    self.memory.remember(self.project, tool_name, rule)
                except Exception as exc:  # the call still runs; only the memory is lost
                    log.warning("could not remember permission %s: %s", rule, exc)
            return None, ApprovalOutcome(True, DecidedBy.USER_ALWAYS, decision.reason)
        return None, ApprovalOutcome(True, DecidedBy.USER, decision.reason)

    def _remembered(self, tool_name: str, args: Mapping[str, Any]) -> bool:
        try:
            rules = self.memory.remembered(self.project, tool_name)
        except Exception as exc:
            log.warning("could not read remembered permissions: %s", exc)
            return False
        return bool(rules) and self.policy.covered(tool_name, args, rules)

    def _refuse(self, tool_name: str, args: Mapping[str, Any], message: str) -> str:
        self.denials[_call_key(tool_name, args)] += 1
        return PermissionDeniedError(message, tool_name=tool_name).message


def _call_key(tool_name: str, args: Mapping[str, Any]) -> str:
    return tool_name + json.dumps(dict(args), sort_keys=True, default=str)
