"""Which files the index holds and how much it caches: its settings and file-type tables."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from journeyman.tools.context import GENERATED_DIRS

DEFAULT_EXCLUDE = GENERATED_DIRS
"""Left out of the index on top of .gitignore: dependency folders, virtualenvs, tool caches."""


def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


BINARY_SUFFIXES = word_set(
    ".pyc .pyo .pyd .so .dll .dylib .exe .o .a .lib .class .jar .war .zip .gz .tgz .bz2 .xz "
    ".zst .7z .rar .whl .egg .png .jpg .jpeg .gif .bmp .ico .webp .tiff .pdf .woff .woff2 .ttf "
    ".otf .eot .mp3 .mp4 .wav .ogg .flac .avi .mov .mkv .db .sqlite .sqlite3 .bin .dat .npy "
    ".npz .pkl .pickle .wasm"
)
"""Extensions treated as binary without reading the file."""

GRAMMARS_BY_SUFFIX: Mapping[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
}
"""File extension -> tree-sitter grammar used for the repo map's symbols."""

_TOKEN_BYTES = bytes(
    c if chr(c).isascii() and (chr(c).isalnum() or c == 0x5F) else 0x20 for c in range(256)
)
"""Maps every byte that is not an ASCII letter, digit or underscore to a space."""


def tokens_of(data: bytes) -> list[bytes]:
    """Tokens of the index: runs of ASCII letters, digits and underscores (what rb'\\w+' finds)."""
    return data.translate(_TOKEN_BYTES).split()


class IndexConfig(BaseModel):
    """What the workspace index holds and how much it shows."""

    max_file_bytes: int = Field(default=1024 * 1024, ge=1)
    """Files larger than this many bytes are left out (generated code, data dumps)."""
    max_files: int = Field(default=200_000, ge=1)
    """Stop indexing after this many files; the rest of the tree is not searched."""
    exclude: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    """Gitignore-style patterns left out on top of the workspace's .gitignore files."""
    snippet_context: int = Field(default=3, ge=0)
    """Lines shown before and after each match in `read_snippets`."""
    snippet_max_lines: int = Field(default=40, ge=1)
    """Most lines `read_snippets` returns for one file."""
    ripgrep: bool = True
    """Let ripgrep (when installed) count matches when the candidate files are large."""
    ripgrep_min_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    """Candidate files holding at least this many bytes in all are counted by ripgrep."""
    text_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """Lowercased file contents kept in memory for search, up to this many bytes in all
    (0: every search reads the candidate files from disk)."""
    repo_map_tokens: int = Field(default=2048, ge=1)
    """Default token budget of the rendered repo map."""
    signature_chars: int = Field(default=160, ge=20)
    """Signatures longer than this are cut (with '...') in the repo map."""
