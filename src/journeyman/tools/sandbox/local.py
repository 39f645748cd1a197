"""`local`: commands run on the host, in their own process group, under resource limits.

Nothing stops a command from writing outside the workspace or using the network; `ResourceLimits`
(CPU seconds, address space, processes, file size) are set by the shell (`ulimit`) before it
runs the command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from journeyman.tools.sandbox.base import SandboxBase, SandboxedProcess, SandboxKind
from journeyman.tools.sandbox.processes import (
    become_subreaper,
    children,
    orphans_of,
    stop_children,
)


@dataclass
class LocalSandbox(SandboxBase):
    """Commands run on the host, in their own process group, under resource limits."""

    kind: SandboxKind = SandboxKind.LOCAL
    note: str = ""
    """Why this sandbox was chosen, when `auto` could not use bubblewrap."""

    @property
    def description(self) -> str:
        text = "local (no isolation: commands can reach the whole filesystem and the network)"
        return f"{text}; {self.note}" if self.note else text

    adopted: set[int] = field(default_factory=set)
    """Processes handed to the agent (its subreaper) when a command that started them ended:
    a background job that left the command's process group and dropped its marker; stopped
    with the rest when the sandbox closes."""

    async def start(
        self, command: str, *, cwd: Path, env: dict[str, str], stdout: int
    ) -> SandboxedProcess:
        marker, env = self._marked_env(env)
        become_subreaper()
        before = children()
        started = await self._spawn(
            self._shell_argv(command), marker, cwd=cwd, env=env, stdout=stdout
        )

        def note_orphans() -> None:
            self.adopted.update(orphans_of(self.ident, children() - before - {started.pid}))

        started.on_exit = note_orphans
        return started

    async def close(self, grace: float = 1.0) -> None:
        await super().close(grace)
        stop_children(self.adopted)
        self.adopted.clear()
