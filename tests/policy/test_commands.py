"""Deny rules on commands hold against other spellings; allow rules stay strict.

The parser (`journeyman.policy.commands`) is tested through the policy for the spellings a
user relies on, and directly by properties: it never fails, round-trips quoted words, sees
through wrappers and separators, and fails closed on what only the shell can know.
"""

from __future__ import annotations

import re
import shlex

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
