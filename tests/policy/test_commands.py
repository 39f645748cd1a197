"""Deny rules on commands hold against other spellings; allow rules stay strict.

The parser (`journeyman.policy.commands`) is tested through the policy for the spellings a
user relies on, and directly by properties: it never fails, round-trips quoted words, sees
through wrappers and separators, and fails closed on what only the shell can know.
"""

from __future__ import annotations

import re
import shlex
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from journeyman.policy.commands import (
    MAX_DEPTH,
    UNKNOWN,
    SimpleCommand,
    _extendable,
    could_match,
    programs,
)
from journeyman.policy.permissions import ArgKind, DecisionKind, PermissionPolicy, _compile

DENY_RM = PermissionPolicy("bypass", deny=["run_command(rm *)"])


def verdict(policy: PermissionPolicy, command: str) -> DecisionKind:
    return policy.decide("run_command", {"command": command}).kind


SPELLINGS = [
    "rm -rf build",
    "\\rm -rf build",
    "r\\m -rf build",
    "'rm' -rf build",
    '"rm" -rf build',
    "r''m -rf build",
    "/bin/rm -rf build",
    "/usr/bin/env rm -rf build",
    "command rm -rf build",
    "command -p rm -rf build",
    "builtin rm -rf build",
    "exec rm -rf build",
    "env rm -rf build",
    "env -i PATH=/bin HOME=/tmp rm -rf build",
    "env -S 'rm -rf build'",
    "X=1 rm -rf build",
    "bash -c 'rm -rf build'",
    "sh -c 'rm -rf build'",
    "bash -lc 'cd / && rm -rf build'",
    "sh -c \"sh -c 'rm -rf build'\"",
    "sudo bash -c 'nice rm -rf build'",
    "ls | xargs rm",
    "ls | xargs -0 -I{} rm -f {}",
    "xargs rm < files.txt",
    "find . -delete",
    "find build -name '*.o' -delete",
    "find . -name '*.o' -exec rm {} \\;",
    "find . -execdir rm -f {} +",
    "$(echo rm) -rf build",
    "`echo rm` -rf build",
    "$RM -rf build",
    "${RM} -rf build",
    '"$RM" -rf build',
    "X=rm; $X -rf build",
    "eval 'rm -rf build'",
    'eval "$CMD"',
    "$'rm' -rf build",
    "/b?n/rm -rf build",
    "sudo rm -rf build",
    "sudo -u root -- rm -rf build",
    "doas rm -rf build",
    "nice rm -rf build",
    "nice -n 10 rm -rf build",
    "nohup rm -rf build &",
    "timeout 5 rm -rf build",
    "timeout -s KILL 5s rm -rf build",
    "time rm -rf build",
    "time -p rm -rf build",
    "stdbuf -oL rm -rf build",
    "make && rm -rf build",
    "make; rm -rf build",
    "make || rm -rf build",
    "make | rm -rf build",
    "make & rm -rf build",
    "make\nrm -rf build",
    "(rm -rf build)",
    "{ rm -rf build; }",
    "if true; then rm -rf build; fi",
    "for f in a b; do rm $f; done",
    "f() { rm -rf build; }; f",
    "echo $(rm -rf build)",
    'echo "$(rm -rf build)"',
    "echo `rm -rf build`",
    "cat <(rm -rf build)",
    "echo ${X:-$(rm -rf build)}",
    "rm $TARGET",
    "echo 'unterminated; rm -rf build",
]


@pytest.mark.parametrize("command", SPELLINGS)
def test_a_deny_rule_holds_against_every_spelling(command: str) -> None:
    assert verdict(DENY_RM, command) is DecisionKind.DENY


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "echo rm",
        "git rm --cached x",
        "rmdir build",
        "grep -rn 'rm -rf' .",
        "echo $(date)",
        "echo $HOME",
        "make clean 2>&1 | tee log.txt",
        "python -m pytest -q",
        "env PYTHONPATH=src pytest",
        "sudo -n true",
        "bash -c 'ls /tmp/rm -rf'",
        "sh -c \"echo 'rm x'\"",
        'git commit -m "drop the rm step"',
    ],
)
def test_deny_rules_do_not_refuse_what_does_not_run_the_program(command: str) -> None:
    assert verdict(DENY_RM, command) is DecisionKind.ALLOW


def test_other_rules_see_the_unwrapped_program_and_its_arguments() -> None:
    policy = PermissionPolicy(
        "trusted", deny=["run_command(git push --force*)"], ask=["run_command(curl *)"]
    )
    assert verdict(policy, "env GIT_TRACE=1 git push --force origin") is DecisionKind.DENY
    assert verdict(policy, "/usr/bin/git push --force") is DecisionKind.DENY
    assert verdict(policy, "git push $(echo --force)") is DecisionKind.DENY  # could be
    assert verdict(policy, "git push origin main") is DecisionKind.ALLOW
    assert verdict(policy, "timeout 9 \\curl -s example.org") is DecisionKind.ASK
    assert verdict(policy, "echo curl") is DecisionKind.ALLOW


def test_an_unknown_program_matches_every_deny_rule() -> None:
    policy = PermissionPolicy("bypass", deny=["run_command(git push*)"])
    assert verdict(policy, "$(printf git) push") is DecisionKind.DENY
    assert verdict(policy, "eval $DEPLOY") is DecisionKind.DENY
    assert verdict(policy, "git status") is DecisionKind.ALLOW


ALLOW_STATUS = PermissionPolicy("default", allow=["run_command(git status*)"])


@pytest.mark.parametrize(
    "command",
    [
        "git status; rm -rf x",
        "git status && rm -rf x",
        "git status || rm -rf x",
        "git status | rm -rf x",
        "git status & rm -rf x",
        "git status\nrm -rf x",
        "git status $(rm -rf x)",
        "git status `rm -rf x`",
        "git status > setup.py",
        "git status <(rm -rf x)",
        "git status 'unterminated",
        "env git status",
    ],
)
def test_an_allow_rule_needs_every_part_allowed(command: str) -> None:
    assert verdict(ALLOW_STATUS, command) is DecisionKind.ASK


def test_an_allow_rule_still_allows_what_it_names() -> None:
    assert verdict(ALLOW_STATUS, "git status --short") is DecisionKind.ALLOW
    assert verdict(ALLOW_STATUS, "git status 2>&1") is DecisionKind.ALLOW


# ------------------------------------------------------------------------------- properties

WORD = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=12,
)
PLAIN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-/", min_size=1, max_size=10)
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8).filter(
    lambda n: (
        n not in {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "function"}
    )
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_the_parser_never_fails_on_any_text(line: str) -> None:
    found = programs(line)
    assert isinstance(found, tuple)
    assert all(isinstance(c, SimpleCommand) for c in found)


@settings(max_examples=200, deadline=None)
@given(NAME, st.lists(WORD, max_size=5))
def test_quoted_words_come_back_unquoted(program: str, args: list[str]) -> None:
    line = shlex.join([program, *args])
    assert SimpleCommand((program, *args)) in programs(line)


@settings(max_examples=200, deadline=None)
@given(NAME, st.lists(PLAIN, max_size=4))
def test_backslashes_and_directories_do_not_hide_the_program(program: str, args: list[str]) -> None:
    expected = SimpleCommand((program, *args))
    for spelled in (f"\\{program}", f"/usr/local/bin/{program}", f"'{program}'"):
        assert expected in programs(" ".join([spelled, *args]))


WRAPPER_PREFIXES = st.sampled_from(
    [
        "env",
        "env -i",
        "env A=1 B=2",
        "command",
        "builtin",
        "exec",
        "nice",
        "nice -n 5",
        "nohup",
        "timeout 10",
        "timeout -k 1 10",
        "sudo",
        "sudo -u root",
        "time",
        "xargs",
        "xargs -0 -n 1",
        "A=1",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(WRAPPER_PREFIXES, min_size=1, max_size=4), st.lists(PLAIN, max_size=3))
def test_wrappers_in_any_order_and_number_do_not_hide_the_program(
    wrappers: list[str], args: list[str]
) -> None:
    line = " ".join([*wrappers, "rm", "-rf", *args])
    assert verdict(DENY_RM, line) is DecisionKind.DENY
    assert verdict(DENY_RM, f"bash -c {shlex.quote(line)}") is DecisionKind.DENY


SEPARATORS = st.sampled_from([";", "&&", "||", "|", "&", "\n", "|&", ";\n"])


@settings(max_examples=300, deadline=None)
@given(st.lists(PLAIN, min_size=1, max_size=3), SEPARATORS, st.lists(PLAIN, max_size=3))
def test_any_part_of_a_list_or_pipeline_is_seen(
    before: list[str], separator: str, after: list[str]
) -> None:
    assume(before[0] not in {"-", "--"})
    line = f"{shlex.join(before)} {separator} rm -rf x {shlex.join(after)}"
    assert verdict(DENY_RM, line) is DecisionKind.DENY


DYNAMIC_PROGRAMS = st.sampled_from(["$(x)", "`x`", "$X", "${X}", '"$X"', "$'x'", "$((1))"])
ANY_RULE = st.sampled_from(["git push*", "rm *", "curl *", "x", "*--force*"])


@settings(max_examples=200, deadline=None)
@given(st.lists(PLAIN, max_size=2), SEPARATORS, DYNAMIC_PROGRAMS, ANY_RULE)
def test_a_program_only_the_shell_knows_fails_closed(
    before: list[str], separator: str, program: str, rule: str
) -> None:
    policy = PermissionPolicy("bypass", deny=[f"run_command({rule})"])
    prefix = f"{shlex.join(before)} {separator} " if before else ""
    assert verdict(policy, f"{prefix}{program} arg") is DecisionKind.DENY
    assert UNKNOWN in programs(f"{prefix}{program} arg")


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="ab *?\\", max_size=8),
    st.text(alphabet="ab ", max_size=6),
    st.text(alphabet="ab ", max_size=6),
)
def test_a_prefix_is_extendable_whenever_some_extension_matches(
    glob: str, prefix: str, suffix: str
) -> None:
    compiled = _compile(glob, ArgKind.COMMAND)
    if compiled.fullmatch(prefix + suffix):
        assert _extendable(glob, prefix)
    if not _extendable(glob, prefix):
        assert not compiled.fullmatch(prefix + suffix)


@settings(max_examples=200, deadline=None)
@given(st.lists(PLAIN, min_size=1, max_size=3), st.text(alphabet="ab -*", max_size=8))
def test_open_commands_match_at_least_what_their_known_words_match(
    words: list[str], glob: str
) -> None:
    compiled = _compile(glob, ArgKind.COMMAND)
    closed = SimpleCommand(tuple(words))
    opened = SimpleCommand(tuple(words), open=True)
    assert could_match(compiled, glob, closed) <= could_match(compiled, glob, opened)
    assert could_match(compiled, glob, UNKNOWN)


@pytest.mark.parametrize("depth", [1, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 4])
def test_nesting_is_followed_to_max_depth_then_fails_closed(depth: int) -> None:
    line = "rm -rf x"
    for _ in range(depth):
        line = f"sh -c {shlex.quote(line)}"
    assert verdict(DENY_RM, line) is DecisionKind.DENY
    unrelated = PermissionPolicy("bypass", deny=["run_command(curl *)"])
    expected = DecisionKind.DENY if depth > MAX_DEPTH else DecisionKind.ALLOW
    assert verdict(unrelated, line) is expected


def test_long_wrapper_chains_stay_fast_enough_to_check() -> None:
    found = programs("env " * 5000 + "rm -rf x")
    assert SimpleCommand(("rm", "-rf", "x")) in found


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["git status", "ls", "rm -rf x", "$(x)", "make"]), min_size=1, max_size=4
    ),
    st.lists(SEPARATORS, min_size=3, max_size=3),
)
def test_allowed_commands_consist_only_of_allowed_parts(parts: list[str], seps: list[str]) -> None:
    line = parts[0] + "".join(f" {s} {p}" for s, p in zip(seps, parts[1:], strict=False))
    if verdict(ALLOW_STATUS, line) is DecisionKind.ALLOW:
        assert all(p == "git status" for p in parts), line
        assert not re.search(r"rm|\$\(", line)


# ------------------------------------------- bypasses of `git push` rules (issue 25 attacks)

DENY_PUSH = PermissionPolicy("bypass", deny=["run_command(git push*)", "run_command(git tag*)"])

PUSH_BYPASSES = [
    # wrappers that run the command they are given
    "strace git push",
    "strace -f -o /dev/null git push",
    "ltrace git push",
    "script -c 'git push' /dev/null",
    "script -qc 'git push origin main'",
    "unshare git push",
    "unshare -r -n git push",
    "setpriv git push",
    "setpriv --reuid 0 git push",
    "prlimit git push",
    "prlimit --nofile=10 git push",
    "nsenter -t 1 git push",
    "nice git push",
    "ionice -c3 git push",
    "timeout 5 git push",
    "stdbuf -o0 git push",
    "nohup git push",
    "env -S 'git push'",
    "echo x | xargs git push",
    "sudo git push",
    "doas git push",
    "chroot / git push",
    "flock /tmp/lock git push",
    "time git push",
    "command git push",
    "builtin git push",
    "exec git push",
    "eval git push",
    "eval 'git push'",
    "bash -c 'git push'",
    "sh -c 'git push'",
    "uv run git push",
    "faketime '2020-01-01' git push",
    # git's own options before the subcommand
    "git -C . push",
    "git -C . tag v1",
    "git --no-pager push",
    "git -P push",
    "git -c k=v push",
    "git -c core.pager=cat -C . --no-pager push",
    "git --git-dir=.git push",
    "git --git-dir .git push",
    "git --work-tree=. push",
    "git --work-tree . --git-dir .git tag -a v1",
    "git --namespace x push",
    "git --exec-path=/usr/lib/git-core push",
    'git -C "$HOME" push',
    "GIT_DIR=.git git push",
    # git aliases and commands git runs
    "git p",
    "git -c alias.p=push p",
    "git -c alias.p='!git push' p",
    "git --config-env=alias.p=VAR p",
    "git config alias.p push",
    "git config --global alias.p '!git push'",
    "git config include.path /tmp/aliases",
    "git -c core.pager='git push' log",
    "GIT_PAGER='git push' git log",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='git push' git log",
    "git submodule foreach git push",
    "git submodule foreach 'git push origin'",
    "git rebase -x 'git push' main",
    "git bisect run git push",
    # shell constructs rules cannot see through
    "trap 'git push' EXIT",
    "trap -- 'git push' EXIT; true",
    'trap "$CMD" EXIT',
    "coproc git push",
    "coproc NAME { git push; }",
    "alias g=git; g push",
    "alias g='git push'; g",
    "shopt -s expand_aliases; alias g=git\ng push",
    "hash -p /usr/bin/git ls; ls push",
    "BASH_CMDS[ls]=/usr/bin/git; ls push",
    "BASH_ALIASES[ls]=git; ls push",
    "enable -f ./push.so push",
    "x='$(git push)'; echo ${x@P}",
    "PS4='$(git push)'; set -x; true",
    "PS4=$P; set -x; true",
    "x='a[$(git push)]'; echo $((x))",
    "echo 'git push' | bash",
    "bash <<< 'git push'",
    "bash -s < script.sh",
    "source <(echo git push)",
    ". /dev/stdin",
    "eval $X",
    "x=push; eval git $x",
    "[ -f x ] && git push",
    "g[i]t push",
    "{git,push}",
    "at now <<< 'git push'",
    "mapfile -C 'git push' -c 1 < lines.txt",
    # other spellings
    "/usr/lib/git-core/git-push origin",
    'env -S"git push"',
    "env --split-string='git push'",
    "script -c'git push'",
    "g\\it push",
    "gi''t push",
    "git $(echo push)",
    '"$(command -v git)" push',
]


@pytest.mark.parametrize("command", PUSH_BYPASSES)
def test_a_git_push_rule_holds_against_each_bypass(command: str) -> None:
    assert verdict(DENY_PUSH, command) is DecisionKind.DENY


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git status --short && pytest -q -x",
        "pytest -q",
        "echo push",
        "echo 'git push'",
        "grep -rn 'git push' .",
        "git log --oneline -5 | cat",
        "git -C sub status",
        "git -C $DIR status",
        "git --no-pager diff HEAD~1 -- src/",
        "git -c color.ui=never log",
        "git config --get alias.p",
        "git config user.name 'A Person'",
        "git stash && git stash pop",
        "cd src && git add -A && git commit -m 'push the fix'",
        "uv run pytest -q",
        "timeout 60 python -m pytest tests/x.py",
        "bash script.sh",
        ". .venv/bin/activate && pytest -q",
        "trap - EXIT",
        "trap '' INT",
        "trap -p",
        "alias",
        "hash -r",
        "EDITOR=vim git commit",
        "echo 'unbalanced $(' && ls",
        "if [ -f setup.py ]; then python setup.py --version; fi",
        "[[ -d build ]] || mkdir build",
        "x=$(git rev-parse --short HEAD); echo $x",
    ],
)
def test_ordinary_commands_still_run_under_a_git_push_rule(command: str) -> None:
    assert verdict(DENY_PUSH, command) is DecisionKind.ALLOW


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("trap 'git push' EXIT", "`trap`"),
        ("coproc git push", "`coproc`"),
        ("alias g=git; g push", "`alias`"),
        ("hash -p /usr/bin/git g; g push", "`hash -p`"),
        ("git p", "`git p`"),
        ("git -c alias.p=push p", "git alias"),
        ("echo 'git push' | bash", "`bash` reads commands from its input"),
    ],
)
def test_a_construct_rules_cannot_see_through_is_named_in_the_refusal(
    command: str, named: str
) -> None:
    decision = DENY_PUSH.decide("run_command", {"command": command})
    assert decision.kind is DecisionKind.DENY
    assert named in decision.reason
    assert "write the command without it" in decision.reason


def test_constructs_only_refuse_where_a_rule_for_commands_exists() -> None:
    files_only = PermissionPolicy("bypass", deny=["write_file(secrets/**)"])
    assert verdict(files_only, "alias g=git; g push") is DecisionKind.ALLOW
    assert verdict(files_only, "trap 'rm -f tmp' EXIT") is DecisionKind.ALLOW


def test_an_unknown_git_command_matches_only_git_rules() -> None:
    policy = PermissionPolicy("bypass", deny=["run_command(curl *)"])
    assert verdict(policy, "git p") is DecisionKind.ALLOW
    assert verdict(DENY_PUSH, "git p") is DecisionKind.DENY


NEW_WRAPPERS = st.sampled_from(
    [
        "strace",
        "strace -f -e trace=execve",
        "ltrace",
        "unshare -r",
        "setpriv --no-new-privs",
        "prlimit --as=100000000",
        "nsenter -U",
        "ionice -c 3",
        "stdbuf -oL -eL",
        "chroot /",
        "flock -x /tmp/l",
        "firejail --quiet",
        "fakeroot",
        "numactl --interleave=all",
        "taskset -c 0",
    ]
)
GIT_GLOBAL_OPTIONS = st.sampled_from(
    [
        "-C .",
        "-C /tmp/x",
        "--no-pager",
        "-P",
        "-p",
        "--paginate",
        "-c k=v",
        "-c color.ui=always",
        "--git-dir=.git",
        "--git-dir .git",
        "--work-tree=.",
        "--work-tree .",
        "--bare",
        "--no-replace-objects",
        "--literal-pathspecs",
        "--no-optional-locks",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(NEW_WRAPPERS | WRAPPER_PREFIXES, max_size=3),
    st.lists(GIT_GLOBAL_OPTIONS, max_size=4),
    st.sampled_from(["push", "push origin main", "push --force", "tag v1", "tag -d v1"]),
)
def test_wrappers_and_git_options_in_any_combination_do_not_hide_a_push(
    wrappers: list[str], options: list[str], subcommand: str
) -> None:
    line = " ".join([*wrappers, "git", *options, subcommand])
    assert verdict(DENY_PUSH, line) is DecisionKind.DENY, line
    assert verdict(DENY_PUSH, f"sh -c {shlex.quote(line)}") is DecisionKind.DENY, line


@settings(max_examples=200, deadline=None)
@given(
    st.lists(NEW_WRAPPERS, max_size=2),
    st.lists(GIT_GLOBAL_OPTIONS, max_size=3),
    st.sampled_from(["status", "log --oneline", "diff", "fetch origin", "show HEAD"]),
)
def test_git_options_do_not_make_other_git_commands_refused(
    wrappers: list[str], options: list[str], subcommand: str
) -> None:
    line = " ".join([*wrappers, "git", *options, subcommand])
    assert verdict(DENY_PUSH, line) is DecisionKind.ALLOW, line


@pytest.mark.parametrize(
    "line",
    [
        "git submodule foreach " * 40 + "git push",
        "xargs git submodule foreach " * 40 + "git push",
        "git rebase -x " * 40 + "x",
        "env " + "find . -exec " * 40 + "rm x",
        "echo '" + "$(" * 20000 + "'",
        "bash " + "-o x " * 5000,
        "env " + "alias " * 5000,
        "git " + "-c k=v " * 5000 + "push",
    ],
)
def test_hostile_nesting_and_length_stay_fast_to_check(line: str) -> None:
    started = time.monotonic()
    programs(line)
    assert time.monotonic() - started < 5  # a bound against blow-ups, not a benchmark


def test_a_command_too_long_to_check_is_closed() -> None:
    padding = " ".join(["-c", "k=v"] * 300)
    assert verdict(DENY_PUSH, f"git {padding} push") is DecisionKind.DENY
    assert verdict(DENY_PUSH, "alias " + "a " * 300 + "g=git; g push") is DecisionKind.DENY
