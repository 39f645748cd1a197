"""The environment a command gets: an allow-list, never the agent's own environment.

Every sandbox (local included) builds a command's environment with `command_env`: only the
variables named in `ALLOWED_NAMES` or starting with one of `ALLOWED_PREFIXES` (kept in
`core.allowed_env`, which the command line asks too: where programs and toolchains are, the
locale, the terminal, the Python settings that say how to run rather than what to trust), plus
the names the user passes on (`pass_env`: exact names, or a prefix ending in `*`). Anything
else stays with the agent, whatever its name: a credential called `GH_PAT`, `MYSQL_PWD`,
`DOCKER_AUTH_CONFIG`, `CI_JOB_JWT` or `SENTRY_DSN` does not look like one to a name heuristic,
and an allow-list does not need it to.

The run's own provider keys (`core.redact.own_secret_values`: the keys the providers were built
with) never pass, not even when the user names their variable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from journeyman.core.allowed_env import ALLOWED_NAMES as ALLOWED_NAMES
from journeyman.core.allowed_env import ALLOWED_PREFIXES as ALLOWED_PREFIXES
from journeyman.core.allowed_env import allowed as allowed
from journeyman.core.redact import own_secret_values

CHILD_SETTINGS = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
"""Set for every command so that pagers and credential prompts cannot wait for input."""


def command_env(env: Mapping[str, str], pass_env: Iterable[str] = ()) -> dict[str, str]:
    """The environment of a command: the allowed part of `env` (see the module doc), the
    run's own provider keys left out, and `CHILD_SETTINGS` on top."""
    wanted = tuple(pass_env)
    own = own_secret_values()
    clean = {
        name: value
        for name, value in env.items()
        if allowed(name, wanted) and not any(key in value for key in own)
    }
    clean.update(CHILD_SETTINGS)
    return clean
