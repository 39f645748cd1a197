"""How journeyman itself runs git, so that a repository's metadata never makes it run programs.

git runs programs named in a repository's configuration (`core.fsmonitor`, hooks, pagers,
editors, filters, external diff tools, credential helpers, signing programs). A repository in
the workspace may have been written by a sandboxed command, so every git call journeyman makes
on the host goes through `safe_git_command` and `safe_git_env`: those settings are overridden
on the command line (which outranks every configuration file), the system configuration is
not read, and nothing may ask for input.

What cannot be turned off on the command line is left to the caller: `git diff` and `git log`
take `--no-ext-diff --no-textconv`; filters of a driver named in the repository's config are
emptied by passing the config's key names to `safe_git_command` (an empty filter command means
"no filter" to git). Merge drivers are not emptied: git fails a merge whose driver is empty.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

SAFE_GIT_CONFIG: tuple[str, ...] = (
    "core.fsmonitor=false",
    f"core.hooksPath={os.devnull}",
    "core.pager=cat",
    "core.editor=true",
    "sequence.editor=true",
    "core.askPass=",
    "core.alternateRefsCommand=",
    "credential.helper=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "protocol.ext.allow=never",
    "protocol.file.allow=user",
)
"""Settings that name programs, neutralised on every git command journeyman runs."""

SAFE_GIT_ENV: dict[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
}
"""Environment every git command journeyman runs gets on top of its own."""

UNSAFE_GIT_ENV = ("GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND")
"""Variables naming programs that git would run; removed from the environment."""

_FILTER_KEYS = ("clean", "smudge", "process")


def safe_git_args(config_names: Iterable[str] = ()) -> list[str]:
    """The `-c` options to put right after `git`: `SAFE_GIT_CONFIG`, plus empty filter commands
    for every filter driver among `config_names` (key names from `git config --name-only
    --list` of the repository at hand)."""
    args: list[str] = []
    for setting in SAFE_GIT_CONFIG:
        args += ["-c", setting]
    drivers = sorted(
        {
            name.rsplit(".", 1)[0]
            for name in config_names
            if name.lower().startswith("filter.") and name.count(".") >= 2
        }
    )
    for driver in drivers:
        for key in _FILTER_KEYS:
            args += ["-c", f"{driver}.{key}="]
        args += ["-c", f"{driver}.required=false"]
    return args


def safe_git_command(*args: str, config_names: Iterable[str] = ()) -> list[str]:
    """`git` with the safe overrides, then `args`."""
    return ["git", *safe_git_args(config_names), *args]


def safe_git_env(base: Mapping[str, str]) -> dict[str, str]:
    """`base` without the variables that name programs, with `SAFE_GIT_ENV` on top."""
    env = {name: value for name, value in base.items() if name not in UNSAFE_GIT_ENV}
    env.update(SAFE_GIT_ENV)
    return env
