"""TOML text to data, where a file nested too deeply is a decoding error like any other.

`tomllib` parses nested arrays and tables by recursion: a few thousand `[` in a repository's
config file would end the program with a `RecursionError` instead of a clear message.
"""

from __future__ import annotations

import tomllib
from typing import Any


def parse_toml(data: bytes | str) -> dict[str, Any]:
    """The document's data; raises `tomllib.TOMLDecodeError` for text that is not TOML, or
    nested too deeply to read, and `UnicodeDecodeError` for bytes that are not UTF-8."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(
            "arrays or tables are nested too deeply to read (thousands of levels)"
        ) from None
