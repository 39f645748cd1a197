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
  ``-ok``/``-okdir`` commands are found like any other (``{}`` is an unknown argument);
- ``git``: also as ``git <subcommand> ...`` with the options before the subcommand left out
  (``git -C . --no-pager -c k=v push`` is ``git push``), the command lines in ``-c`` values and
  in variables that name a program (``GIT_PAGER``, ``GIT_SSH_COMMAND``, ``*EDITOR`` ...), and
  the commands ``submodule foreach``, ``bisect run``, ``rebase --exec`` ... run;
- command substitutions written inside quotes (``x='$(rm y)'``): a later ``eval``, ``PS4``,
  arithmetic or ``${x@P}`` runs them.

What changes the meaning of later names, or runs text the parser cannot see, is *closed*: it
stands for any command (a `SimpleCommand` with a `construct` saying why), so it matches every
deny and ask rule of the tool. These are ``alias`` definitions, ``trap`` with a command,
``coproc``, ``hash -p``, ``enable``, ``BASH_CMDS``/``BASH_ALIASES``, assignments to ``PS4``,
``PROMPT_COMMAND`` or ``BASH_ENV``, ``${x@P}``, a shell or ``source`` reading commands from its
input (``echo ... | sh``, ``bash <<< ...``, ``source <(...)``), and for ``git``: a subcommand
that is not one of git's own (it may be an alias), ``-c alias.*=``, and ``git config``
setting an alias or an include (these match every rule that starts with ``git``).

What cannot be known before the shell runs is marked *open*: a word with a ``$`` expansion,
a command substitution, an unquoted glob or brace in the program's name, an unterminated quote,
nesting deeper than `MAX_DEPTH`. An open program (``$(echo rm) -rf x``, ``$CMD x``,
``eval "$x"``) matches every pattern; open arguments match every pattern that could still
match once the unknown words are filled in (see `could_match`).

What is not followed: programs that run commands from a file or their own language
(``bash script.sh``, ``python -c``, ``make``), shell aliases and functions defined in
earlier calls or in files, a program copied or linked under another name, and what a program
does with its arguments. Text that only looks like a command (the lines of a here-document)
is matched as if it ran. Rules are a guard against mistakes, read from the text of the
command; the sandbox is what contains a command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

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
        # tracing, isolation and resource tools that run the command they are given
        "strace",
        "ltrace",
        "script",
        "unshare",
        "setpriv",
        "prlimit",
        "nsenter",
        "firejail",
        "bwrap",
        "systemd-run",
        "fakeroot",
        "fakechroot",
        "proot",
        "valgrind",
        "catchsegv",
        "cpulimit",
        "trickle",
        "torsocks",
        "tsocks",
        "proxychains",
        "proxychains4",
        "faketime",
        "chpst",
        "setarch",
        "linux32",
        "linux64",
        "numactl",
        "cgexec",
        "sg",
        "pkexec",
        "eatmydata",
        "nocache",
        "chronic",
        "rlwrap",
        "tini",
        "dumb-init",
        "ssh-agent",
        "dbus-run-session",
        "xvfb-run",
        "gdb",
        "perf",
        "toybox",
        "direnv",
        # environment managers whose `run`/`exec` runs a command
        "uv",
        "uvx",
        "poetry",
        "pipenv",
        "pdm",
        "hatch",
        "npx",
        "pnpx",
        "bunx",
    }
)
"""Programs whose later words may name another program that they run."""

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish"})
"""Shells: with ``-c`` their command line is followed; reading commands from their input,
they fail closed."""

_SHELL_OPTIONS_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_INPUT_FILES = ("-", "/dev/stdin", "/dev/fd/", "/proc/")
"""Operands of a shell or ``source`` that are its input rather than a script on disk."""
_HIDDEN_TABLES = ("BASH_CMDS", "BASH_ALIASES")
"""Bash arrays that rename programs (the same as ``hash -p`` and ``alias``)."""
_EXPANDED_LATER = re.compile(r"(?:PS[0-4]|PROMPT_COMMAND|BASH_ENV)\+?=")
"""Assignments whose value the shell expands or runs later (``PS4`` under ``set -x``)."""
_PROGRAM_VARIABLE = re.compile(
    r"(?:[A-Z_]*PAGER|[A-Z_]*EDITOR|VISUAL|GIT_SSH(?:_COMMAND)?|GIT_EXTERNAL_DIFF"
    r"|[A-Z_]*ASKPASS|GIT_CONFIG_VALUE_[0-9]+)="
)
"""Variables whose value is a command line some program runs (git's pager, editor, ssh)."""

_COVERS_LATER_WORDS = WRAPPERS | {"git", "find"}
"""Programs whose own handling finds whatever their later words run."""

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
    construct: str = ""
    """Why this command stands for whatever it might run: a shell construct rules cannot see
    through (``alias``, ``trap`` ...), said in words for the refusal; empty otherwise."""

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
    prompt: bool = False
    """The word has a ``${name@P}`` expansion, which runs the substitutions in the value."""


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
    return _Lexer(line).run()


class _Lexer:
    """One pass over a command line: the words of each simple command, the command lines
    nested in substitutions, and whether the line is broken."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.commands: list[list[_Word]] = []
        self.nested: list[str] = []
        self.words: list[_Word] = []
        self.word: _Word | None = None
        self.drop_next = False
        """The next word is a redirection's target, not an argument."""

    def run(self) -> _Lexed:
        i, broken = 0, False
        while i < len(self.line):
            after = self._step(i)
            if after is None:
                broken = True
                break
            i = after
        self.end_command()
        return _Lexed(self.commands, self.nested, broken)

    def current(self) -> _Word:
        if self.word is None:
            self.word = _Word()
        return self.word

    def end_word(self) -> None:
        word = self.word
        if word is not None:
            word.text = "".join(word.chars)
            self.nested.extend(_quoted_substitutions(word.text))
            if self.drop_next:
                self.drop_next = False
            else:
                self.words.append(word)
            self.word = None

    def end_command(self) -> None:
        self.end_word()
        self.drop_next = False
        if self.words:
            self.commands.append(self.words)
        self.words = []

    def _step(self, i: int) -> int | None:
        """Read what starts at `i`; the index after it, or None when the line is broken there."""
        line, char = self.line, self.line[i]
        if char in " \t":
            self.end_word()
            return i + 1
        if char == "&" and line.startswith("&>", i):
            self.end_word()
            self.drop_next = True
            return _redirect_operator(line, i + 1)
        if char in "<>" and line.startswith("(", i + 1):
            body, after = _balanced(line, i + 2)
            return self._substitution(body, after)
        if char in "<>":
            word = self.word
            if word is not None and word.text.isdigit() and not word.dynamic:
                self.word = None  # a descriptor number such as the 2 of 2>&1
            self.end_word()
            self.drop_next = True
            return _redirect_operator(line, i)
        if char in _SEPARATORS:
            self.end_command()
            return i + 1
        return self._quoted_or_plain(i)

    def _quoted_or_plain(self, i: int) -> int | None:
        """Read a quote, an escape, an expansion or plain characters of the current word."""
        line, char = self.line, self.line[i]
        if char == "\\":
            if i + 1 < len(line) and line[i + 1] != "\n":
                self.current().chars.append(line[i + 1])
            return i + 2
        if char == "'":
            end = line.find("'", i + 1)
            if end < 0:
                return None
            self.current().chars.append(line[i + 1 : end])
            return end + 1
        if char == '"':
            after, closed = _double_quoted(line, i + 1, self.current(), self.nested)
            return after if closed else None
        if char == "`":
            body, after = _backticks(line, i + 1)
            return self._substitution(body, after)
        if char == "$":
            after, ok = _dollar(line, i, self.current(), self.nested)
            return after if ok else None
        target = self.current()
        run = _PLAIN_RUN.match(line, i)
        if run is not None:
            target.chars.append(run.group())
            return run.end()
        target.chars.append(char)
        if char in "*?[{":
            target.pattern = True
        return i + 1

    def _substitution(self, body: str | None, after: int) -> int | None:
        """A command substitution (or process substitution) whose text is `body`: it runs too,
        and makes the current word known only at run time."""
        if body is None:
            return None
        self.nested.append(body)
        self.current().dynamic = True
        return after


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
        word.prompt = word.prompt or inner.endswith("@P")
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


def _normalise(words: list[_Word], depth: int, *, wrapped: bool = False) -> list[SimpleCommand]:
    """The simple commands one parsed command runs: itself and, for a wrapper, the command
    starting at each later non-option word (`fed`: its arguments also come from input).
    `wrapped`: the words are what a wrapper was given (each may start the command it runs).

    Each start is looked at once, and a wrapper stops at its first candidate that is a wrapper
    too, or ``git`` or ``find`` (that one covers every later word), so even ``env env env ...``
    takes linear time.
    """
    if depth > MAX_DEPTH:
        return [UNKNOWN]
    found: list[SimpleCommand] = []
    seen: set[tuple[int, bool]] = set()
    pending: list[tuple[int, bool]] = []
    if wrapped:
        _queue_candidates(words, 0, False, depth, found, pending)
    else:
        pending.append((0, False))
    found.extend(_assigned_programs(words, depth))
    while pending:
        start, fed = pending.pop()
        if (start, fed) in seen:
            continue
        seen.add((start, fed))
        index = _program_index(words, start)
        if index >= len(words):
            continue
        program = words[index]
        if program.dynamic or (program.pattern and _may_expand(program.text)):
            found.append(UNKNOWN)
            continue
        name = _basename(program.text)
        args = words[index + 1 : index + MAX_WORDS]
        known = _known_words(name, args)
        is_open = fed or len(known) <= len(args) or index + MAX_WORDS < len(words)
        found.append(SimpleCommand(tuple(known), open=is_open))
        too_long = index + MAX_WORDS < len(words)
        found.extend(_unfollowable(name, args, too_long))
        if name == "find":
            found.extend(_find_actions(words[index + 1 :], depth))
        if name.startswith("git-") and name[4:] in GIT_COMMANDS:  # git-core/git-push
            git_form = ("git", name[4:], *known[1:])
            found.append(SimpleCommand(git_form, open=is_open))
        if name == "git" and too_long:
            found.append(_closed("a git command too long to check", "git"))
        elif name == "git":
            found.extend(_git_commands(args, depth, fed))
        if name in WRAPPERS:
            _queue_candidates(words, index + 1, fed or name in INPUT_FED, depth, found, pending)
    return found


def _known_words(name: str, args: list[_Word]) -> list[str]:
    """`name` and the arguments before the first one only the shell knows."""
    known = [name]
    for arg in args:
        if arg.dynamic:
            break
        known.append(arg.text)
    return known


def _queue_candidates(
    words: list[_Word],
    first: int,
    fed: bool,
    depth: int,
    found: list[SimpleCommand],
    pending: list[tuple[int, bool]],
) -> None:
    """Queue each word from `first` on that may start the command a wrapper runs; a word that
    is itself a command line (``sh -c 'rm -rf x'``) is parsed as one."""
    for candidate in range(first, len(words)):
        arg = words[candidate]
        if arg.text.startswith(("-", "+")) and not arg.dynamic:
            value = _glued_value(arg.text)
            if any(c in value for c in " \t\n;&|()<>`$"):  # `env -S'rm -rf x'`
                found.extend(replace(c, open=True) for c in programs(value, depth + 1))
            continue
        if not arg.dynamic and any(c in arg.text for c in " \t\n;&|()<>`$"):
            # a command line in one word (`sh -c '...'`), not a program's name
            nested = programs(arg.text, depth + 1)
            found.extend(replace(c, open=c.open or fed) for c in nested)
            continue
        pending.append((candidate, fed))
        inner = _program_index(words, candidate)
        if inner < len(words) and _basename(words[inner].text) in _COVERS_LATER_WORDS:
            break


def _may_expand(text: str) -> bool:
    """Whether a word with unquoted glob or brace characters may expand to other words: a
    lone ``[`` (the test command) or ``{x}`` stays itself."""
    if "*" in text or "?" in text:
        return True
    if "[" in text and "]" in text[text.index("[") + 1 :]:
        return True
    if "{" in text:
        inside = text[text.index("{") + 1 :]
        return "}" in inside and ("," in inside or ".." in inside)
    return False


def _glued_value(option: str) -> str:
    """The value written in one word with its option: ``--opt=VALUE``, ``-xVALUE``."""
    if option.startswith("--"):
        return option.partition("=")[2]
    return option[2:]


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


# ----------------------------------------------------------- what rules cannot follow


def _closed(construct: str, *words: str) -> SimpleCommand:
    """A command that stands for anything `construct` might run: it matches every pattern
    that starts with `words` (every pattern when there are none)."""
    return SimpleCommand(tuple(words), open=True, construct=construct)


def _quoted_substitutions(text: str) -> list[str]:
    """Command substitutions written inside quotes (``x='$(rm -rf y)'``): the shell runs
    them when the text is expanded again (``eval``, ``PS4``, arithmetic, ``${x@P}``), so they
    are matched as if they ran. Unbalanced ones are left alone."""
    if "$(" not in text and "`" not in text:
        return []
    bodies: list[str] = []
    i = 0
    while i < len(text):
        body: str | None = None
        if text.startswith("$(", i):
            body, end = _balanced(text, i + 2)
        elif text[i] == "`":
            body, end = _backticks(text, i + 1)
        else:
            i += 1
            continue
        if body is None:
            break  # the shell rejects text with an unclosed substitution (and rescanning is slow)
        bodies.append(body)
        i = end
    return bodies


def _assigned_programs(words: list[_Word], depth: int) -> list[SimpleCommand]:
    """Words anywhere in a command that change what later names or text run (closed), and
    the command lines assigned to variables that name a program to run (``GIT_PAGER=...``)."""
    found: list[SimpleCommand] = []
    for word in words:
        assigned = _PROGRAM_VARIABLE.match(word.text)
        if assigned is not None and not word.dynamic:
            value = word.text[assigned.end() :]
            found.extend(replace(c, open=True) for c in programs(value, depth + 1))
    return found + _closed_constructs(words)


def _closed_constructs(words: list[_Word]) -> list[SimpleCommand]:
    for word in words:
        if word.prompt:
            return [_closed("`${name@P}` runs the command substitutions in a variable's value")]
        if any(table in word.text for table in _HIDDEN_TABLES):
            return [_closed("BASH_CMDS and BASH_ALIASES give programs other names")]
        if _EXPANDED_LATER.match(word.text):
            name = word.text.split("=", 1)[0].rstrip("+")
            return [_closed(f"the shell expands or runs the value of {name} later")]
    return []


_CONSTRUCTS = SHELLS | {
    "alias",
    "trap",
    "coproc",
    "hash",
    "enable",
    "source",
    ".",
    "at",
    "batch",
    "mapfile",
    "readarray",
}
"""Programs `_unfollowable` looks at."""


def _unfollowable(name: str, args: list[_Word], too_long: bool) -> list[SimpleCommand]:
    """A command that changes what later names mean, or runs text rules cannot see: closed.
    `too_long`: `args` are only the first `MAX_WORDS` of them."""
    if name not in _CONSTRUCTS:
        return []
    if too_long:
        return [_closed(f"`{name}` with more words than can be checked")]
    operands = [a for a in args if a.dynamic or not a.text.startswith("-")]
    if name == "alias" and any(a.dynamic or "=" in a.text for a in args):
        return [_closed("`alias` gives a command another name")]
    if name == "trap" and _trap_sets_a_command(args):
        return [_closed("`trap` sets commands that run later")]
    if name == "coproc":
        return [_closed("`coproc` runs a command in the background")]
    if name == "hash" and any(a.dynamic or (a.text[:1] == "-" and "p" in a.text) for a in args):
        return [_closed("`hash -p` gives a program another name")]
    if name == "enable" and any(a.dynamic or not set(a.text) <= set("-aps") for a in args):
        return [_closed("`enable` loads or hides shell builtins")]
    if name in ("at", "batch") and not any(a.text in ("-l", "-r", "-d", "-c") for a in args):
        return [_closed(f"`{name}` runs commands it reads, later")]
    if name in ("mapfile", "readarray") and any(a.text.startswith("-C") for a in args):
        return [_closed(f"`{name} -C` runs a command for the lines it reads")]
    if name in ("source", ".") and (not operands or _is_input(operands[0])):
        return [_closed(f"`{name}` reads commands from its input")]
    if name in SHELLS and _reads_input(args):
        return [_closed(f"`{name}` reads commands from its input")]
    return []


def _trap_sets_a_command(args: list[_Word]) -> bool:
    """``trap ACTION SIGNAL...``, unless ACTION resets (``-``, a signal number) or ignores
    (``''``) the signals, or only lists (``-p``, ``-l``)."""
    rest = args[1:] if args and args[0].text == "--" else args
    if not rest or rest[0].text in ("-p", "-l"):
        return False
    action = rest[0]
    return action.dynamic or not (action.text in ("", "-") or action.text.isdigit())


def _is_input(word: _Word) -> bool:
    return word.dynamic or word.text == "-" or word.text.startswith(_INPUT_FILES[1:])


def _reads_input(args: list[_Word]) -> bool:
    """Whether a shell given `args` reads its commands from input (no ``-c``, no script)."""
    i = 0
    while i < len(args):
        text = args[i].text
        if args[i].dynamic:
            return True
        if text in _SHELL_OPTIONS_WITH_VALUE:
            i += 2
            continue
        if text == "--":
            i += 1
            break
        if text.startswith("-") and not text.startswith("--") and "c" in text:
            return False  # -c: the command line is followed as a wrapped word
        if text.startswith("-") and "s" in text.lstrip("-") and not text.startswith("--"):
            return True
        if not text.startswith(("-", "+")):
            break
        i += 1
    return i >= len(args) or _is_input(args[i])


# ---------------------------------------------------------------------------------- git

GIT_OPTIONS_WITH_VALUE = frozenset(
    {
        "-C",
        "-c",
        "--git-dir",
        "--work-tree",
        "--namespace",
        "--super-prefix",
        "--config-env",
        "--exec-path",
        "--attr-source",
        "--list-cmds",
    }
)
"""Options before git's subcommand that take the next word as their value."""

GIT_COMMANDS = frozenset(
    """add am annotate apply archive bisect blame branch bugreport bundle cat-file
    check-attr check-ignore check-mailmap check-ref-format checkout checkout-index
    cherry cherry-pick citool clean clone column commit commit-graph commit-tree config
    count-objects credential credential-cache credential-store daemon describe diagnose
    diff diff-files diff-index diff-tree difftool fast-export fast-import fetch
    fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo format-patch fsck
    fsck-objects gc get-tar-commit-id grep gui hash-object help hook http-backend
    http-fetch http-push imap-send index-pack init init-db instaweb interpret-trailers
    log ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base
    merge-file merge-index merge-one-file merge-tree mergetool mktag mktree
    multi-pack-index mv name-rev notes p4 pack-objects pack-redundant pack-refs patch-id
    prune prune-packed pull push quiltimport range-diff read-tree rebase receive-pack
    reflog remote repack replace replay request-pull rerere reset restore rev-list
    rev-parse revert rm send-email send-pack shortlog show show-branch show-index
    show-ref sparse-checkout stage stash status stripspace submodule svn switch
    symbolic-ref tag unpack-file unpack-objects update-index update-ref
    update-server-info upload-archive upload-pack var verify-commit verify-pack
    verify-tag version whatchanged worktree write-tree""".split()  # noqa: SIM905
)
"""Git's own commands (``git --list-cmds=main``); any other word may be an alias."""

GIT_COMMANDS_THAT_RUN = frozenset(
    {"bisect", "submodule", "rebase", "difftool", "mergetool", "filter-branch", "worktree"}
)
"""Git commands that take a command to run among their arguments (``bisect run``,
``submodule foreach``, ``rebase --exec``, ``difftool --extcmd``, ``filter-branch --*-filter``)."""

_GIT_ALIAS_KEYS = ("alias.", "include.", "includeif.")


def _git_commands(args: list[_Word], depth: int, fed: bool) -> list[SimpleCommand]:
    """What ``git <args>`` runs, as rules see it: ``git`` and its subcommand with the global
    options before it left out (``git -C . --no-pager push`` is ``git push``), the command
    lines in ``-c`` values, and the commands git subcommands run. An alias (from ``-c``,
    ``git config`` or a word that is not a git command) could be any git command: closed."""
    found: list[SimpleCommand] = []
    i = 0
    while i < len(args) and (args[i].dynamic or args[i].text.startswith("-")):
        word = args[i]
        if word.dynamic:
            return [_closed("git options that only the shell knows could set an alias", "git")]
        flag, has_value, value = word.text.partition("=")
        if flag in GIT_OPTIONS_WITH_VALUE and not has_value and flag != "--exec-path":
            following = args[i + 1] if i + 1 < len(args) else _Word()
            value, i = following.text, i + 1
            if following.dynamic and flag in ("-c", "--config-env"):
                return [_closed("a git `-c` value that only the shell knows", "git")]
        if flag in ("-c", "--config-env"):
            key, _, setting = value.partition("=")
            if key.lower().startswith(_GIT_ALIAS_KEYS):
                return [_closed(f"`git {flag} {key}=...` defines a git alias", "git")]
            found.extend(replace(c, open=True) for c in programs(setting, depth + 1))
        i += 1
    if i >= len(args):
        return found
    rest = args[i:]
    sub = rest[0].text
    if sub not in GIT_COMMANDS:
        return [*found, _closed(f"`git {sub}` is not a git command; it may be an alias", "git")]
    known = _known_words("git", rest)
    found.append(SimpleCommand(tuple(known), open=fed or len(known) <= len(rest)))
    if sub == "config" and _sets_git_alias(rest[1:]):
        return [*found, _closed("`git config` defines a git alias or includes a file", "git")]
    if sub in GIT_COMMANDS_THAT_RUN:
        found.extend(_normalise(rest[1:], depth + 1, wrapped=True))
    return found


def _sets_git_alias(args: list[_Word]) -> bool:
    reading = {"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list"}
    if any(a.text in reading for a in args):
        return False
    return any(a.dynamic or a.text.lower().startswith(_GIT_ALIAS_KEYS) for a in args)


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
