"""A misbehaving language server for failure tests: `python lsp_server.py MODE`.

Speaks Content-Length framed JSON-RPC on stdin/stdout like a real server, then misbehaves:

- `hang`: answers `initialize` (and `shutdown`), then never answers another request
- `crash`: answers `initialize`, then exits with status 3 on the first other request
- `mute`: reads everything and never answers at all (not even `initialize`)
- `garbage`: answers `initialize`, then writes bytes that are not LSP framing

Standard library only; imports nothing from `journeyman`.
"""

from __future__ import annotations

import json
import sys
from typing import Any, BinaryIO


def read_message(stream: BinaryIO) -> dict[str, Any] | None:
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if length is None:
        return None
    value = json.loads(stream.read(length))
    return value if isinstance(value, dict) else None


def send(stream: BinaryIO, message: dict[str, Any]) -> None:
    body = json.dumps(message).encode("utf-8")
    stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    stream.flush()


CAPABILITIES = {
    "textDocumentSync": 1,
    "definitionProvider": True,
    "referencesProvider": True,
    "hoverProvider": True,
    "documentSymbolProvider": True,
}


def main(mode: str) -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (message := read_message(stdin)) is not None:
        method, ident = message.get("method"), message.get("id")
        if ident is None or mode == "mute":
            if method == "exit":
                return 0
            continue
        if method == "initialize":
            result = {"capabilities": CAPABILITIES, "serverInfo": {"name": f"fake-{mode}"}}
            send(stdout, {"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "shutdown":
            send(stdout, {"jsonrpc": "2.0", "id": ident, "result": None})
        elif mode == "crash":
            sys.stderr.write("fake server: giving up\n")
            return 3
        elif mode == "garbage":
            stdout.write(b"this is not a header\r\n\r\n")
            stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "hang"))
