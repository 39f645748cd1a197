"""Content-Length framing and position conversion, without any server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from journeyman.integrations.lsp.framing import FrameDecoder, FramingError, encode_message
from journeyman.integrations.lsp.positions import (
    column_to_units,
    display_path,
    path_to_uri,
    split_lines,
    units_to_column,
    uri_to_path,
)

MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"rootUri": "file:///w"}},
    {"jsonrpc": "2.0", "method": "window/logMessage", "params": {"message": "héllo 🐍 ✓"}},
    {"jsonrpc": "2.0", "id": 2, "result": None},
]


def test_encoding_counts_bytes_not_characters() -> None:
    frame = encode_message({"text": "é🐍"})
    header, _, body = frame.partition(b"\r\n\r\n")
    assert header == b"Content-Length: %d" % len(body)
    assert len(body) > len('{"text":"é🐍"}')  # é is 2 bytes in UTF-8, the snake 4


def test_several_messages_in_one_chunk_and_extra_headers() -> None:
    stream = b"".join(encode_message(m) for m in MESSAGES)
    decoder = FrameDecoder()
    assert decoder.feed(stream) == MESSAGES and decoder.pending == 0
    typed = (
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: 2\r\n\r\n{}"
    )
    assert FrameDecoder().feed(typed) == [{}]


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=60))
def test_any_chunking_gives_the_same_messages(sizes: list[int]) -> None:
    stream = b"".join(encode_message(m) for m in MESSAGES)
    decoder = FrameDecoder()
    received: list[dict[str, Any]] = []
    position, index = 0, 0
    while position < len(stream):
        size = sizes[index % len(sizes)]
        received.extend(decoder.feed(stream[position : position + size]))
        position += size
        index += 1
    assert received == MESSAGES and decoder.pending == 0


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"Content-Length: 2\r\nnonsense\r\n\r\n{}", "without a colon"),
        (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
        (b"Content-Length: ten\r\n\r\n", "not a number"),
        (b"Content-Length: -1\r\n\r\n", "out of range"),
        (b"Content-Length: 5\r\n\r\n[1,2]", "not an object"),
        (b"Content-Length: 3\r\n\r\n{x}", "not UTF-8 JSON"),
        (b"x" * 9000, "no end of header"),
    ],
)
def test_malformed_streams_are_refused(data: bytes, problem: str) -> None:
    with pytest.raises(FramingError, match=problem):
        FrameDecoder().feed(data)


def test_a_body_over_the_limit_is_refused() -> None:
    with pytest.raises(FramingError, match="out of range"):
        FrameDecoder(max_body=10).feed(b"Content-Length: 11\r\n\r\n")


def test_columns_count_characters_offsets_count_utf16_units() -> None:
    line = "s = '🐍' + name"
    column = line.index("name") + 1  # 11: ten characters before it
    assert column_to_units(line, column) == 11  # ... but eleven UTF-16 units (the snake is two)
    assert units_to_column(line, column) == column
    assert units_to_column(line, 5) == 6  # the snake is the 6th character, at offset 5
    assert units_to_column(line, 6) == 6  # inside its surrogate pair: still the snake
    assert units_to_column(line, 7) == 7
    assert units_to_column("ab", 5) == 6  # past the end counts on
    assert split_lines("a\r\nb\rc\n") == ["a", "b", "c", ""]


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30))
def test_column_round_trip(line: str) -> None:
    for column in range(1, len(line) + 2):
        assert units_to_column(line, column_to_units(line, column)) == column


def test_uris_and_workspace_relative_paths(tmp_path: Path) -> None:
    odd = tmp_path / "a dir" / "ünï.py"
    assert uri_to_path(path_to_uri(odd)) == odd
    assert uri_to_path("untitled:Untitled-1") is None
    assert display_path(odd, tmp_path) == "a dir/ünï.py"
    assert display_path(Path("/usr/lib/x.py"), tmp_path) == "/usr/lib/x.py"
