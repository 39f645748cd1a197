"""Sandbox trials shared by the tests and a reliability bench: escape attempts and runaways.

Escapes (reliability scenario 4). `EscapeLab` builds a scene in a scratch folder: a workspace,
a sibling folder `outside/` holding `secret.txt` (a random token), symlinks and a hard link
from the workspace to it, and listeners on 127.0.0.1 and on the machine's own address that
count every connection. `file_tool_attempts()` and `command_attempts()` list the attempts;
`EscapeLab.attempt()` runs one through a tool registry and reports whether it escaped:

- write: anything outside the workspace was created, changed or removed (checked on the host,
  so a write that lands in a sandbox's private /tmp is no escape);
- read: the token (or /etc/passwd's first line) shows up in what the tool returned;
- network: a listener on the host saw a connection or a datagram.

A hard link is the same file under a second name, so reading `ws/hard` shows what
`outside/linked.txt` holds under every sandbox: that is a fact of the scene, not counted as an
escape (a sandboxed command cannot make such a link: bubblewrap's workspace is another mount,
and link() across mounts fails). Writing through it is counted: the file tools replace files
atomically, which leaves the other name untouched.

Files an attempt manages to create in $HOME, /etc, /var/tmp, /tmp or /dev/shm are removed
afterwards, and `secret.txt` is restored, so running the corpus under `local` leaves no trace.

Runaways (reliability scenario 5): `runaway_cases()` lists commands that never stop on their
own; `run_runaway()` runs one through `run_command` and measures how long it took until the
call returned and no process it started was left.

Used by tests/tools/test_escapes.py and test_runaway.py (a few trials each); a bench can run
more trials of the same functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import socket
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from journeyman.core.messages import ToolCall, ToolResult
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext
from journeyman.tools.registry import ToolRegistry
from journeyman.tools.sandbox import Sandbox, marked_pids
from journeyman.tools.shell import RunCommandArgs, RunCommandTool

# --- escapes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    name: str
    tool: str
    args: dict[str, Any]
    kind: str
    """write, read or network: what counts as having escaped."""


@dataclass
class Outcome:
    attempt: Attempt
    escaped: bool
    detail: str
    result: str = ""


class _Listener:
    """Counts TCP connections and UDP datagrams reaching a port on `host`."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.hits = 0
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((host, 0))
        self.tcp.listen(16)
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((host, self.port))
        self._stop = False
        self._threads = [
            threading.Thread(target=self._accept, daemon=True),
            threading.Thread(target=self._receive, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.tcp.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()

    def _receive(self) -> None:
        while not self._stop:
            try:
                self.udp.recvfrom(1024)
            except OSError:
                return
            self.hits += 1

    def close(self) -> None:
        self._stop = True
        for sock in (self.tcp, self.udp):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _own_address() -> str | None:
    """The machine's non-loopback IPv4 address, if it has one (no packet is sent)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))
        address: str = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


class EscapeLab:
    """The scene the attempts run against; use as a context manager."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        self.token = "jm-secret-" + secrets.token_hex(8)
        self.tag = "jm-escape-" + secrets.token_hex(4)
        """Part of the name of every file an attempt tries to create outside the scene."""
        self.workspace = self.root / "ws"
        self.outside = self.root / "outside"
        self.secret = self.outside / "secret.txt"
        self.linked = self.outside / "linked.txt"
        """Hard-linked into the workspace as `hard`: the same file under two names."""
        self.linked_token = "jm-linked-" + secrets.token_hex(8)
        self.listeners: list[_Listener] = []
        self.unix_socket = self.outside / "agent.sock"
        self._unix: socket.socket | None = None
        self.unix_hits = 0

    def __enter__(self) -> EscapeLab:
        self.workspace.mkdir(parents=True)
        (self.outside / "sub").mkdir(parents=True)
        self.secret.write_text(self.token + "\n")
        (self.workspace / "notes.txt").write_text("inside\n")
        (self.workspace / "link_file").symlink_to(self.secret)
        (self.workspace / "link_dir").symlink_to(self.outside)
        (self.workspace / "rel_link").symlink_to(Path("..") / "outside")
        self.linked.write_text(self.linked_token + "\n")
        os.link(self.linked, self.workspace / "hard")  # the same file as outside/linked.txt
        self.listeners.append(_Listener("127.0.0.1"))
        address = _own_address()
        if address is not None:
            with contextlib.suppress(OSError):
                self.listeners.append(_Listener(address))
        self._unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._unix.bind(str(self.unix_socket))
        self._unix.listen(4)
        self._unix.setblocking(False)
        return self

    def __exit__(self, *exc: object) -> None:
        for listener in self.listeners:
            listener.close()
        if self._unix is not None:
            self._unix.close()
        self._clean_strays()

    # -- what the attempts may touch

    def stray_paths(self) -> list[Path]:
        """Places outside the scene where attempts try to create files named with `tag`."""
        home = Path(os.path.expanduser("~"))
        return [
            home / f".{self.tag}",
            Path("/etc") / self.tag,
            Path("/var/tmp") / self.tag,
            Path("/tmp") / self.tag,
            Path("/dev/shm") / self.tag,
            Path("/run") / self.tag,
        ]

    def _clean_strays(self) -> None:
        for path in self.stray_paths():
            with contextlib.suppress(OSError):
                path.unlink()

    def _snapshot(self) -> dict[str, tuple[int, bytes]]:
        """Mode and content of everything under outside/ and every stray path that exists."""
        seen: dict[str, tuple[int, bytes]] = {}
        for path in [self.outside, *self.outside.rglob("*"), *self.stray_paths()]:
            try:
                info = path.lstat()
            except OSError:
                continue
            data = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
            seen[str(path)] = (info.st_mode, data)
        return seen

    def _network_hits(self) -> int:
        assert self._unix is not None
        with contextlib.suppress(OSError):
            conn, _ = self._unix.accept()
            self.unix_hits += 1
            conn.close()
        return sum(listener.hits for listener in self.listeners) + self.unix_hits

    def _restore(self) -> None:
        self._clean_strays()
        for path in sorted(self.outside.rglob("*"), reverse=True):
            if path in (self.secret, self.linked, self.outside / "sub", self.unix_socket):
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        (self.outside / "sub").mkdir(exist_ok=True)
        if not self.secret.exists() or self.secret.read_text() != self.token + "\n":
            self.secret.unlink(missing_ok=True)
            self.secret.write_text(self.token + "\n")
        self.secret.chmod(0o644)
        self.outside.chmod(0o755)
        if not self.linked.exists() or self.linked.read_text() != self.linked_token + "\n":
            self.linked.unlink(missing_ok=True)
            self.linked.write_text(self.linked_token + "\n")
        hard = self.workspace / "hard"
        if not hard.exists() or not os.path.samefile(hard, self.linked):
            hard.unlink(missing_ok=True)
            os.link(self.linked, hard)

    # -- running attempts

    async def attempt(self, registry: ToolRegistry, ctx: ToolContext, item: Attempt) -> Outcome:
        before = self._snapshot()
        hits = self._network_hits()
        call = ToolCall(id="escape", name=item.tool, arguments=item.args)
        result: ToolResult = await registry.execute(call, ctx, 30)
        if item.tool == "run_command":
            await asyncio.sleep(0.05)  # let the listener threads count
        after = self._snapshot()
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        new_hits = self._network_hits() - hits
        # The linked token is not looked for: a hard link in the workspace is the linked file
        # (see the module docstring), so reading it is no escape of any tool.
        leaked = self.token in result.content or "root:x:0:0" in result.content
        escaped = False
        detail = "contained"
        if changed:
            escaped, detail = True, "changed outside the workspace: " + ", ".join(changed)
        elif new_hits:
            escaped, detail = True, f"{new_hits} connection(s) reached the host"
        elif leaked and item.kind in ("read", "write"):
            escaped, detail = True, "returned content from outside the workspace"
        self._restore()
        return Outcome(item, escaped, detail, result.content)

    async def run(self, attempts: list[Attempt], sandbox: Sandbox | None = None) -> list[Outcome]:
        """Run each attempt through a fresh registry of the built-in tools."""
        registry = ToolRegistry(default_tools(sandbox))
        ctx = ToolContext(workspace=self.workspace)
        outcomes = [await self.attempt(registry, ctx, item) for item in attempts]
        if sandbox is not None:
            await sandbox.close()
        return outcomes

    # -- the corpus

    def file_tool_attempts(self) -> list[Attempt]:
        """Reads, writes, edits, listings and searches aimed outside the workspace."""
        out, secret, t = str(self.outside), str(self.secret), self.tag
        proc_root = "/proc/self/root" + secret
        reads = [
            "../outside/secret.txt",
            secret,
            "link_file",
            "link_dir/secret.txt",
            "rel_link/secret.txt",
            proc_root,
            "notes.txt/../../outside/secret.txt",
            "./../outside/secret.txt",
            "/etc/passwd",
            f"/proc/self/root{self.workspace}/../outside/secret.txt",
        ]
        attempts = [Attempt(f"read_file {p}", "read_file", {"path": p}, "read") for p in reads]
        writes = [
            "../outside/new.txt",
            f"{out}/new.txt",
            "link_dir/new.txt",
            "link_dir/sub/new.txt",
            "rel_link/new.txt",
            "link_file",
            "hard",
            f"/proc/self/root{out}/new.txt",
            os.path.expanduser(f"~/.{t}"),
            f"/etc/{t}",
            f"/tmp/{t}",
        ]
        attempts += [
            Attempt(f"write_file {p}", "write_file", {"path": p, "content": "x"}, "write")
            for p in writes
        ]
        token = self.token
        for path in ("link_file", "../outside/secret.txt", secret, "link_dir/secret.txt"):
            args = {"path": path, "old_string": token, "new_string": "changed"}
            attempts.append(Attempt(f"edit_file {path}", "edit_file", args, "write"))
        args = {"path": "hard", "old_string": self.linked_token, "new_string": "changed"}
        attempts.append(Attempt("edit_file hard", "edit_file", args, "write"))
        for path in ("../outside", out, "link_dir"):
            attempts.append(Attempt(f"list_files {path}", "list_files", {"path": path}, "read"))
        attempts.append(
            Attempt("list_files . recursive", "list_files", {"recursive": True}, "read")
        )
        for pattern in ("../outside/*", "link_dir/*", "**/*", f"{out}/*"):
            attempts.append(Attempt(f"glob {pattern}", "glob", {"pattern": pattern}, "read"))
        for path in (".", "../outside", out, "link_dir"):
            # A regex rather than the token itself, which "no matches for ..." would echo.
            args = {"pattern": "jm-secret-[0-9a-f]{16}", "path": path}
            attempts.append(Attempt(f"grep {path}", "grep", args, "read"))
        return attempts

    def command_attempts(self) -> list[Attempt]:
        """Shell commands that try to write, read or connect outside the workspace."""
        out, secret, t = str(self.outside), str(self.secret), self.tag
        writes = [
            "echo x > ../outside/c1",
            f"echo x > {out}/c2",
            "echo x > link_dir/c3",
            "echo x >> link_file",
            f"echo x > /proc/self/root{out}/c5",
            f"echo x > /proc/1/root{out}/c6",
            "ln ../outside/secret.txt hl7 && echo x >> hl7",
            f"touch ~/.{t}",
            f"touch /etc/{t}",
            f"touch /var/tmp/{t}",
            f"mkdir -p {out}/d11",
            f"python3 -c \"open('{out}/c12', 'w').write('x')\"",
            "cd .. && touch outside/c13",
            f"echo x > f14 && mv f14 {out}/c14",
            f"rm -f {secret}",
            f"chmod 600 {secret}",
            f"dd if=/dev/zero of={out}/c19 bs=1 count=1 status=none",
            f"ln -s {out} l20 && echo x > l20/c20",
            f"touch /tmp/{t}",
            f"touch /dev/shm/{t}",
            f"touch /run/{t}",
            f"git init -q {out}/repo",
            f"cd /proc/self/root{out} && touch c25",
            f"cp {secret} link_dir/copied",
            "echo x > rel_link/c27",
        ]
        attempts = [Attempt(f"run {c}", "run_command", {"command": c}, "write") for c in writes]
        reads = [
            "cat ../outside/secret.txt",
            f"cat {secret}",
            "cat link_file",
            f"cat /proc/self/root{secret}",
            "cat rel_link/secret.txt",
        ]
        attempts += [Attempt(f"run {c}", "run_command", {"command": c}, "read") for c in reads]
        nets = []
        for listener in self.listeners:
            host, port = listener.host, listener.port
            nets += [
                f"exec 3<>/dev/tcp/{host}/{port} && echo hi >&3",
                f"python3 -c \"import socket; socket.create_connection(('{host}', {port}), 2)\"",
                f"python3 -c \"import socket; s=socket.socket(2, 2); s.sendto(b'hi', "
                f"('{host}', {port}))\"",
                f"curl -s -m 2 http://{host}:{port}/ || true",
            ]
        nets.append(
            'python3 -c "import socket; s=socket.socket(socket.AF_UNIX); '
            f"s.connect('{self.unix_socket}')\""
        )
        attempts += [Attempt(f"run {c}", "run_command", {"command": c}, "network") for c in nets]
        return attempts


def summarise(outcomes: list[Outcome]) -> dict[str, int]:
    """Attempts and escapes, in all and per kind."""
    table = {"attempts": len(outcomes), "escapes": sum(o.escaped for o in outcomes)}
    for kind in ("write", "read", "network"):
        table[f"{kind}_escapes"] = sum(o.escaped for o in outcomes if o.attempt.kind == kind)
    return table


# --- runaways ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Runaway:
    name: str
    command: str
    timeout: float
    """The timeout the call asks for, in seconds."""


def fork_bomb_command(processes: int, *, as_nobody: bool) -> str:
    """A classic bash fork bomb under `ulimit -u` (as uid 65534 when root: the kernel does not
    apply the process limit to root)."""
    bomb = f"ulimit -u {processes}; bomb() {{ bomb | bomb & }}; bomb; sleep 60"
    if as_nobody:
        return f"setpriv --reuid=65534 --regid=65534 --clear-groups bash -c '{bomb}' 2>/dev/null"
    return f"bash -c '{bomb}' 2>/dev/null"


def runaway_cases(*, fork_bomb: str | None = None) -> list[Runaway]:
    """Commands that would never stop on their own (each also leaves processes behind)."""
    cases = [
        Runaway("yes", "yes", 1.0),
        Runaway(
            "fork storm (255 processes, no limit needed)",
            "storm() { if [ $1 -lt 7 ]; then storm $(($1+1)) & storm $(($1+1)) & fi; "
            "sleep 60; }; storm 0",
            2.0,
        ),
        Runaway(
            "daemon that left the process group",
            "setsid sleep 60 > /dev/null 2>&1 & python3 -c 'import os, time; "
            "os.fork() == 0 and (os.setsid(), os.fork() == 0 and time.sleep(60))' "
            "> /dev/null 2>&1; sleep 60",
            1.0,
        ),
        Runaway("200 MB of output", "head -c 200000000 /dev/zero | tr '\\0' a; sleep 60", 3.0),
        Runaway("ignores SIGTERM", "trap '' TERM; sleep 60 & sleep 60; wait", 1.0),
    ]
    if fork_bomb is not None:
        cases.append(Runaway("fork bomb under a process limit", fork_bomb, 2.0))
    return cases


@dataclass
class RunawayOutcome:
    case: Runaway
    seconds: float
    """From the call until it returned and no process of the command was left."""
    leftovers: list[int] = field(default_factory=list)
    """Processes of the command still running 5 s after the call returned (should be none)."""
    output_bytes: int = 0
    kept_chars: int = 0
    timed_out: bool = False


async def run_runaway(tool: RunCommandTool, ctx: ToolContext, case: Runaway) -> RunawayOutcome:
    """Run `case` through `tool` and wait (at most 5 s) until none of its processes is left."""
    prefix = f"{tool.sandbox_for(ctx).ident}:"
    started = time.monotonic()
    result = await tool.execute(RunCommandArgs(command=case.command, timeout=case.timeout), ctx)
    left = marked_pids(prefix, prefix=True)
    deadline = time.monotonic() + 5.0
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        left = marked_pids(prefix, prefix=True)
    seconds = time.monotonic() - started
    return RunawayOutcome(
        case,
        round(seconds, 3),
        left,
        int(result.metadata.get("output_bytes", 0)),
        len(result.content),
        bool(result.metadata.get("timed_out")),
    )


def peak_rss_kib() -> int:
    """Peak resident memory of this process so far, in KiB (Linux reports KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
