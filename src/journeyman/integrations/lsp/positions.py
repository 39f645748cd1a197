"""Where things are: file URIs, and positions in the agent's terms versus the protocol's.

The agent counts lines and columns from 1, columns in characters (code points), as read_file
shows them. The protocol counts from 0 and, by default, measures columns in UTF-16 code units,
so a character outside the Basic Multilingual Plane (an emoji, say) is two units wide.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname


def path_to_uri(path: Path) -> str:
    """The `file://` URI of an absolute path."""
    return path.as_uri()


def uri_to_path(uri: str) -> Path | None:
    """The local path a `file://` URI names, or None for other schemes."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(url2pathname(unquote(parsed.path)))


def display_path(path: Path, root: Path) -> str:
    """Workspace-relative POSIX form of a path inside `root`; the absolute path otherwise."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        real = Path(os.path.realpath(path))
        try:
            rel = real.relative_to(root)
        except ValueError:
            return str(path)
    return rel.as_posix() or "."


def utf16_units(text: str) -> int:
    """Length of `text` in UTF-16 code units."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def column_to_units(line_text: str, column: int) -> int:
    """0-based UTF-16 offset of the 1-based character column `column` on a line.

    Columns past the end of the line land just after its last character.
    """
    return utf16_units(line_text[: max(column - 1, 0)])


def units_to_column(line_text: str, units: int) -> int:
    """1-based character column of a 0-based UTF-16 offset on a line.

    An offset inside a surrogate pair maps to the character it splits; offsets past the end
    of the line count on as if the line went on with one-unit characters.
    """
    seen = 0
    for index, char in enumerate(line_text):
        width = 2 if ord(char) > 0xFFFF else 1
        if seen + width > units:
            return index + 1
        seen += width
    return len(line_text) + 1 + max(units - seen, 0)


def line_at(lines: list[str], line: int) -> str:
    """Text of the 0-based line `line`, or "" when the file has fewer lines."""
    return lines[line] if 0 <= line < len(lines) else ""


def split_lines(text: str) -> list[str]:
    """Lines of a file without their endings, split as the protocol does (LF, CRLF, CR)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
