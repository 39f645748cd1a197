"""A misbehaving language server for failure tests: `python lsp_server.py MODE`.

Speaks Content-Length framed JSON-RPC on stdin/stdout like a real server, then misbehaves:

- `hang`: answers `initialize` (and `shutdown`), then never answers another request
- `crash`: answers `initialize`, then exits with status 3 on the first other request
- `mute`: reads everything and never answers at all (not even `initialize`)
- `garbage`: answers `initialize`, then writes bytes that are not LSP framing

and three slow analysers, for the freshness of diagnostics. Each reports every `hass` in a
document as an undefined name, but only once the client sends the notification `fake/release`
for the document's current version, so tests decide when analysis ends (no sleeps):

- `versioned`: publishes with the document version; after each change it at once re-publishes
  the previous version's diagnostics (a late, stale publication) before holding the new ones
- `unversioned`: publishes without a version, like servers that do not support it
- `pull`: offers `textDocument/diagnostic` and holds its answers until the release

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


ANALYSERS = ("versioned", "unversioned", "pull")


def problems(text: str) -> list[dict[str, Any]]:
    """An error for every `hass` in `text` (columns in UTF-16 units equal characters here)."""
    found = []
    for number, line in enumerate(text.splitlines()):
        start = line.find("hass")
        while start >= 0:
            found.append(
                {
                    "range": {
                        "start": {"line": number, "character": start},
                        "end": {"line": number, "character": start + 4},
                    },
                    "severity": 1,
                    "source": "fake",
                    "message": '"hass" is not defined',
                }
            )
            start = line.find("hass", start + 4)
    return found


class Analyser:
    """The slow analysers: documents, their versions, and who waits for what."""

    def __init__(self, mode: str, stdout: BinaryIO) -> None:
        self.mode = mode
        self.stdout = stdout
        self.texts: dict[str, tuple[int, str]] = {}
        self.released: dict[str, int] = {}
        self.held: dict[str, list[Any]] = {}

    def publish(self, uri: str, version: int, text: str) -> None:
        params: dict[str, Any] = {"uri": uri, "diagnostics": problems(text)}
        if self.mode == "versioned":
            params["version"] = version
        notice = {"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": params}
        send(self.stdout, notice)

    def answer(self, ident: Any, uri: str) -> None:
        result = {"kind": "full", "items": problems(self.texts[uri][1])}
        send(self.stdout, {"jsonrpc": "2.0", "id": ident, "result": result})

    def notified(self, method: str, params: dict[str, Any]) -> None:
        document = params.get("textDocument") or {}
        uri = document.get("uri", "")
        if method in ("textDocument/didOpen", "textDocument/didChange"):
            text = document.get("text")
            if text is None:
                text = params["contentChanges"][-1]["text"]
            previous = self.texts.get(uri)
            self.texts[uri] = (document["version"], text)
            if self.mode == "versioned" and previous is not None:
                self.publish(uri, *previous)
        elif method == "fake/release":
            uri = params["uri"]
            version, text = self.texts[uri]
            self.released[uri] = version
            if self.mode == "pull":
                for ident in self.held.pop(uri, []):
                    self.answer(ident, uri)
            else:
                self.publish(uri, version, text)

    def requested(self, ident: Any, params: dict[str, Any]) -> None:
        uri = params["textDocument"]["uri"]
        if self.released.get(uri) == self.texts[uri][0]:
            self.answer(ident, uri)
        else:
            self.held.setdefault(uri, []).append(ident)


def main(mode: str) -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    analyser = Analyser(mode, stdout)
    while (message := read_message(stdin)) is not None:
        method, ident = message.get("method"), message.get("id")
        if mode in ANALYSERS and ident is None and method != "exit":
            analyser.notified(str(method), message.get("params") or {})
            continue
        if ident is None or mode == "mute":
            if method == "exit":
                return 0
            continue
        if method == "initialize":
            capabilities = dict(CAPABILITIES)
            if mode == "pull":
                capabilities["diagnosticProvider"] = {"interFileDependencies": False}
            result = {"capabilities": capabilities, "serverInfo": {"name": f"fake-{mode}"}}
            send(stdout, {"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "shutdown":
            send(stdout, {"jsonrpc": "2.0", "id": ident, "result": None})
        elif method == "textDocument/diagnostic" and mode == "pull":
            analyser.requested(ident, message.get("params") or {})
        elif mode == "crash":
            sys.stderr.write("fake server: giving up\n")
            return 3
        elif mode == "garbage":
            stdout.write(b"this is not a header\r\n\r\n")
            stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "hang"))
