"""An asynchronous client for one language server process, speaking JSON-RPC 2.0 over stdio.

The server runs in its own process group. A background task reads its stdout: responses
resolve the matching request's future, the server's own requests (configuration,
registrations, progress tokens) are answered, and `textDocument/publishDiagnostics`
notifications are cached per file. Another task keeps the last lines of stderr for error
reports. Documents are opened, changed and saved with full text, and their versions follow
every change the client sends.

Diagnostics are only "current" when they answer the text the server has now: a publication
that names a version must name the document's current one, and one without a version must
have arrived after that text was sent. Servers that offer the pull model are asked directly
(`textDocument/diagnostic`), and a pull that is not answered in time is "not ready", not a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from journeyman.core.errors import ToolError
from journeyman.integrations.lsp.framing import FrameDecoder, FramingError, encode_message
from journeyman.integrations.lsp.positions import path_to_uri
from journeyman.tools.shell import scrub_env

log = logging.getLogger(__name__)

READ_CHUNK = 64 * 1024
"""Bytes read from the server's stdout at a time."""
STDERR_LINES = 40
"""Lines of the server's stderr kept for error reports."""
STOP_GRACE = 2.0
"""Seconds given to `shutdown`, then to the process to exit, before it is killed."""

_NULL_ANSWERED = frozenset(
    {
        "client/registerCapability",
        "client/unregisterCapability",
        "window/workDoneProgress/create",
        "window/showMessageRequest",
        "window/showDocument",
        "workspace/semanticTokens/refresh",
        "workspace/inlayHint/refresh",
        "workspace/inlineValue/refresh",
        "workspace/codeLens/refresh",
        "workspace/diagnostic/refresh",
    }
)
"""Server requests that need no more than an empty answer from a client like this one."""


_RETRY_LATER = frozenset({-32800, -32801, -32802})
"""JSON-RPC codes for a request cancelled or outdated by new content: ask again later."""


class LspError(ToolError):
    """A language server failed to answer."""


class LspTimeoutError(LspError):
    """A request got no answer in time; the server may be hung."""


class LspServerExitedError(LspError):
    """The server process could not start, exited, or broke the protocol."""


class LspResponseError(LspError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message, details={"code": code})
        self.code = code


@dataclass
class Published:
    """The latest diagnostics a server published for one document."""

    items: list[dict[str, Any]]
    version: int | None
    seq: int
    """Position in the order of all publications this client received (1, 2, ...)."""


@dataclass
class _Document:
    uri: str
    language_id: str
    version: int
    text: str
    sent_after: int = 0
    """The publication count when this version was sent: unversioned diagnostics that arrive
    later are taken to answer it."""


@dataclass
class _Pending:
    method: str
    future: asyncio.Future[Any] = field(repr=False)


class LspClient:
    """One running language server. Create it, `await start()`, use it, `await stop()`."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        root: Path,
        *,
        env: Mapping[str, str] | None = None,
        initialization_options: Mapping[str, Any] | None = None,
        settings: Mapping[str, Any] | None = None,
        request_timeout: float = 20.0,
        on_exit: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.root = root
        self.request_timeout = request_timeout
        self.capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self.exit_reason: str | None = None
        """Why the process ended, once it has (None while it runs or after a clean stop)."""
        self._env = dict(env or {})
        self._init_options = dict(initialization_options or {})
        self._settings = dict(settings or {})
        self._on_exit = on_exit
        self._process: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._answering: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._documents: dict[str, _Document] = {}
        self._document_lock = asyncio.Lock()
        self._published: dict[str, Published] = {}
        self._publications = 0
        self._published_event = asyncio.Event()
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._closed = asyncio.Event()
        self._stopping = False

    # ----------------------------------------------------------------------------------------
    # lifecycle

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def alive(self) -> bool:
        """The process runs and its output is still being read."""
        return self._process is not None and not self._closed.is_set()

    async def start(self, timeout: float) -> None:
        """Spawn the server and complete the initialize handshake within `timeout` seconds."""
        env = scrub_env(os.environ)
        env.update(self._env)
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.root,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise LspServerExitedError(
                f"{self.name}: could not run {' '.join(self.command)}: {exc}"
            ) from exc
        self._tasks = [
            asyncio.create_task(self._read_stdout(), name=f"lsp-{self.name}-stdout"),
            asyncio.create_task(self._read_stderr(), name=f"lsp-{self.name}-stderr"),
        ]
        try:
            result = await self.request("initialize", self._initialize_params(), timeout=timeout)
            await self.notify("initialized", {})
            if self._settings:
                await self.notify("workspace/didChangeConfiguration", {"settings": self._settings})
        except BaseException:
            await self.kill()
            raise
        if isinstance(result, dict):
            self.capabilities = dict(result.get("capabilities") or {})
            self.server_info = dict(result.get("serverInfo") or {})

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Polite shutdown (`shutdown`, `exit`), then a kill if the process lingers."""
        self._stopping = True
        if self.alive:
            with contextlib.suppress(LspError):
                await self.request("shutdown", None, timeout=grace)
                await self.notify("exit", None)
            if self._process is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._process.wait(), grace)
        await self.kill()

    async def kill(self) -> None:
        """Kill the process group at once and stop the reader tasks."""
        self._stopping = True
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), STOP_GRACE)
        if process is not None and process.stdin is not None:
            process.stdin.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._close("stopped")

    def stderr_tail(self, lines: int = 5) -> str:
        """The last lines the server wrote to stderr, joined with ' | '."""
        return " | ".join(list(self._stderr)[-lines:])

    def _initialize_params(self) -> dict[str, Any]:
        try:
            version = metadata.version("journeyman")
        except metadata.PackageNotFoundError:
            version = "0"
        root_uri = path_to_uri(self.root)
        return {
            "processId": os.getpid(),
            "clientInfo": {"name": "journeyman", "version": version},
            "rootUri": root_uri,
            "rootPath": str(self.root),
            "workspaceFolders": [{"uri": root_uri, "name": self.root.name}],
            "initializationOptions": self._init_options or None,
            "capabilities": {
                "general": {"positionEncodings": ["utf-16"]},
                "workspace": {
                    "configuration": True,
                    "workspaceFolders": True,
                    "symbol": {"dynamicRegistration": False},
                },
                "textDocument": {
                    "synchronization": {"didSave": True, "dynamicRegistration": False},
                    "publishDiagnostics": {"versionSupport": True},
                    "diagnostic": {"dynamicRegistration": False, "relatedDocumentSupport": False},
                    "hover": {"contentFormat": ["markdown", "plaintext"]},
                    "definition": {"linkSupport": True},
                    "references": {},
                    "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
                    "completion": {
                        "completionItem": {
                            "snippetSupport": False,
                            "documentationFormat": ["markdown", "plaintext"],
                        }
                    },
                },
                "window": {"workDoneProgress": True},
            },
        }

    # ----------------------------------------------------------------------------------------
    # messages

    async def request(self, method: str, params: Any, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result (raises an `LspError` subclass on failure)."""
        self._check_alive(method)
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = _Pending(method, future)
        limit = self.request_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(limit):
                message = {"jsonrpc": "2.0", "id": request_id, "method": method}
                await self._send(message if params is None else {**message, "params": params})
                return await future
        except TimeoutError:
            with contextlib.suppress(LspError):
                await self.notify("$/cancelRequest", {"id": request_id})
            raise LspTimeoutError(
                f"{self.name} did not answer {method} within {limit:g} s"
            ) from None
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: Any) -> None:
        self._check_alive(method)
        message = {"jsonrpc": "2.0", "method": method}
        await self._send(message if params is None else {**message, "params": params})

    def _check_alive(self, method: str) -> None:
        if not self.alive:
            reason = self.exit_reason or "it is not running"
            raise LspServerExitedError(f"{self.name} cannot take {method}: {reason}")

    async def _send(self, message: Mapping[str, Any]) -> None:
        stdin = self._process.stdin if self._process else None
        if stdin is None or stdin.is_closing():
            raise LspServerExitedError(f"{self.name}: its input is closed")
        try:
            stdin.write(encode_message(message))
            async with asyncio.timeout(self.request_timeout):
                await stdin.drain()  # a server that stops reading fills the pipe
        except TimeoutError:
            raise LspTimeoutError(
                f"{self.name} stopped reading its input for {self.request_timeout:g} s"
            ) from None
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise LspServerExitedError(f"{self.name}: writing to it failed: {exc}") from exc

    async def _read_stdout(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        decoder = FrameDecoder()
        reason = "closed its output"
        try:
            while chunk := await stdout.read(READ_CHUNK):
                for message in decoder.feed(chunk):
                    self._dispatch(message)
        except FramingError as exc:
            reason = f"sent data that is not LSP: {exc}"
        except (OSError, ValueError) as exc:
            reason = f"output could not be read: {exc}"
        if not self._stopping:
            reason = await self._describe_exit(reason)
        self._close(reason)

    async def _read_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        stderr = self._process.stderr
        with contextlib.suppress(OSError, ValueError):
            while line := await stderr.readline():
                text = line.decode("utf-8", errors="replace").rstrip()
                if text:
                    self._stderr.append(text[:500])

    async def _describe_exit(self, reason: str) -> str:
        process = self._process
        assert process is not None
        if process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 1.0)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        code = process.returncode
        if code is None:
            what = f"{reason} (process killed)"
        elif code < 0:
            try:
                what = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                what = f"was killed by signal {-code}"
        else:
            what = f"exited with code {code}"
        tail = self.stderr_tail(3)
        return f"{what}; stderr: {tail}" if tail else what

    def _close(self, reason: str) -> None:
        if self._closed.is_set():
            return
        crashed = not self._stopping
        self.exit_reason = reason if crashed else None
        self._closed.set()
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(
                    LspServerExitedError(f"{self.name} {reason} during {pending.method}")
                )
        self._pending.clear()
        self._wake_diagnostic_waiters()
        if crashed:
            log.info("language server %s %s", self.name, reason)
            if self._on_exit is not None:
                self._on_exit(reason)

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            self._resolve(message)
        elif "id" in message:
            task = asyncio.get_running_loop().create_task(self._answer(message))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
        elif method == "textDocument/publishDiagnostics":
            self._store_diagnostics(message.get("params") or {})
        elif method in ("window/logMessage", "window/showMessage"):
            params = message.get("params") or {}
            if params.get("type") == 1:  # an error worth keeping for reports
                self._stderr.append(f"[{method}] {params.get('message', '')}"[:500])

    def _resolve(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        pending = self._pending.get(request_id) if isinstance(request_id, int) else None
        if pending is None or pending.future.done():
            return
        error = message.get("error")
        if error is not None:
            code = int(error.get("code", 0)) if isinstance(error, dict) else 0
            text = error.get("message", error) if isinstance(error, dict) else error
            pending.future.set_exception(
                LspResponseError(f"{self.name} refused {pending.method}: {text}", code=code)
            )
        else:
            pending.future.set_result(message.get("result"))

    async def _answer(self, message: dict[str, Any]) -> None:
        method = str(message["method"])
        params = message.get("params") or {}
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if method == "workspace/configuration":
            items = params.get("items") or []
            reply["result"] = [self._setting(item.get("section")) for item in items]
        elif method == "workspace/workspaceFolders":
            reply["result"] = [{"uri": path_to_uri(self.root), "name": self.root.name}]
        elif method == "workspace/applyEdit":
            reply["result"] = {"applied": False, "failureReason": "edits go through the agent"}
        elif method in _NULL_ANSWERED:
            reply["result"] = None
        else:
            reply["error"] = {"code": -32601, "message": f"{method} is not supported"}
        with contextlib.suppress(LspError):
            await self._send(reply)

    def _setting(self, section: Any) -> Any:
        if not section:
            return self._settings or None
        value: Any = self._settings
        for part in str(section).split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return value

    # ----------------------------------------------------------------------------------------
    # documents and diagnostics

    def _store_diagnostics(self, params: dict[str, Any]) -> None:
        uri = params.get("uri")
        if not isinstance(uri, str):
            return
        self._publications += 1
        version = params.get("version")
        self._published[uri] = Published(
            items=[item for item in params.get("diagnostics") or [] if isinstance(item, dict)],
            version=version if isinstance(version, int) else None,
            seq=self._publications,
        )
        self._wake_diagnostic_waiters()

    def _wake_diagnostic_waiters(self) -> None:
        self._published_event.set()
        self._published_event = asyncio.Event()

    @property
    def publications(self) -> int:
        """How many diagnostics publications have arrived so far."""
        return self._publications

    def published(self, uri: str) -> Published | None:
        return self._published.get(uri)

    def all_published(self) -> dict[str, Published]:
        return dict(self._published)

    def document_version(self, uri: str) -> int | None:
        """The version of `uri` the server was last sent, or None when it is not open."""
        document = self._documents.get(uri)
        return document.version if document is not None else None

    def current(self, uri: str) -> Published | None:
        """The published diagnostics of `uri` when they answer the text the server has now.

        Diagnostics that name a version count for that version only; diagnostics without one
        count when they arrived after the current text was sent. None means the server has not
        yet reported on the current text (what it said earlier is stale).
        """
        entry = self._published.get(uri)
        document = self._documents.get(uri)
        if entry is None or document is None:
            return entry
        if entry.version is not None:
            return entry if entry.version == document.version else None
        return entry if entry.seq > document.sent_after else None

    async def wait_for_current(self, uri: str, timeout: float) -> Published | None:
        """`current(uri)`, waiting up to `timeout` seconds for it; None when nothing came."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (entry := self.current(uri)) is None:
            remaining = deadline - loop.time()
            if remaining <= 0 or not self.alive:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._published_event.wait(), remaining)
        return entry

    @property
    def pulls_diagnostics(self) -> bool:
        """The server answers `textDocument/diagnostic` (the pull model of LSP 3.17)."""
        return bool(self.capabilities.get("diagnosticProvider"))

    async def pull_diagnostics(self, uri: str, timeout: float) -> Published | None:
        """Ask the server for the diagnostics of `uri` as it is now (pull model).

        None when the answer did not come within `timeout` seconds: the server is still
        working, which is not a failure. The answer is stored like a publication, for the
        version that was current when the request was sent.
        """
        version = self.document_version(uri)
        try:
            report = await self.request(
                "textDocument/diagnostic", {"textDocument": {"uri": uri}}, timeout=timeout
            )
        except LspTimeoutError:
            return None
        except LspResponseError as exc:
            if exc.code in _RETRY_LATER:
                return None
            raise
        if not isinstance(report, dict) or report.get("kind") != "full":
            return self.current(uri)  # "unchanged" (never asked for here) or nonsense
        if version != self.document_version(uri):
            return None  # the text changed while the server answered
        self._publications += 1
        items = report.get("items") or []
        entry = Published(
            items=[item for item in items if isinstance(item, dict)],
            version=version,
            seq=self._publications,
        )
        self._published[uri] = entry
        self._wake_diagnostic_waiters()
        return entry

    def _sync_kind(self) -> int:
        sync = self.capabilities.get("textDocumentSync")
        if isinstance(sync, int):
            return sync
        if isinstance(sync, dict):
            return int(sync.get("change", 0) or 0)
        return 0

    def _save_options(self) -> tuple[bool, bool]:
        """(send didSave, include the text in it)."""
        sync = self.capabilities.get("textDocumentSync")
        if not isinstance(sync, dict) or not sync.get("save"):
            return False, False
        save = sync["save"]
        return True, bool(isinstance(save, dict) and save.get("includeText"))

    async def sync_document(self, path: Path, text: str, language_id: str) -> int | None:
        """Make the server see `text` as the content of `path`.

        Opens the document the first time, sends a full-text change when the text differs
        from what the server last got, and does nothing otherwise. Returns the document's new
        version when something was sent, None when the server was already up to date.
        """
        uri = path_to_uri(path)
        async with self._document_lock:
            document = self._documents.get(uri)
            if document is not None and document.text == text:
                return None
            if document is None:
                document = _Document(uri, language_id, 1, text)
                await self._did_open(document)
            elif self._sync_kind() == 0:  # the server takes no changes: reopen instead
                await self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
                document = _Document(uri, language_id, document.version + 1, text)
                await self._did_open(document)
            else:
                version = document.version + 1
                await self.notify(
                    "textDocument/didChange",
                    {
                        "textDocument": {"uri": uri, "version": version},
                        "contentChanges": [{"text": text}],
                    },
                )
                document = _Document(uri, language_id, version, text)
            # publications read while the text was being sent were made before it
            document.sent_after = self._publications
            self._documents[uri] = document
            return document.version

    async def _did_open(self, document: _Document) -> None:
        await self.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": document.uri,
                    "languageId": document.language_id,
                    "version": document.version,
                    "text": document.text,
                }
            },
        )

    async def save_document(self, path: Path) -> bool:
        """Tell the server an open document was saved; False when it asked not to be told."""
        uri = path_to_uri(path)
        wanted, include_text = self._save_options()
        document = self._documents.get(uri)
        if not wanted or document is None:
            return False
        params: dict[str, Any] = {"textDocument": {"uri": uri}}
        if include_text:
            params["text"] = document.text
        await self.notify("textDocument/didSave", params)
        return True

    async def close_document(self, path: Path) -> None:
        uri = path_to_uri(path)
        async with self._document_lock:
            if self._documents.pop(uri, None) is not None:
                await self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
                self._published.pop(uri, None)

    def is_open(self, path: Path) -> bool:
        return path_to_uri(path) in self._documents
