"""Newline-delimited JSON-RPC messages over two file descriptors, whatever they are: pipes,
sockets, regular files or /dev/null. Reading and writing happen in threads, so a descriptor
that the event loop cannot watch (a file, /dev/null) works like a pipe. A line that is not
JSON is answered with the JSON-RPC parse error instead of being dropped.

The end of the input ends the connection. From a pipe or socket it means the client went
away: at once. From a file it means the client said everything: the requests read are
answered first, unless the agent asks the client something (nobody is left to answer)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import threading
from typing import Any

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 64 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class LineTransport:
    """An `acp` message transport (`send`, `receive`, `close`) over `read_fd` and `write_fd`."""

    def __init__(self, read_fd: int, write_fd: int, *, max_line_bytes: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._max_line_bytes = max_line_bytes
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._write_lock = asyncio.Lock()
        self._closed = False
        mode = os.fstat(read_fd).st_mode
        self._answers_all = not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode))
        self._unanswered: set[str] = set()
        """Ids of the client's requests not answered yet (as JSON text)."""
        self._asked: set[str] = set()
        """Ids of the agent's requests to the client not answered yet."""
        self._changed = asyncio.Event()
        threading.Thread(target=self._read_lines, name="acp-stdin", daemon=True).start()

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._write_lock:  # one whole line at a time, in order
            await asyncio.to_thread(self._write_all, data)
        self._track(message, self._asked, self._unanswered)  # once it is written

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._lines.get()
            if line is None:
                await self._drained()
                return None
            message = await self._decoded(line)
            if message is not None:
                self._track(message, self._unanswered, self._asked)
                return message

    async def close(self) -> None:
        self._closed = True

    def _track(self, message: dict[str, Any], requests: set[str], answered: set[str]) -> None:
        """Note a request in `requests`, or an answer to one of `answered`."""
        if "id" not in message:
            return  # a notification
        key = json.dumps(message["id"])
        if "method" in message:
            requests.add(key)
        else:
            answered.discard(key)
        self._changed.set()

    async def _drained(self) -> None:
        """At the end of a file: wait until the client's requests are answered, or until the
        agent asks the client something."""
        if not self._answers_all:
            return
        while self._unanswered and not self._asked:
            self._changed.clear()
            await self._changed.wait()

    async def _decoded(self, line: bytes) -> dict[str, Any] | None:
        """The message on `line`, or None after answering the client with what is wrong."""
        text = line.strip()
        if not text:
            return None
        if len(line) > self._max_line_bytes:
            await self._refuse(PARSE_ERROR, f"message longer than {self._max_line_bytes} bytes")
            return None
        try:
            message = json.loads(text)
        except (ValueError, UnicodeDecodeError) as error:
            await self._refuse(PARSE_ERROR, f"not JSON: {error}")
            return None
        if not isinstance(message, dict):
            await self._refuse(INVALID_REQUEST, "a JSON-RPC message is an object")
            return None
        return message

    async def _refuse(self, code: int, detail: str) -> None:
        """Tell the client (id null: the message's own id cannot be known) and log it."""
        log.warning("ignored a message from the client: %s", detail)
        if self._closed:
            return
        reason = "Parse error" if code == PARSE_ERROR else "Invalid Request"
        error = {"code": code, "message": reason, "data": {"details": detail}}
        with contextlib.suppress(OSError):  # the client stopped reading: input ends soon
            await self.send({"jsonrpc": "2.0", "id": None, "error": error})

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._write_fd, view)
            view = view[written:]

    def _read_lines(self) -> None:
        """Thread: split the input into lines (a line past the limit is kept only up to it,
        plus one byte, so that it is refused without holding it all)."""
        pending = bytearray()
        skipping = False
        try:
            while True:
                chunk = os.read(self._read_fd, READ_CHUNK_BYTES)
                if not chunk:
                    break
                pending += chunk
                while True:
                    end = pending.find(b"\n")
                    if end < 0:
                        break
                    line = bytes(pending[: end + 1])
                    del pending[: end + 1]
                    if skipping:
                        skipping = False
                        continue
                    self._put(line)
                if len(pending) > self._max_line_bytes and not skipping:
                    self._put(bytes(pending[: self._max_line_bytes + 1]))
                    skipping = True
                if skipping:
                    pending.clear()
        except OSError as error:
            log.warning("cannot read from the client any more: %s", error)
        else:
            if pending and not skipping:
                self._put(bytes(pending))  # a last line without its newline
        self._put(None)

    def _put(self, line: bytes | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody listens any more
            self._loop.call_soon_threadsafe(self._lines.put_nowait, line)
