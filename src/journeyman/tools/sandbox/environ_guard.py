"""Keeping the run's secrets out of `/proc/<pid>/environ` of the agent (see
`core.environ_block`), and saying plainly what `--sandbox local` still cannot hide."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from journeyman.core.allowed_env import allowed
from journeyman.core.environ_block import (
    environ_shows,
    ptrace_restricted,
    wipe_from_environ_block,
)
from journeyman.core.redact import own_secret_values

if TYPE_CHECKING:
    from journeyman.tools.choices import SandboxKind


_said: set[str] = set()
"""The warnings already given by this process (a swarm builds many agents)."""


def hide_run_secrets(sandbox: SandboxKind) -> str | None:
    """Wipe from this process's environment block every variable a command would not get
    (`core.allowed_env`) and any holding the provider's key; under `local`, a
    one-line warning when the provider key came from the environment and stays within reach
    (None when there is nothing to say, or this process said it already)."""
    own = own_secret_values()
    names = [
        name
        for name, value in os.environ.items()
        if not allowed(name) or any(key in value for key in own)
    ]
    wipe_from_environ_block(names)
    if sandbox.value != "local":
        return None
    from_env = [n for n, v in os.environ.items() if any(key in v for key in own)]
    if not from_env:
        return None
    in_block = environ_shows(own)
    if not in_block and ptrace_restricted():
        return None
    where = (
        f"/proc/{os.getpid()}/environ"
        if in_block
        else "this process's memory (the kernel allows it: kernel.yama.ptrace_scope is 0 or absent)"
    )
    warning = (
        f"--sandbox local: commands run as you, unconfined, and can read {', '.join(from_env)} "
        f"from {where}; use --sandbox bubblewrap to keep the key from them"
    )
    if warning in _said:
        return None
    _said.add(warning)
    return warning
