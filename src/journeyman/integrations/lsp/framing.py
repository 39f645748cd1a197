"""Content-Length framing of JSON-RPC messages, as the Language Server Protocol sends them.

Each message is a header block (`Name: value` lines ended by CRLF, then an empty line) and a
UTF-8 JSON body of exactly `Content-Length` bytes. `FrameDecoder` is incremental: feed it the
bytes as they arrive, in chunks of any size, and it returns the messages completed so far.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_HEADER_BYTES = 8 * 1024
"""A header block longer than this is taken as garbage on the stream, not a header."""
MAX_BODY_BYTES = 256 * 1024 * 1024
"""Largest body accepted (bytes); a larger Content-Length means the stream is corrupt."""

_SEPARATOR = b"\r\n\r\n"


class FramingError(ValueError):
    """The byte stream does not follow the Content-Length framing (or a body is not JSON)."""


def encode_message(message: Mapping[str, Any]) -> bytes:
    """One framed message: the header block followed by the compact JSON body."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class FrameDecoder:
    """Turns a byte stream into JSON-RPC messages, whatever the chunk boundaries are."""

    def __init__(self, *, max_body: int = MAX_BODY_BYTES) -> None:
        self._buffer = bytearray()
        self._body_length: int | None = None
        self._max_body = max_body

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole message."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Add received bytes; return every message they complete, in order.

        Raises `FramingError` when the stream is malformed; the decoder is then unusable,
        because there is no reliable way to find the start of the next message.
        """
        self._buffer.extend(data)
        messages: list[dict[str, Any]] = []
        while True:
            if self._body_length is None:
                end = self._buffer.find(_SEPARATOR)
                if end < 0:
                    if len(self._buffer) > MAX_HEADER_BYTES:
                        raise FramingError(
                            f"no end of header after {len(self._buffer)} bytes: "
                            f"{bytes(self._buffer[:60])!r}..."
                        )
                    return messages
                self._body_length = self._parse_header(bytes(self._buffer[:end]))
                del self._buffer[: end + len(_SEPARATOR)]
            if len(self._buffer) < self._body_length:
                return messages
            body = bytes(self._buffer[: self._body_length])
            del self._buffer[: self._body_length]
            self._body_length = None
            messages.append(_decode_body(body))

    def _parse_header(self, block: bytes) -> int:
        length: int | None = None
        for raw_line in block.split(b"\r\n"):
            line = raw_line.decode("ascii", errors="replace")
            name, colon, value = line.partition(":")
            if not colon:
                raise FramingError(f"header line without a colon: {line[:80]!r}")
            if name.strip().lower() == "content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise FramingError(
                        f"Content-Length is not a number: {value.strip()!r}"
                    ) from None
        if length is None:
            raise FramingError(f"header without Content-Length: {block[:80]!r}")
        if length < 0 or length > self._max_body:
            raise FramingError(f"Content-Length {length} is out of range")
        return length


def _decode_body(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FramingError(f"body is not UTF-8 JSON ({exc}): {body[:80]!r}") from None
    if not isinstance(value, dict):
        raise FramingError(f"body is JSON but not an object: {body[:80]!r}")
    return value
