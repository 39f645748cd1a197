"""The LSP manager: routes each file to its server, starts servers lazily, survives their failures.

Every public method answers with an `LspReply` and never raises: a missing server, a crash,
a hang or a refused request comes back as `problem`. A server that crashes or stops answering
is killed, reported (log, `status()`, the reply) and restarted on the next request that needs
it, at most `max_restarts` times; after that it stays off and calls on its files say so.

Before any question about a file, the manager gives the server the file's current text from
disk (open the first time, a full-text change when it differs), so versions always follow the
file. `notify_file_changed` is for the agent's own edits: it sends the new text, saves, and
waits a bounded time for the diagnostics that answer it. Diagnostics are never served for an
earlier version of a file: when the server has not reported on the current one in time, the
reply is empty and its `analysing` names the file and the version being waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from journeyman.integrations.lsp.client import (
    LspClient,
    LspError,
    LspResponseError,
    Published,
)
from journeyman.integrations.lsp.positions import (
    column_to_units,
    display_path,
    path_to_uri,
    split_lines,
    uri_to_path,
)
from journeyman.integrations.lsp.results import (
    Completion,
    Converter,
    Diagnostic,
    Hover,
    Location,
    LspReply,
    LspSymbol,
    ServerStatus,
    capability_names,
    completions,
)
from journeyman.integrations.lsp.servers import (
    BUILTIN_SERVERS,
    Candidate,
    LspConfig,
    ServerConfig,
    choose,
    is_shadowed,
    merge_servers,
    survey,
)
from journeyman.tools.walk import IgnoreRules, walk

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_LOCATIONS = 200
"""Most definitions or references one reply carries."""
MAX_COMPLETIONS = 50
"""Most completion items one reply carries."""
MAX_SYMBOLS = 200
"""Most symbols one reply carries."""
_SKIPPED_DIRS = frozenset(
    {"node_modules", "__pycache__", "target", "build", "dist", "venv", ".venv", "site-packages"}
)
"""Directories never searched file by file for symbols (besides hidden and git-ignored ones)."""


class _Unavailable(Exception):
    """Internal: no server can take the call; the message is the reply's `problem`."""


class _StillAnalysing(Exception):
    """Internal: the server has not reported on the current version of these files yet."""

    def __init__(self, versions: dict[str, int]) -> None:
        super().__init__(", ".join(versions))
        self.versions = versions


@dataclass
class _Server:
    candidate: Candidate
    client: LspClient | None = None
    state: str = "not started"
    starts: int = 0
    last_error: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def name(self) -> str:
        return self.candidate.config.name

    @property
    def running(self) -> bool:
        return self.client is not None and self.client.alive


@dataclass
class _Doc:
    """A file as sent to its server for one call."""

    path: Path
    uri: str
    text: str
    lines: list[str]
    version: int | None
    """The version just sent, or None when the server already had this text."""


class LspManager:
    """Language servers of one workspace, behind calls that return `LspReply` records."""

    def __init__(
        self,
        workspace: Path,
        config: LspConfig | None = None,
        *,
        servers: Sequence[ServerConfig] = (),
    ) -> None:
        self.root = Path(os.path.realpath(workspace))
        self.config = config or LspConfig()
        builtins = BUILTIN_SERVERS if self.config.builtin_servers else ()
        merged = merge_servers(
            [*self.config.servers, *servers], builtins=builtins, disabled=self.config.disabled
        )
        self._candidates = survey(merged, self.root)
        self._servers = {c.config.name: _Server(c) for c in self._candidates}
        self._closed = False

    # ----------------------------------------------------------------------------------------
    # questions about a position

    async def definition(
        self, path: str | Path, line: int, column: int
    ) -> LspReply[list[Location]]:
        """Where the symbol at `line`:`column` (1-based) is defined."""
        return await self._at_position(
            path, line, column, "textDocument/definition", "definitionProvider",
            lambda conv, result, doc: _capped(conv.locations(result), MAX_LOCATIONS),
            [],
        )  # fmt: skip

    async def references(
        self, path: str | Path, line: int, column: int, *, include_declaration: bool = True
    ) -> LspReply[list[Location]]:
        """Every use of the symbol at `line`:`column` across the workspace."""
        return await self._at_position(
            path, line, column, "textDocument/references", "referencesProvider",
            lambda conv, result, doc: _capped(conv.locations(result), MAX_LOCATIONS),
            [],
            extra={"context": {"includeDeclaration": include_declaration}},
        )  # fmt: skip

    async def hover(self, path: str | Path, line: int, column: int) -> LspReply[Hover | None]:
        """Type and documentation of the symbol at `line`:`column`."""
        return await self._at_position(
            path, line, column, "textDocument/hover", "hoverProvider",
            lambda conv, result, doc: (conv.hover(result, doc.uri), True),
            None,
        )  # fmt: skip

    async def completions(
        self, path: str | Path, line: int, column: int
    ) -> LspReply[list[Completion]]:
        """What the server would offer to type at `line`:`column`."""
        return await self._at_position(
            path, line, column, "textDocument/completion", "completionProvider",
            lambda conv, result, doc: completions(result, limit=MAX_COMPLETIONS),
            [],
        )  # fmt: skip

    async def _at_position(
        self,
        path: str | Path,
        line: int,
        column: int,
        method: str,
        capability: str,
        convert: Callable[[Converter, Any, _Doc], tuple[T, bool]],
        empty: T,
        *,
        extra: dict[str, Any] | None = None,
    ) -> LspReply[T]:
        async def ask(server: _Server, client: LspClient, file: Path) -> tuple[T, bool]:
            if not client.capabilities.get(capability):
                raise _Unavailable(f"{server.name} does not offer {method}")
            doc = await self._sync(server, client, file)
            if not 1 <= line <= len(doc.lines):
                raise _Unavailable(
                    f"line {line} is outside {self._show(file)}, which has {len(doc.lines)} lines"
                )
            units = column_to_units(doc.lines[line - 1], column)
            params = {
                "textDocument": {"uri": doc.uri},
                "position": {"line": line - 1, "character": units},
                **(extra or {}),
            }
            result = await client.request(method, params)
            converter = self._converter({file: doc.lines})
            return await asyncio.to_thread(convert, converter, result, doc)

        return await self._on_file(path, ask, empty)

    # ----------------------------------------------------------------------------------------
    # diagnostics

    async def diagnostics(self, path: str | Path | None = None) -> LspReply[list[Diagnostic]]:
        """Problems the server reports for the file's current text (starting its server if needed).

        Waits up to `diagnostics_wait` seconds for diagnostics of the version the server has;
        when none come, the reply is empty and names the file in `analysing`, never the
        diagnostics of an earlier version. Without a path: what running servers have reported
        for the current text of every file they know.
        """
        if path is None:
            return self._all_diagnostics()

        async def ask(
            server: _Server, client: LspClient, file: Path
        ) -> tuple[list[Diagnostic], bool]:
            doc = await self._sync(server, client, file)
            published = await self._fresh(client, doc.uri)
            return self._diagnostics_of(client, file, doc, published)

        return await self._on_file(path, ask, [])

    async def notify_file_changed(
        self, path: str | Path, text: str, *, start: bool = False
    ) -> LspReply[list[Diagnostic]]:
        """Tell the server covering `path` about new content, then return its diagnostics.

        Meant for the agent's own edits. Only a running server is told unless `start` is true.
        Waits at most `diagnostics_wait` seconds for diagnostics of the new version; when they
        do not arrive in time the value is empty and `analysing` names the file.
        """

        async def tell(
            server: _Server, client: LspClient, file: Path
        ) -> tuple[list[Diagnostic], bool]:
            doc = await self._sync(server, client, file, text=text)
            await client.save_document(file)
            published = await self._fresh(client, doc.uri)
            return self._diagnostics_of(client, file, doc, published)

        return await self._on_file(path, tell, [], start=start)

    async def _fresh(self, client: LspClient, uri: str) -> Published | None:
        """Diagnostics for the text the server has now: pulled where the server offers that,
        else the pushed ones for this version; None when none came within the wait."""
        wait = self.config.diagnostics_wait
        if client.pulls_diagnostics:
            pulled = await client.pull_diagnostics(uri, wait)
            return pulled or client.current(uri)
        return await client.wait_for_current(uri, wait)

    def _diagnostics_of(
        self, client: LspClient, file: Path, doc: _Doc, published: Published | None
    ) -> tuple[list[Diagnostic], bool]:
        if published is None:
            version = client.document_version(doc.uri)
            raise _StillAnalysing({self._show(file): version or 0})
        return self._converter({file: doc.lines}).diagnostics(doc.uri, published.items), True

    def _all_diagnostics(self) -> LspReply[list[Diagnostic]]:
        found: list[Diagnostic] = []
        names: list[str] = []
        analysing: dict[str, int] = {}
        for server in self._servers.values():
            client = server.client
            if client is None or not server.running:
                continue
            names.append(server.name)
            converter = self._converter({})
            for uri in sorted(client.all_published()):
                current = client.current(uri)
                if current is not None:
                    found.extend(converter.diagnostics(uri, current.items))
                else:
                    where = uri_to_path(uri)
                    shown = self._show(where) if where is not None else uri
                    analysing[shown] = client.document_version(uri) or 0
        if not names:
            return LspReply(
                [],
                problem="no language server is running yet; ask about a file "
                "(lsp_diagnostics with a path) to start the one that covers it",
            )
        return LspReply(found, server=", ".join(names), complete=not analysing, analysing=analysing)

    # ----------------------------------------------------------------------------------------
    # symbols

    async def symbols(
        self, query: str = "", path: str | Path | None = None
    ) -> LspReply[list[LspSymbol]]:
        """Symbols whose name contains `query` (case-insensitive): in one file, or workspace-wide.

        Workspace-wide uses the servers detected for this workspace (and any running); a server
        without workspace symbol search is asked file by file, for up to `symbol_scan_files`
        files, and the reply is marked incomplete when that limit cut the search short.
        """
        if path is not None:

            async def in_file(
                server: _Server, client: LspClient, file: Path
            ) -> tuple[list[LspSymbol], bool]:
                return await self._document_symbols(server, client, file, query)

            return await self._on_file(path, in_file, [])
        return await self._workspace_symbols(query)

    async def _document_symbols(
        self, server: _Server, client: LspClient, file: Path, query: str
    ) -> tuple[list[LspSymbol], bool]:
        if not client.capabilities.get("documentSymbolProvider"):
            raise _Unavailable(f"{server.name} does not offer textDocument/documentSymbol")
        doc = await self._sync(server, client, file)
        result = await client.request(
            "textDocument/documentSymbol", {"textDocument": {"uri": doc.uri}}
        )
        found = await asyncio.to_thread(self._converter({file: doc.lines}).symbols, result, doc.uri)
        return _capped(_matching(found, query), MAX_SYMBOLS)

    async def _workspace_symbols(self, query: str) -> LspReply[list[LspSymbol]]:
        chosen = [
            s
            for s in self._servers.values()
            if s.running
            or (
                s.candidate.detected
                and s.candidate.installed
                and not is_shadowed(s.candidate, self._candidates)
            )
        ]
        if not chosen:
            return LspReply(
                [],
                problem="no language server is detected for this workspace; pass a path to "
                "list one file's symbols, or use grep",
            )
        found: list[LspSymbol] = []
        problems: list[str] = []
        notices: list[str] = []
        complete = True
        for server in chosen:
            none: list[LspSymbol] = []
            reply = await self._guarded(server, self._symbols_of_server(server, query), none)
            found.extend(reply.value)
            complete = complete and reply.complete
            if reply.problem:
                problems.append(reply.problem)
            if reply.notice:
                notices.append(reply.notice)
        names = ", ".join(s.name for s in chosen)
        found, capped = _capped(found, MAX_SYMBOLS)
        if problems and not found:
            return LspReply([], server=names, problem="; ".join(problems))
        return LspReply(
            found,
            server=names,
            notice="; ".join(notices + problems) or None,
            complete=complete and capped,
        )

    def _symbols_of_server(
        self, server: _Server, query: str
    ) -> Callable[[LspClient], Awaitable[tuple[list[LspSymbol], bool]]]:
        async def ask(client: LspClient) -> tuple[list[LspSymbol], bool]:
            if client.capabilities.get("workspaceSymbolProvider"):
                result = await client.request("workspace/symbol", {"query": query})
                found = await asyncio.to_thread(self._converter({}).symbols, result)
                return _capped(_matching(found, query), MAX_SYMBOLS)
            return await self._scan_symbols(server, client, query)

        return ask

    async def _scan_symbols(
        self, server: _Server, client: LspClient, query: str
    ) -> tuple[list[LspSymbol], bool]:
        files, complete = await asyncio.to_thread(
            self._files_of, server.candidate.config, self.config.symbol_scan_files
        )
        found: list[LspSymbol] = []
        for file in files:
            opened_here = not client.is_open(file)
            symbols, _ = await self._document_symbols(server, client, file, query)
            found.extend(symbols)
            if opened_here:
                await client.close_document(file)
            if len(found) > MAX_SYMBOLS:
                return found, False
        return found, complete

    def _files_of(self, config: ServerConfig, most: int) -> tuple[list[Path], bool]:
        rules = IgnoreRules(self.root)

        def skip(directory: Path) -> bool:
            name = directory.name
            return name.startswith(".") or name in _SKIPPED_DIRS or rules.ignored(directory, True)

        files: list[Path] = []
        for entry in walk(self.root, skip_dir=skip):
            if entry.kind != "file" or not config.covers(entry.path):
                continue
            if rules.ignored(entry.path, False):
                continue
            if len(files) >= most:
                return files, False
            files.append(entry.path)
        return files, True

    # ----------------------------------------------------------------------------------------
    # status and lifecycle

    def status(self) -> list[ServerStatus]:
        """Every configured server: installed, detected, running, capabilities, errors."""
        shown: list[ServerStatus] = []
        for server in self._servers.values():
            candidate = server.candidate
            config = candidate.config
            state = server.state
            if not candidate.installed:
                state = "not installed"
            elif server.state == "running" and not server.running:
                state = "crashed"
            client = server.client
            shown.append(
                ServerStatus(
                    name=config.name,
                    language=config.language,
                    command=candidate.command,
                    extensions=list(config.extensions),
                    installed=candidate.installed,
                    executable=candidate.executable,
                    detected=candidate.detected,
                    markers=list(candidate.markers),
                    shadowed_by=config.fallback_for
                    if is_shadowed(candidate, self._candidates)
                    else None,
                    state=state,
                    pid=client.pid if client is not None and server.running else None,
                    capabilities=capability_names(client.capabilities) if client else [],
                    restarts=max(server.starts - 1, 0),
                    last_error=server.last_error,
                )
            )
        return shown

    def usable(self) -> list[str]:
        """Names of the servers that could start here: installed, and not a shadowed fallback."""
        if not self.config.enabled:
            return []
        return [
            c.config.name
            for c in self._candidates
            if c.installed and not is_shadowed(c, self._candidates)
        ]

    def running_for(self, path: str | Path) -> str | None:
        """Name of the running server that covers `path`, or None (nothing is started)."""
        if self._closed or not self.config.enabled:
            return None
        candidate = choose(self._candidates, self._absolute(path))
        if candidate is None or not candidate.installed:
            return None
        server = self._servers[candidate.config.name]
        return server.name if server.running else None

    def server_for(self, path: str | Path) -> str | None:
        """Name of the server that would answer for `path` (installed or not), or None."""
        candidate = choose(self._candidates, self._absolute(path))
        return candidate.config.name if candidate else None

    async def start_detected(self) -> list[ServerStatus]:
        """Start every installed server the workspace's marker files call for (concurrently).

        Useful to warm servers up in the background, and for `journeyman lsp`. Failures are
        recorded in the status, never raised.
        """
        wanted = [
            s
            for s in self._servers.values()
            if s.candidate.detected
            and s.candidate.installed
            and not is_shadowed(s.candidate, self._candidates)
        ]

        async def start(server: _Server) -> None:
            with contextlib.suppress(_Unavailable):
                await self._ensure(server)

        await asyncio.gather(*(start(server) for server in wanted))
        return self.status()

    async def aclose(self) -> None:
        """Shut every server down (politely, then by force). Later calls answer 'closed'."""
        self._closed = True
        servers = [s for s in self._servers.values() if s.client is not None]
        await asyncio.gather(*(self._stop(server) for server in servers))

    async def __aenter__(self) -> LspManager:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _stop(self, server: _Server) -> None:
        client, server.client = server.client, None
        if client is not None:
            await client.stop()
        if server.state in ("running", "starting"):
            server.state = "stopped"

    # ----------------------------------------------------------------------------------------
    # plumbing: routing, start and restart, failure accounting

    async def _on_file(
        self,
        path: str | Path,
        ask: Callable[[_Server, LspClient, Path], Awaitable[tuple[T, bool]]],
        empty: T,
        *,
        start: bool = True,
    ) -> LspReply[T]:
        if self._closed:
            return LspReply(empty, problem="the language servers have been shut down")
        if not self.config.enabled:
            return LspReply(empty, problem="language servers are turned off in the configuration")
        file = self._absolute(path)
        shown = self._show(file)
        if file != self.root and self.root not in file.parents:
            return LspReply(empty, problem=f"{shown} is outside the workspace {self.root}")
        if not file.is_file():
            return LspReply(empty, problem=f"{shown} does not exist or is not a file")
        candidate = choose(self._candidates, file)
        if candidate is None:
            return LspReply(empty, problem=self._no_server_text(file))
        server = self._servers[candidate.config.name]
        if not candidate.installed:
            return LspReply(
                empty,
                server=server.name,
                problem=f"{server.name} ({candidate.config.command[0]}) is not installed, so "
                f"there is no language server for {file.suffix} files; use grep and read_file",
            )
        if not start and not server.running:
            return LspReply(empty, server=server.name, problem=f"{server.name} is not running")
        return await self._guarded(server, lambda client: ask(server, client, file), empty)

    async def _guarded(
        self,
        server: _Server,
        ask: Callable[[LspClient], Awaitable[tuple[T, bool]]],
        empty: T,
    ) -> LspReply[T]:
        """Run `ask` against a started server, turning every failure into a reply."""
        try:
            client, notice = await self._ensure(server)
        except _Unavailable as exc:
            return LspReply(empty, server=server.name, problem=str(exc))
        try:
            value, complete = await ask(client)
        except _Unavailable as exc:
            return LspReply(empty, server=server.name, problem=str(exc), notice=notice)
        except _StillAnalysing as exc:
            return LspReply(
                empty, server=server.name, notice=notice, complete=False, analysing=exc.versions
            )
        except LspResponseError as exc:
            return LspReply(empty, server=server.name, problem=exc.message, notice=notice)
        except LspError as exc:  # a crash or a hang: the server is taken down
            problem = await self._fail(server, client, exc.message)
            return LspReply(empty, server=server.name, problem=problem, notice=notice)
        except OSError as exc:
            return LspReply(empty, server=server.name, problem=f"could not read a file: {exc}")
        return LspReply(value, server=server.name, notice=notice, complete=complete)

    async def _ensure(self, server: _Server) -> tuple[LspClient, str | None]:
        """The server's running client, started or restarted as the restart budget allows."""
        async with server.lock:
            if self._closed:
                raise _Unavailable("the language servers have been shut down")
            if server.client is not None and server.client.alive:
                return server.client, None
            if server.state == "unavailable":
                raise _Unavailable(self._off_text(server))
            notice = None
            if server.client is not None:  # it died since the last call
                old, server.client = server.client, None
                await old.kill()
            if server.starts > 0:
                if server.starts > self.config.max_restarts:
                    server.state = "unavailable"
                    raise _Unavailable(self._off_text(server))
                notice = f"{server.name} had stopped ({server.last_error}) and was restarted"
            server.starts += 1
            server.state = "starting"
            config = server.candidate.config
            client = LspClient(
                config.name,
                server.candidate.command,
                self.root,
                env=config.env,
                initialization_options=config.initialization_options,
                settings=config.settings,
                request_timeout=self.config.request_timeout,
                on_exit=lambda reason: self._exited(server, client, reason),
            )
            try:
                await client.start(self.config.startup_timeout)
            except LspError as exc:
                raise _Unavailable(self._record_failure(server, exc.message)) from None
            server.client = client
            server.state = "running"
            if notice:
                log.warning("language server %s", notice)
            return client, notice

    def _exited(self, server: _Server, client: LspClient, reason: str) -> None:
        """Called by a client whose process ended on its own."""
        if server.client is client:
            self._record_failure(server, f"{server.name} {reason}")

    async def _fail(self, server: _Server, client: LspClient, reason: str) -> str:
        """Take a crashed or hung server down; the reply text says what happens next."""
        async with server.lock:
            if server.client is client:
                server.client = None
                text = self._record_failure(server, reason)
            else:
                text = self._next_step(server, reason)
        await client.kill()
        return text

    def _record_failure(self, server: _Server, reason: str) -> str:
        server.last_error = reason
        exhausted = server.starts > self.config.max_restarts
        server.state = "unavailable" if exhausted else "crashed"
        log.warning("language server %s failed: %s", server.name, reason)
        return self._next_step(server, reason)

    def _next_step(self, server: _Server, reason: str) -> str:
        if server.state == "unavailable":
            return (
                f"{reason}; {server.name} already had its restart, so it stays off for this "
                "session; use grep and read_file instead"
            )
        return f"{reason}; {server.name} will be restarted on the next request"

    def _off_text(self, server: _Server) -> str:
        return (
            f"{server.name} is unavailable: it failed again after a restart "
            f"(last error: {server.last_error}); use grep and read_file instead"
        )

    def _no_server_text(self, file: Path) -> str:
        suffixes = sorted({ext for c in self._candidates for ext in c.config.extensions})
        return (
            f"no language server is configured for {file.suffix or 'extension-less'} files "
            f"(servers cover {', '.join(suffixes)}); use grep and read_file"
        )

    async def _sync(
        self, server: _Server, client: LspClient, file: Path, *, text: str | None = None
    ) -> _Doc:
        """Send the file's current text (from disk unless given) so the server sees it."""
        if text is None:
            text = await asyncio.to_thread(_read_text, file)
        version = await client.sync_document(file, text, server.candidate.config.language_id(file))
        return _Doc(file, path_to_uri(file), text, split_lines(text), version)

    def _converter(self, known: dict[Path, list[str]]) -> Converter:
        cache = dict(known)

        def lines_of(path: Path) -> list[str]:
            if path not in cache:
                try:
                    cache[path] = split_lines(_read_text(path))
                except OSError:
                    cache[path] = []
            return cache[path]

        return Converter(self.root, lines_of)

    def _absolute(self, path: str | Path) -> Path:
        raw = Path(path)
        return Path(os.path.realpath(raw if raw.is_absolute() else self.root / raw))

    def _show(self, file: Path) -> str:
        return display_path(file, self.root)


def _read_text(path: Path) -> str:
    """A file's exact text (line endings kept), undecodable bytes replaced."""
    return path.read_bytes().decode("utf-8", errors="replace")


def _capped(items: list[T], most: int) -> tuple[list[T], bool]:
    return items[:most], len(items) <= most


def _matching(symbols: list[LspSymbol], query: str) -> list[LspSymbol]:
    needle = query.casefold()
    return [s for s in symbols if needle in s.name.casefold()]
