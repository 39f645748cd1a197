"""`run_command`: run a shell command in the workspace, in its own process group.

How a command ends, and what happens to the processes it started:

- It exits: output is collected until every process holding the output pipe has closed it.
  Background processes that still hold it a moment later (`sleep 100 &`) are stopped, so
  reading never hangs; ones that redirected their output elsewhere keep running.
- It runs past its timeout, or the calling task is cancelled (Ctrl-C in the agent): the whole
  process group gets SIGTERM, then SIGKILL after a short grace period. Cancellation is
  re-raised once the group is gone.

Where the command runs is up to the tool's `Sandbox` (tools/sandbox/): on the host with
resource limits (local), or under bubblewrap or docker; "process group" above then means every
process the command started, wherever it went.

Output is stdout and stderr interleaved, read as it arrives and kept as a head and a tail of
bounded size, so a command printing gigabytes costs no more memory than one printing 20 KB.
A command's environment is built from an allow-list (`sandbox.environment`): the agent's
own variables, its provider keys and credentials of any name, stay with the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import Field

from journeyman.core.messages import ToolResult
from journeyman.core.redact import looks_secret as looks_secret
from journeyman.tools.base import BaseTool, ToolArgs, ToolKind, fail, ok
from journeyman.tools.context import ToolContext
from journeyman.tools.sandbox import LocalSandbox, Sandbox
from journeyman.tools.sandbox import group_alive as group_alive
from journeyman.tools.sandbox.environment import CHILD_SETTINGS, command_env
from journeyman.tools.sandbox.git_guard import GitMetadataGuard, GuardReport
from journeyman.tools.snapshot import (
    CommandChanges,
    SnapshotUnavailable,
    WorkspaceSnapshots,
    interrupted_changes,
)

DEFAULT_TIMEOUT = 120.0
"""Seconds a command may run when the call does not say."""
MAX_TIMEOUT = 600.0
"""Longest timeout a call may ask for, in seconds."""
HEAD_BYTES = 10_000
"""Bytes kept from the start of the output."""
TAIL_BYTES = 10_000
"""Bytes kept from the end of the output."""
KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when stopping a process group."""
DRAIN_GRACE = 0.3
"""Seconds to wait for the output pipe to close after the command itself has exited."""

_T = TypeVar("_T")

_secret = functools.lru_cache(maxsize=4096)(looks_secret)
"""`looks_secret` remembered per name: the environment is scrubbed before every command."""


def scrub_env(env: Mapping[str, str], passthrough: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `env` without credential-like variables, except those named in `passthrough`:
    for programs the user configured (language servers, graders); commands the model runs get
    `command_env` instead."""
    keep = set(passthrough)
    clean = {name: value for name, value in env.items() if name in keep or not _secret(name)}
    clean.update(CHILD_SETTINGS)
    return clean


class RunCommandArgs(ToolArgs):
    command: str = Field(
        min_length=1,
        description="Shell command line to run with bash (pipes, &&, redirections work). "
        "stdin is empty, so interactive prompts get end-of-file.",
    )
    """Shell command line to run."""
    timeout: float | None = Field(
        default=None,
        gt=0,
        description=f"Seconds before the command and everything it started are killed; "
        f"default {DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g}.",
    )
    """Seconds before the command is killed; None means the tool's default."""
    cwd: str = Field(
        default=".",
        description="Directory to run in, relative to the workspace root.",
    )
    """Directory to run in, relative to the workspace root."""


class OutputBuffer:
    """Keeps the first `head` and the last `tail` bytes of a stream, and counts the rest."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - self._tail_limit
            if excess > 0:
                del self.tail[:excess]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def render(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.omitted:
            return f"{head}\n[... {self.omitted} bytes of output omitted ...]\n{tail}"
        return head + tail


class _Collector(asyncio.Protocol):
    """Feeds a pipe's data into an OutputBuffer; `closed` resolves at end-of-file."""

    def __init__(self, sink: OutputBuffer, closed: asyncio.Future[None]) -> None:
        self.sink = sink
        self.closed = closed

    def data_received(self, data: bytes) -> None:
        self.sink.feed(data)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class RunCommandTool(BaseTool):
    name = "run_command"
    description = (
        "Run a shell command (bash) in the workspace; returns its exit code and its stdout and "
        "stderr together (long output keeps its beginning and end). A non-zero exit code is "
        "reported, not a tool failure. Past the timeout the command and all it started are "
        "killed; background processes end with the command unless their output goes to a file."
    )
    args_model = RunCommandArgs
    kind = ToolKind.COMMAND
    permission_arg = "command"

    def __init__(
        self,
        *,
        default_timeout: float = DEFAULT_TIMEOUT,
        max_timeout: float = MAX_TIMEOUT,
        head_bytes: int = HEAD_BYTES,
        tail_bytes: int = TAIL_BYTES,
        kill_grace: float = KILL_GRACE,
        drain_grace: float = DRAIN_GRACE,
        sandbox: Sandbox | None = None,
        journal_changes: bool = True,
    ) -> None:
        self.journal_changes = journal_changes
        """Journal the files each command changes (for undo and diff) when the run keeps a
        journal; see `tools.snapshot`."""
        self._snapshots: dict[tuple[Path, str], WorkspaceSnapshots] = {}
        self._guards: dict[Path, GitMetadataGuard] = {}
        """The last guard of each workspace: the next one reuses what it read."""
        self.sandbox = sandbox
        """Where commands run; None runs them locally (`LocalSandbox`, default limits)."""
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.head_bytes = head_bytes
        self.tail_bytes = tail_bytes
        self.kill_grace = kill_grace
        self.drain_grace = drain_grace

    async def execute(self, args: RunCommandArgs, ctx: ToolContext) -> ToolResult:
        cwd = ctx.resolve(args.cwd, tool=self.name)
        if not cwd.is_dir():
            return fail(
                self.name,
                f"{self.name}: cwd {args.cwd!r} is not a directory of the workspace; pass an "
                "existing directory relative to the workspace root",
            )
        asked = args.timeout or self.default_timeout
        timeout = min(asked, self.max_timeout)
        notes: list[str] = []
        if asked > timeout:
            notes.append(f"timeout lowered from {asked:g} s to the maximum, {timeout:g} s")

        output = OutputBuffer(self.head_bytes, self.tail_bytes)
        await self._heal_interrupted(ctx, notes)
        # The work before and after the command goes to a worker thread when it may scan the
        # workspace or run git; when it cannot (nothing moved since the last command: see
        # `_cheap_before`), it stays here: a hop costs more than the work (0.1-0.3 ms each way).
        snapshots, guard = await _in_thread_unless(
            self._cheap_before(ctx), self._prepare, ctx, notes, args.command
        )
        git_report = GuardReport()
        started = time.monotonic()
        try:
            run = await self._run(args.command, cwd, ctx, timeout, output)
        finally:
            duration = round(time.monotonic() - started, 3)
            cheap = guard.cheap() and (snapshots is None or snapshots.unchanged())
            git_report, found = await _in_thread_unless(cheap, self._settle, guard, snapshots)
            if snapshots is not None:
                try:
                    self._journal_changes(found, ctx, notes)
                finally:
                    snapshots.end()

        if run.stopped_leftovers:
            notes.append(
                "background processes still holding the output open were stopped when the "
                "command ended; to keep one running, redirect its output (`cmd > log 2>&1 &`)"
            )
        text = output.render().removesuffix("\n") if output.total else "(no output)"
        meta: dict[str, object] = {
            "exit_code": run.exit_code,
            "timed_out": run.timed_out,
            "duration": duration,
            "output_bytes": output.total,
            "truncated": output.omitted > 0,
            "cwd": ctx.relative(cwd),
            "sandbox": self.sandbox_for(ctx).kind.value,
        }
        git_warning = git_report.message()
        if git_warning is not None:
            notes.append(f"warning: {git_warning}")
            meta["warnings"] = [git_warning]
        notes_text = "".join(f"\n[{note}]" for note in notes)
        if run.timed_out:
            return fail(
                self.name,
                f"{text}\n[timed out: the command was still running after {timeout:g} s and was "
                "killed with every process it started. Pass a larger timeout (at most "
                f"{self.max_timeout:g} s), or start long jobs in the background with output "
                f"redirected to a file and check on them later]{notes_text}",
                **meta,
            )
        return ok(
            self.name, f"{text}\n[{_describe_exit(run.exit_code, duration)}]{notes_text}", **meta
        )

    def _cheap_before(self, ctx: ToolContext) -> bool:
        """Whether `_prepare` only reads a few files: the guard takes the last one's scan, and
        the journal, if any, has a record that the watch says still holds."""
        if ctx.workspace not in self._guards:
            return False
        if not self.journal_changes or ctx.journal is None:
            return True
        snapshots = self._snapshots.get((ctx.workspace, ctx.run_session_id))
        return snapshots is not None and snapshots.unchanged()

    def _prepare(
        self, ctx: ToolContext, notes: list[str], command: str
    ) -> tuple[WorkspaceSnapshots | None, GitMetadataGuard]:
        """Before a command (in a worker thread): the workspace recorded, the git guard set."""
        snapshots = self._recorded_workspace(ctx, notes, command)
        guard = GitMetadataGuard(ctx.workspace, self._guards.get(ctx.workspace))
        self._guards[ctx.workspace] = guard
        return snapshots, guard

    def _settle(
        self, guard: GitMetadataGuard, snapshots: WorkspaceSnapshots | None
    ) -> tuple[GuardReport, CommandChanges | SnapshotUnavailable | None]:
        """After a command (in a worker thread): git metadata restored, then what it changed
        (also when it timed out or was cancelled); the error when that cannot be told."""
        report = guard.restore()
        if snapshots is None:
            return report, None
        try:
            return report, snapshots.changes()
        except SnapshotUnavailable as error:
            return report, error

    def _recorded_workspace(
        self, ctx: ToolContext, notes: list[str], command: str
    ) -> WorkspaceSnapshots | None:
        """The workspace's snapshots, just recorded and marked as running `command`; None when
        the run keeps no journal (or journaling is off, or impossible: then `notes` says so)."""
        snapshots = self._workspace_snapshots(ctx)
        if snapshots is None:
            return None
        try:
            snapshots.record()
            snapshots.begin(command)
        except (SnapshotUnavailable, OSError) as error:
            notes.append(
                f"files this command changes are not journaled (undo cannot revert them): {error}"
            )
            return None
        return snapshots

    def _workspace_snapshots(self, ctx: ToolContext) -> WorkspaceSnapshots | None:
        """The snapshots of this run's workspace; None when the run keeps no journal."""
        if not self.journal_changes or ctx.journal is None:
            return None
        key = (ctx.workspace, ctx.run_session_id)
        if key not in self._snapshots:
            self._snapshots[key] = WorkspaceSnapshots(ctx.workspace, ctx.run_session_id)
        return self._snapshots[key]

    async def _heal_interrupted(self, ctx: ToolContext, notes: list[str]) -> None:
        """Journal what a command of this session changed before an earlier process died in
        it (never reconciled). The comparison runs in a worker thread, the journaling here:
        the journal writes to a store that belongs to this thread."""
        snapshots = self._workspace_snapshots(ctx)
        if snapshots is None or snapshots.interrupted() is None:
            return
        healed = await asyncio.to_thread(interrupted_changes, snapshots)
        if healed is None:
            return
        for change in healed.changes:
            ctx.record_change(change.path, change.before, change.after, self.name)
        await asyncio.to_thread(snapshots.end)
        if healed.changes:
            notes.append(
                "an earlier command of this session was interrupted; the files it changed are "
                "now in the undo journal: " + ", ".join(c.path for c in healed.changes)
            )

    def _journal_changes(
        self,
        found: CommandChanges | SnapshotUnavailable | None,
        ctx: ToolContext,
        notes: list[str],
    ) -> None:
        """Journal what the command changed."""
        if isinstance(found, SnapshotUnavailable):
            notes.append(f"could not tell which files this command changed: {found}")
            return
        if found is None:
            return
        for change in found.changes:
            ctx.record_change(change.path, change.before, change.after, self.name)
        if found.skipped:
            shown = ", ".join(found.skipped[:5]) + (" ..." if len(found.skipped) > 5 else "")
            notes.append(
                f"changed but not journaled (binary, large or a link; undo cannot revert them): "
                f"{shown}"
            )

    async def _run(
        self, command: str, cwd: Path, ctx: ToolContext, timeout: float, output: OutputBuffer
    ) -> _Run:
        loop = asyncio.get_running_loop()
        sandbox = self.sandbox_for(ctx)
        read_fd, write_fd = os.pipe()
        try:
            started = await sandbox.start(
                command,
                cwd=cwd,
                env=command_env(os.environ, (*sandbox.pass_env, *ctx.env_passthrough)),
                stdout=write_fd,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            # Only the children may hold the write end, so end-of-file means they all closed it.
            os.close(write_fd)

        closed: asyncio.Future[None] = loop.create_future()
        pipe = os.fdopen(read_fd, "rb", buffering=0)
        transport: asyncio.BaseTransport | None = None
        run = _Run()
        try:
            transport, _ = await loop.connect_read_pipe(lambda: _Collector(output, closed), pipe)
            try:
                run.exit_code = await asyncio.wait_for(started.wait(), timeout)
            except TimeoutError:
                run.timed_out = True
                await started.stop(self.kill_grace)
                run.exit_code = await started.wait()
            if not await _wait_done(closed, self.drain_grace):
                run.stopped_leftovers = not run.timed_out
                await started.stop(self.kill_grace)
                await _wait_done(closed, self.drain_grace)
        except BaseException:
            # Cancelled (or failed): never leave the command running. Shielded so that a second
            # cancellation cannot interrupt the cleanup half-way.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(started.group, signal.SIGTERM)
            await asyncio.shield(started.stop(self.kill_grace))
            raise
        finally:
            if transport is not None:
                transport.close()
            else:
                pipe.close()
        return run

    def disarm_git(self, workspace: Path) -> str | None:
        """At the end of a run: disarm git metadata changed in `workspace` since the last
        command's check (by a process that outlived it); what was done, or None."""
        guard = self._guards.get(workspace)
        return None if guard is None else guard.disarm().message()

    def sandbox_for(self, ctx: ToolContext) -> Sandbox:
        """The sandbox given to this tool, else a local one for the context's workspace."""
        if self.sandbox is None:
            self.sandbox = LocalSandbox(ctx.workspace)
        return self.sandbox


@dataclass
class _Run:
    exit_code: int | None = None
    timed_out: bool = False
    stopped_leftovers: bool = False


def _describe_exit(code: int | None, duration: float) -> str:
    if code is None:
        return f"exit code unknown, after {duration:g} s"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the command was killed by {name} after {duration:g} s"
    if code == 0:
        return f"exit code 0, after {duration:g} s"
    return f"exit code {code} (non-zero), after {duration:g} s"


def _shell() -> str | None:
    """bash when available (models write bash), else the platform's /bin/sh (for hooks)."""
    return shutil.which("bash") or None


async def _in_thread_unless(cheap: bool, work: Callable[..., _T], *args: object) -> _T:
    """`work(*args)`, here when `cheap`, else in a worker thread (off the event loop)."""
    if cheap:
        return work(*args)
    return await asyncio.to_thread(work, *args)


async def _wait_done(future: asyncio.Future[None], timeout: float) -> bool:
    done, _ = await asyncio.wait({future}, timeout=timeout)
    return bool(done)


async def _stop_group(group: int, grace: float) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after `grace` seconds."""
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not group_alive(group):
            return
        await asyncio.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
