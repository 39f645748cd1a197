"""Workspace index: the text files of a workspace, keyword search, snippets and a repo map.

`WorkspaceIndexer` keeps per text file a small record (size, mtime, grammar), the set of
lowercase word tokens in it, the names it defines, and, within a byte budget, its lowercased
contents (for search). Symbols are parsed on demand and cached.

* **Which files.** Every regular file below the root except what .gitignore files exclude
  (root and nested, with `!` re-includes, as the grep tool applies them), `.git`, the extra
  gitignore-style patterns of `IndexConfig.exclude` (virtualenvs, dependency and tool caches
  by default), symlinks (never followed), binary files (a NUL byte in the first 8 KiB, or a
  well-known binary extension) and files above `IndexConfig.max_file_bytes`.
* **Bootstrap and refresh.** `bootstrap()` reads everything once. `refresh()` walks again and
  re-reads only files whose mtime or size changed (new files are added, vanished ones dropped);
  `refresh(paths)` looks at just those files or directories, for callers that know what they
  changed. A whole `refresh()` returns at once when an inotify watch (`tools.watch`), armed
  before the last whole walk, saw nothing change since (the phased mode refreshes before each
  use, most often to find nothing); where it cannot watch, or the index reads folders the
  watch leaves out (`IndexConfig.exclude` without the generated folders), it walks every time.
  Search, snippets and the repo map bootstrap on first use.
* **Search.** `search(keyword)` finds lines containing a fixed string (case-insensitive by
  default). The token sets answer first which files can possibly contain the keyword (each
  run of word characters in the keyword must be part of a token of the file), so only those
  files are scanned: in memory (lowercased contents are cached up to
  `IndexConfig.text_cache_bytes`), or by ripgrep when the candidates are large enough for its
  parallel scan to pay off. Files are ranked (a definition of the keyword, then the keyword
  in the path, then the number of matches) and the lines of the best files returned.
* **Repo map.** `repo_map(goal, errors)` lists the top-level symbols of code files (classes,
  functions, methods with their signatures, from tree-sitter grammars of
  `tree-sitter-language-pack`) for the files most relevant to the goal and recent errors
  (files named in an error first, then files whose tokens and paths match their keywords,
  weighted by rarity), within a token budget. Files are parsed lazily, best first, and the
  symbols cached until the file changes.

Paths in and out are workspace-relative and '/'-separated.
"""

from __future__ import annotations

from journeyman.context.index.config import (
    BINARY_SUFFIXES,
    DEFAULT_EXCLUDE,
    GRAMMARS_BY_SUFFIX,
    IndexConfig,
    tokens_of,
    word_set,
)
from journeyman.context.index.indexer import WorkspaceIndexer
from journeyman.context.index.keywords import STOP_WORDS, extract_keywords, mentioned_paths
from journeyman.context.index.records import (
    FileEntry,
    IndexStats,
    OutlineSymbol,
    RepoMap,
    SearchHit,
    Snippet,
)
from journeyman.context.index.symbols import extract_symbols

__all__ = [
    "BINARY_SUFFIXES",
    "DEFAULT_EXCLUDE",
    "GRAMMARS_BY_SUFFIX",
    "STOP_WORDS",
    "FileEntry",
    "IndexConfig",
    "IndexStats",
    "OutlineSymbol",
    "RepoMap",
    "SearchHit",
    "Snippet",
    "WorkspaceIndexer",
    "extract_keywords",
    "extract_symbols",
    "mentioned_paths",
    "tokens_of",
    "word_set",
]
