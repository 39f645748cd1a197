"""Where commands run: the `Sandbox` protocol and its implementations, one per file.

`run_command` (and anything else that starts processes on the model's behalf) asks a sandbox to
start a shell command and gets back a `SandboxedProcess`, which knows how to wait for it and
how to stop it together with every process it started.

- `base`: the protocol, `SandboxedProcess`, `ResourceLimits`, what the implementations share.
- `processes`: finding (by an environment marker) and stopping every process of a command.
- `environment`: the environment every command gets (an allow-list, plus the user's
  `pass_env`; never the run's provider key).
- `local`: on the host in its own process group, under resource limits; no isolation.
- `bubblewrap`: Linux namespaces; workspace writable, the rest read-only, no network; the
  Python journeyman runs from read-only and the session store and user config hidden, wherever
  they lie.
- `docker`: a throwaway container per command.
- `selection`: `open_sandbox`, which picks and checks one (`auto`: bubblewrap, else local).
"""

from journeyman.tools.sandbox.base import (
    PROBE_TIMEOUT,
    ResourceLimits,
    Sandbox,
    SandboxBase,
    SandboxedProcess,
    SandboxKind,
)
from journeyman.tools.sandbox.bubblewrap import BubblewrapSandbox
from journeyman.tools.sandbox.docker import DockerSandbox
from journeyman.tools.sandbox.local import LocalSandbox
from journeyman.tools.sandbox.processes import (
    MARKER_VAR,
    group_alive,
    marked_pids,
    stop_processes,
)
from journeyman.tools.sandbox.selection import open_sandbox

__all__ = [
    "MARKER_VAR",
    "PROBE_TIMEOUT",
    "BubblewrapSandbox",
    "DockerSandbox",
    "LocalSandbox",
    "ResourceLimits",
    "Sandbox",
    "SandboxBase",
    "SandboxKind",
    "SandboxedProcess",
    "group_alive",
    "marked_pids",
    "open_sandbox",
    "stop_processes",
]
