"""What a shell command line runs, as deny and ask rules see it.

`programs(line)` lists every simple command the line would run, each reduced to the words a
rule is matched against: quotes and backslashes removed, the program by its base name, and
wrappers unwrapped. It is deliberately generous: when in doubt it reports one more thing that
*might* run, because a deny rule that matches too much refuses a call, while one that matches
too little lets the call through.

What is found:

- every part of a list or pipeline: parts are separated by ``;``, ``&``, ``&&``, ``||``, ``|``,
  ``|&``, newlines, and the parentheses of subshells and function bodies; the keywords that
  start a part (``if``, ``then``, ``do``, ``!``, ``{`` ...) and leading ``NAME=value``
  assignments are skipped;
- the program by its base name (``/bin/rm`` and ``\\rm`` and ``"rm"`` are ``rm``);
- the commands inside ``$(...)``, backticks and ``<(...)`` / ``>(...)``, which run too;
- after a wrapper (``env``, ``command``, ``builtin``, ``exec``, ``nice``, ``nohup``,
  ``timeout``, ``sudo``, ``doas``, ``time``, ``xargs``, ``bash``/``sh``/... with ``-c``,
  ``eval``, ``watch`` and the others in `WRAPPERS`): the command starting at *each* later word
  that is not an option, so options with values (``timeout -s KILL 5 rm``) need no table; a
  word with spaces or separators in it (``bash -c 'rm -rf x'``, ``env -S '...'``) is parsed as
  a command line of its own;
- ``xargs`` and ``parallel``: the command they run, with arguments still to come from input;
- ``find``: ``-delete`` counts as ``rm`` with unknown arguments, and ``-exec``/``-execdir``/
  ``-ok``/``-okdir`` commands are found like any other (``{}`` is an unknown argument).

What cannot be known before the shell runs is marked *open*: a word with a ``$`` expansion,
a command substitution, an unquoted glob or brace in the program's name, an unterminated quote,
nesting deeper than `MAX_DEPTH`. An open program (``$(echo rm) -rf x``, ``$CMD x``,
``eval "$x"``) matches every pattern; open arguments match every pattern that could still
match once the unknown words are filled in (see `could_match`).

What is not followed: programs that run commands from a file, their input or their own
language (``bash script.sh``, ``curl ... | sh``, ``python -c``, ``make``), aliases and
functions defined elsewhere, and what a program does with its arguments. Text that only looks
like a command (the lines of a here-document) is matched as if it ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_DEPTH = 8
"""Nesting of substitutions and wrapped command strings followed before giving up (open)."""
MAX_WORDS = 256
"""Words of one command kept for matching; a longer command is open after them."""

WRAPPERS = frozenset(
    {
        "env",
        "command",
        "builtin",
        "exec",
        "eval",
        "nice",
        "nohup",
        "timeout",
        "sudo",
        "doas",
        "su",
        "runuser",
        "time",
        "stdbuf",
        "setsid",
        "ionice",
        "chrt",
        "taskset",
        "unbuffer",
        "chroot",
        "flock",
        "watch",
        "busybox",
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "mksh",
        "ash",
        "yash",
        "fish",
        "xargs",
        "parallel",
    }
)
"""Programs whose later words may name another program that they run."""

INPUT_FED = frozenset({"xargs", "parallel"})
"""Wrappers that append arguments read from their input to the command they run."""

_KEYWORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done"})
_KEYWORDS_BEFORE_CONDITION = frozenset({"while", "until"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_VARIABLE_START = re.compile(r"[A-Za-z_0-9@*#?$!-]")
_SEPARATORS = frozenset(";&|()\n")
_PLAIN_RUN = re.compile(r"[^\s;&|()<>\\'\"`$*?\[{]+")
"""Characters that mean nothing to the shell but themselves, read in one go."""
_QUOTED_RUN = re.compile(r"[^\"\\`$]+")


@dataclass(frozen=True)
class SimpleCommand:
    """One program a command line runs, as rules see it."""

    words: tuple[str, ...]
    """The program's base name and the arguments known before anything unknown; empty when
    the program itself cannot be known."""
    open: bool = False
    """More words follow that are only known when the command runs."""

    @property
    def text(self) -> str:
        return " ".join(self.words)


UNKNOWN = SimpleCommand((), open=True)
"""A program that cannot be known statically: matches every deny and ask pattern."""


@dataclass
class _Word:
    text: str = ""
    """The word's literal characters, quotes and backslashes removed, expansions left out."""
    chars: list[str] = field(default_factory=list)
    """`text` while the word is being read (joined once when it ends)."""
    dynamic: bool = False
    """Part of the word is only known when the shell runs (an expansion or substitution)."""
    pattern: bool = False
    """The word has unquoted glob or brace characters (it may expand to other words)."""


@dataclass
class _Lexed:
    commands: list[list[_Word]]
    nested: list[str]
    """Command lines found inside substitutions (they run as well)."""
    broken: bool
    """Unterminated quotes or substitutions, or an expansion that hides a substitution."""


def programs(line: str, depth: int = 0) -> tuple[SimpleCommand, ...]:
    """Every simple command `line` would run, wrappers unwrapped, nested ones included."""
    if depth > MAX_DEPTH:
        return (UNKNOWN,)
    lexed = _lex(line)
    found: list[SimpleCommand] = [UNKNOWN] if lexed.broken else []
    for words in lexed.commands:
        found.extend(_normalise(words, depth))
    for body in lexed.nested:
        found.extend(programs(body, depth + 1))
    return tuple(dict.fromkeys(found))


# ----------------------------------------------------------------------------------- lexing


def _lex(line: str) -> _Lexed:
    commands: list[list[_Word]] = []
    nested: list[str] = []
    broken = False
    words: list[_Word] = []
    word: _Word | None = None
    drop_next = False  # the next word is a redirection's target, not an argument
    i, n = 0, len(line)

    def current() -> _Word:
        nonlocal word
        if word is None:
            word = _Word()
        return word

    def end_word() -> None:
        nonlocal word, drop_next
        if word is not None:
            word.text = "".join(word.chars)
            if drop_next:
                drop_next = False
            else:
                words.append(word)
            word = None

    def end_command() -> None:
        nonlocal words, drop_next
        end_word()
        drop_next = False
        if words:
            commands.append(words)
        words = []

    while i < n:
        char = line[i]
        if char in " \t":
            end_word()
            i += 1
        elif char == "&" and line.startswith("&>", i):
            end_word()
            i = _redirect_operator(line, i + 1)
            drop_next = True
        elif char in "<>" and line.startswith("(", i + 1):
            body, i = _balanced(line, i + 2)
            if body is None:
                broken = True
                break
            nested.append(body)
            current().dynamic = True
        elif char in "<>":
            if word is not None and word.text.isdigit() and not word.dynamic:
                word = None  # a descriptor number such as the 2 of 2>&1
            end_word()
            i = _redirect_operator(line, i)
            drop_next = True
        elif char in _SEPARATORS:
            end_command()
            i += 1
        elif char == "\\":
            if i + 1 < n and line[i + 1] != "\n":
                current().chars.append(line[i + 1])
            i += 2
        elif char == "'":
            end = line.find("'", i + 1)
            if end < 0:
                broken = True
                break
            current().chars.append(line[i + 1 : end])
            i = end + 1
        elif char == '"':
            i, closed = _double_quoted(line, i + 1, current(), nested)
            if not closed:
                broken = True
                break
        elif char == "`":
            body, i = _backticks(line, i + 1)
            if body is None:
                broken = True
                break
            nested.append(body)
            current().dynamic = True
        elif char == "$":
            i, ok = _dollar(line, i, current(), nested)
            if not ok:
                broken = True
                break
        else:
            target = current()
            run = _PLAIN_RUN.match(line, i)
            if run is not None:
                target.chars.append(run.group())
                i = run.end()
                continue
            target.chars.append(char)
            if char in "*?[{":
                target.pattern = True
            i += 1
    end_command()
    return _Lexed(commands, nested, broken)


def _redirect_operator(line: str, i: int) -> int:
    """Index after a redirection operator starting at `i` (``>``, ``>>``, ``<<<``, ``>&``...)."""
    while i < len(line) and line[i] in "<>&|-":
        i += 1
    return i


def _balanced(line: str, i: int) -> tuple[str | None, int]:
    """The text up to the parenthesis closing one opened just before `i`, and the index after
    it; None when it is never closed. Quotes and backslashes are respected."""
    depth = 1
    start = i
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char == "'":
            end = line.find("'", i + 1)
            if end < 0:
                return None, len(line)
            i = end + 1
            continue
        if char == '"':
            i, closed = _double_quoted(line, i + 1, _Word(), [])
            if not closed:
                return None, len(line)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return line[start:i], i + 1
        i += 1
    return None, len(line)


def _backticks(line: str, i: int) -> tuple[str | None, int]:
    """The command inside backticks starting at `i`, with its backslash escapes undone."""
    body: list[str] = []
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line):
            body.append(line[i + 1] if line[i + 1] in "$`\\" else line[i : i + 2])
            i += 2
            continue
        if char == "`":
            return "".join(body), i + 1
        body.append(char)
        i += 1
    return None, len(line)


def _double_quoted(line: str, i: int, word: _Word, nested: list[str]) -> tuple[int, bool]:
    """Read a double-quoted string whose text starts at `i` into `word`; (index after, closed)."""
    while i < len(line):
        char = line[i]
        if char == '"':
            return i + 1, True
        if char == "\\" and i + 1 < len(line):
            following = line[i + 1]
            if following in '$`"\\':
                word.chars.append(following)
            elif following != "\n":
                word.chars.append(char + following)
            i += 2
        elif char == "`":
            body, i = _backticks(line, i + 1)
            if body is None:
                return i, False
            nested.append(body)
            word.dynamic = True
        elif char == "$":
            i, ok = _dollar(line, i, word, nested, quoted=True)
            if not ok:
                return i, False
        else:
            run = _QUOTED_RUN.match(line, i)
            end = run.end() if run is not None else i + 1  # a lone backslash at the very end
            word.chars.append(line[i:end])
            i = end
    return i, False


def _dollar(
    line: str, i: int, word: _Word, nested: list[str], *, quoted: bool = False
) -> tuple[int, bool]:
    """Read the expansion starting with the ``$`` at `i`; (index after it, well formed)."""
    following = line[i + 1] if i + 1 < len(line) else ""
    if following == "(":
        if line.startswith("((", i + 1):  # arithmetic: no command, but an unknown value
            body, end = _balanced(line, i + 3)
            if body is None:
                return end, False
            word.dynamic = True
            if "$(" in body or "`" in body:
                nested.append(body)
            return end + 1 if line.startswith(")", end) else end, True
        body, end = _balanced(line, i + 2)
        if body is None:
            return end, False
        nested.append(body)
        word.dynamic = True
        return end, True
    if following == "{":
        end = line.find("}", i + 2)
        if end < 0:
            return len(line), False
        inner = line[i + 2 : end]
        word.dynamic = True
        # `${x:-$(cmd)}` runs cmd; finding it means parsing parameter expansions: give up
        return end + 1, not ("$(" in inner or "`" in inner or "<(" in inner)
    if following == "'" and not quoted:  # ANSI-C quoting: escapes could spell anything
        j = i + 2
        while j < len(line) and line[j] != "'":
            j += 2 if line[j] == "\\" else 1
        if j >= len(line):
            return len(line), False
        word.dynamic = True
        return j + 1, True
    if following == '"' and not quoted:  # $"..." is a translated "...": read it as one
        end, closed = _double_quoted(line, i + 2, word, nested)
        return end, closed
    if following and _VARIABLE_START.match(following):
        j = i + 2
        if following.isalpha() or following == "_":
            while j < len(line) and (line[j].isalnum() or line[j] == "_"):
                j += 1
        word.dynamic = True
        return j, True
    word.chars.append("$")
    return i + 1, True


# ---------------------------------------------------------------------------- normalising


def _normalise(words: list[_Word], depth: int) -> list[SimpleCommand]:
    """The simple commands one parsed command runs: itself and, for a wrapper, the command
    starting at each later non-option word (`fed`: its arguments also come from input).

    Each start is looked at once, and a wrapper stops at its first candidate that is a wrapper
    too (that one covers every later word), so even ``env env env ...`` takes linear time.
    """
    found: list[SimpleCommand] = []
    seen: set[tuple[int, bool]] = set()
    pending = [(0, False)]
    while pending:
        start, fed = pending.pop()
        if (start, fed) in seen:
            continue
        seen.add((start, fed))
        index = _program_index(words, start)
        if index >= len(words):
            continue
        program = words[index]
        if program.dynamic or program.pattern:
            found.append(UNKNOWN)
            continue
        name = _basename(program.text)
        args = words[index + 1 : index + MAX_WORDS]
        known: list[str] = [name]
        for arg in args:
            if arg.dynamic:
                break
            known.append(arg.text)
        is_open = fed or len(known) <= len(args) or index + MAX_WORDS < len(words)
        found.append(SimpleCommand(tuple(known), open=is_open))
        if name == "find":
            found.extend(_find_actions(words[index + 1 :], depth))
        if name not in WRAPPERS:
            continue
        fed = fed or name in INPUT_FED
        for candidate in range(index + 1, len(words)):
            arg = words[candidate]
            if arg.text.startswith(("-", "+")) and not arg.dynamic:
                continue
            if not arg.dynamic and any(c in arg.text for c in " \t\n;&|()<>`$"):
                # a command line in one word (`sh -c '...'`), not a program's name
                nested = programs(arg.text, depth + 1)
                found.extend(SimpleCommand(c.words, open=c.open or fed) for c in nested)
                continue
            pending.append((candidate, fed))
            inner = _program_index(words, candidate)
            if inner < len(words) and _basename(words[inner].text) in WRAPPERS:
                break
    return found


def _program_index(words: list[_Word], i: int) -> int:
    """Index of the program word of the command starting at `i` (past keywords, assignments)."""
    while i < len(words):
        text = words[i].text
        if not words[i].dynamic and text in _KEYWORDS | _KEYWORDS_BEFORE_CONDITION:
            i += 1
        elif not words[i].dynamic and text == "function":
            i += 2  # `function name { ...`: the name is defined, not run
        elif _ASSIGNMENT.match(text):
            i += 1
        else:
            return i
    return i


def _basename(text: str) -> str:
    base = text.rstrip("/").rsplit("/", 1)[-1]
    return base or text


def _find_actions(args: list[_Word], depth: int) -> list[SimpleCommand]:
    found: list[SimpleCommand] = []
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "-delete":
            found.append(SimpleCommand(("rm",), open=True))
        if text in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(args) and args[end].text not in (";", "+"):
                end += 1
            command = [
                _Word(a.text, dynamic=a.dynamic or "{}" in a.text, pattern=a.pattern)
                for a in args[i + 1 : end]
            ]
            found.extend(_normalise(command, depth + 1))
            i = end
        i += 1
    return found


# ------------------------------------------------------------------------------- matching


def could_match(pattern: re.Pattern[str], glob: str, command: SimpleCommand) -> bool:
    """Whether the command-style `glob` (compiled as `pattern`) matches `command` now or
    could once its unknown words are filled in."""
    if not command.words:
        return True
    text = command.text
    if pattern.fullmatch(text) is not None:
        return True
    return command.open and _extendable(glob, text + " ")


def _extendable(glob: str, prefix: str) -> bool:
    """Whether some text starting with `prefix` matches the command-style `glob` (``*`` any
    text, ``?`` one character, ``\\`` quotes the next character)."""
    tokens: list[str | None] = []  # a literal character, "" for `?`, None for `*`
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "\\" and i + 1 < len(glob):
            tokens.append(glob[i + 1])
            i += 2
            continue
        tokens.append(None if char == "*" else "" if char == "?" else char)
        i += 1
    states = _closure({0}, tokens)
    for char in prefix:
        step: set[int] = set()
        for state in states:
            if state == len(tokens):
                continue
            token = tokens[state]
            if token is None:
                step.add(state)
            elif token == "" or token == char:
                step.add(state + 1)
        states = _closure(step, tokens)
        if not states:
            return False
    return True


def _closure(states: set[int], tokens: list[str | None]) -> set[int]:
    """`states` plus those reached by letting a `*` match nothing."""
    out = set(states)
    stack = list(states)
    while stack:
        state = stack.pop()
        if state < len(tokens) and tokens[state] is None and state + 1 not in out:
            out.add(state + 1)
            stack.append(state + 1)
    return out
