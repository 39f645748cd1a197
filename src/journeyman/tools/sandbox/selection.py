"""`open_sandbox`: the sandbox the user asked for, checked to work.

`auto` takes bubblewrap when it is installed and a trial command succeeds, else local, and says
which in `description`. A sandbox asked for by name that cannot start raises
ConfigurationError; there is no silent fallback.
"""

from __future__ import annotations

from pathlib import Path

from journeyman.core.errors import ConfigurationError
from journeyman.tools.sandbox.base import ResourceLimits, Sandbox, SandboxKind
from journeyman.tools.sandbox.bubblewrap import BubblewrapSandbox
from journeyman.tools.sandbox.docker import DockerSandbox
from journeyman.tools.sandbox.local import LocalSandbox


def open_sandbox(
    kind: SandboxKind | str,
    workspace: Path,
    *,
    allow_network: bool = False,
    limits: ResourceLimits | None = None,
    pass_env: tuple[str, ...] = (),
    hidden: tuple[Path, ...] = (),
    image: str | None = None,
) -> Sandbox:
    """The sandbox of that kind for `workspace`, checked to work.

    `auto` is bubblewrap when it is installed and works, else local. A kind asked for by name
    that cannot start raises ConfigurationError. `pass_env` names the variables commands get
    besides the allow-list; `hidden` the host's folders a confining sandbox keeps out of sight
    (the session store, the user's config); `image` the docker sandbox's image (None: its
    default).
    """
    kind = SandboxKind(kind)
    limits = limits or ResourceLimits()
    if kind is SandboxKind.LOCAL:
        return LocalSandbox(workspace, limits, network=True, pass_env=pass_env)
    if kind is SandboxKind.DOCKER:
        docker = DockerSandbox(
            workspace, limits, network=allow_network, pass_env=pass_env, hidden=hidden
        )
        if image is not None:
            docker.image = image
        docker.check()
        return docker
    bwrap = BubblewrapSandbox(
        workspace, limits, network=allow_network, pass_env=pass_env, hidden=hidden
    )
    try:
        bwrap.check()
    except ConfigurationError as error:
        if kind is SandboxKind.BUBBLEWRAP:
            raise
        reason = error.message.split(";")[0].removeprefix("bubblewrap sandbox: ")
        note = f"bubblewrap unusable: {reason}"
        return LocalSandbox(workspace, limits, network=True, pass_env=pass_env, note=note)
    return bwrap
