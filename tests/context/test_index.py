"""Workspace index: a real sdist, ignore rules, binary/huge files, refresh, search, repo map."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from journeyman.context.index import (
    IndexConfig,
    Snippet,
    WorkspaceIndexer,
    extract_keywords,
    extract_symbols,
    mentioned_paths,
)
from journeyman.providers.pricing import estimate_tokens
from journeyman.tools.search import find_ripgrep
from tests.support.sdists import PYTEST_BASED, download_sdist, sdist_cache_dir, write

ENGINES = {
    "python": IndexConfig(ripgrep=False),
    "ripgrep": IndexConfig(ripgrep_min_bytes=0),
}
"""Match counting in Python, or by ripgrep (falls back to Python where rg is missing)."""


@pytest.fixture(scope="module")
def pluggy_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return download_sdist(sdist_cache_dir(request, tmp_path_factory), PYTEST_BASED)


@pytest.fixture(scope="module")
def pluggy(pluggy_root: Path) -> WorkspaceIndexer:
    indexer = WorkspaceIndexer(pluggy_root)
    indexer.bootstrap()
    return indexer


def bump(path: Path, text: str) -> None:
    """Rewrite a file and move its mtime forward, so a refresh sees the change for sure."""
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


# --------------------------------------------------------------------------------------------
# A real source distribution


def test_real_sdist_index_and_symbols(pluggy: WorkspaceIndexer) -> None:
    assert "src/pluggy/_manager.py" in pluggy
    assert "pyproject.toml" in pluggy
    assert pluggy.files["src/pluggy/_manager.py"].grammar == "python"
    assert pluggy.files["pyproject.toml"].grammar is None
    symbols = pluggy.symbols("src/pluggy/_manager.py")
    by_name = {(s.parent, s.name): s for s in symbols}
    manager = by_name[(None, "PluginManager")]
    assert (manager.kind, manager.signature) == ("class", "class PluginManager")
    register = by_name[("PluginManager", "register")]
    assert register.kind == "method"
    assert register.signature.startswith("def register(self, plugin")
    assert pluggy.symbols("pyproject.toml") == ()


def test_real_sdist_search_ranks_the_defining_file_first(pluggy: WorkspaceIndexer) -> None:
    hits = pluggy.search("PluginManager", max_results=200)
    assert hits[0].path == "src/pluggy/_manager.py"
    assert all("pluginmanager" in h.text.lower() for h in hits)
    assert "class PluginManager" in "\n".join(h.text for h in hits if h.path == hits[0].path)


@pytest.mark.skipif(find_ripgrep() is None, reason="ripgrep (rg) is not installed")
@pytest.mark.parametrize("keyword", ["hookimpl", "def register", "PluginValidationError", "(self"])
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_real_sdist_search_finds_the_same_lines_as_ripgrep(
    pluggy_root: Path, keyword: str, engine: str
) -> None:
    pluggy = WorkspaceIndexer(pluggy_root, config=ENGINES[engine])
    rg = find_ripgrep()
    assert rg is not None
    proc = subprocess.run(
        [rg, "--no-config", "-n", "-i", "-F", "--hidden", "--no-messages", "--no-heading",
         "--with-filename", "--glob=!.git", "--max-filesize", "1M", "--no-ignore-parent",
         "--no-ignore-global", "--no-ignore-exclude", "--no-ignore-dot", "--no-require-git",
         "-e", keyword, "."],
        cwd=pluggy.root, capture_output=True, text=True, check=False,
    )  # fmt: skip
    expected = set()
    for line in proc.stdout.splitlines():
        path, number, _ = line.split(":", 2)
        expected.add((path.removeprefix("./"), int(number)))
    found = {(h.path, h.line) for h in pluggy.search(keyword, max_results=None)}
    assert expected and found == expected


def test_real_sdist_repo_map(pluggy: WorkspaceIndexer) -> None:
    result = pluggy.repo_map("register a plugin with the PluginManager", max_tokens=1000)
    assert result.files[0] == "src/pluggy/_manager.py"
    assert result.text.startswith("src/pluggy/_manager.py:\n  def _warn_for_function(")
    assert "\n  class PluginManager\n    def __init__(self, project_name: str) -> None\n" in (
        result.text
    )
    assert "\n    def register(self, plugin: _Plugin, name: str | None = None) -> str | None\n" in (
        result.text
    )
    assert "\n    def _hookexec(self, hook_name: str, methods: Sequence[HookImpl]," in result.text
    assert result.tokens <= 1000
    assert result.truncated
    assert result.candidates >= len(result.files)


# --------------------------------------------------------------------------------------------
# Which files are indexed


def test_gitignore_and_exclude_patterns(tmp_path: Path) -> None:
    write(tmp_path, {
        ".gitignore": "build/\n*.log\n/secret.txt\n",
        "src/a.py": "alpha = 1\n",
        "src/.gitignore": "*.tmp\n!keep.log\n",
        "src/x.tmp": "alpha\n",
        "src/keep.log": "alpha\n",
        "src/other.log": "alpha\n",
        "build/out.py": "alpha\n",
        "secret.txt": "alpha\n",
        "docs/secret.txt": "alpha\n",
        "node_modules/pkg/index.js": "alpha\n",
        "vendor/lib.py": "alpha\n",
        ".hidden/conf.py": "alpha\n",
    })  # fmt: skip
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("alpha\n")
    config = IndexConfig(exclude=["node_modules/", "vendor/"])
    indexer = WorkspaceIndexer(tmp_path, config=config)
    assert sorted(indexer.files) == [
        ".gitignore",
        ".hidden/conf.py",
        "docs/secret.txt",
        "src/.gitignore",
        "src/a.py",
        "src/keep.log",
    ]


def test_binary_and_huge_files_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, {"small.py": "x = 1\n", "big.txt": "y" * 5000})
    (tmp_path / "blob.dat").write_bytes(b"abc\0def")
    (tmp_path / "nul.txt").write_bytes(b"text then \0 a nul")
    (tmp_path / "image.png").write_bytes(b"no nul but a binary extension")
    indexer = WorkspaceIndexer(tmp_path, config=IndexConfig(max_file_bytes=4096))
    stats = indexer.bootstrap()
    assert sorted(indexer.files) == ["small.py"]
    assert (stats.skipped_binary, stats.skipped_large) == (3, 1)
    assert indexer.search("y" * 10) == []


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", {"o.py": "outside_name = 1\n"})
    work = write(tmp_path / "work", {"w.py": "inside = 1\n"})
    (work / "link").symlink_to(outside, target_is_directory=True)
    (work / "file_link.py").symlink_to(outside / "o.py")
    assert sorted(WorkspaceIndexer(work).files) == ["w.py"]


def test_max_files_stops_the_walk(tmp_path: Path) -> None:
    write(tmp_path, {f"f{i}.txt": "x\n" for i in range(5)})
    indexer = WorkspaceIndexer(tmp_path, config=IndexConfig(max_files=3))
    stats = indexer.bootstrap()
    assert stats.truncated
    assert len(indexer.files) == 3


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        WorkspaceIndexer(tmp_path / "missing")


# --------------------------------------------------------------------------------------------
# Refresh


def test_refresh_by_mtime(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "def old_name(): pass\n", "b.py": "b = 1\n", "c.py": "c = 1\n"})
    indexer = WorkspaceIndexer(tmp_path)
    assert indexer.bootstrap().added == ("a.py", "b.py", "c.py")
    nothing = indexer.refresh()
    assert (nothing.added, nothing.changed, nothing.removed) == ((), (), ())

    bump(tmp_path / "a.py", "def new_name(): pass\n")
    (tmp_path / "c.py").unlink()
    write(tmp_path, {"d/e.py": "e = 1\n"})
    stats = indexer.refresh()
    assert (stats.added, stats.changed, stats.removed) == (("d/e.py",), ("a.py",), ("c.py",))
    assert stats.files == 3
    assert indexer.search("old_name") == []
    assert [h.path for h in indexer.search("new_name")] == ["a.py"]
    assert [s.name for s in indexer.symbols("a.py")] == ["new_name"]


def test_refresh_of_given_paths_only(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "a = 1\n", "pkg/b.py": "b = 1\n", "pkg/c.py": "c = 1\n"})
    indexer = WorkspaceIndexer(tmp_path)
    indexer.bootstrap()
    bump(tmp_path / "a.py", "a = 2\n")
    bump(tmp_path / "pkg/b.py", "b = 2\n")
    (tmp_path / "pkg/c.py").unlink()
    write(tmp_path, {"pkg/new.py": "n = 1\n"})

    only_a = indexer.refresh(["a.py"])
    assert (only_a.added, only_a.changed, only_a.removed) == ((), ("a.py",), ())
    assert "pkg/c.py" in indexer  # not looked at yet

    pkg = indexer.refresh([tmp_path / "pkg"])
    assert (pkg.added, pkg.changed, pkg.removed) == (("pkg/new.py",), ("pkg/b.py",), ("pkg/c.py",))

    (tmp_path / "a.py").unlink()
    gone = indexer.refresh(["a.py", "../outside.py"])
    assert gone.removed == ("a.py",)


def test_refresh_drops_a_file_that_became_binary_or_ignored(tmp_path: Path) -> None:
    write(tmp_path, {"a.txt": "text\n", "b.txt": "text\n"})
    indexer = WorkspaceIndexer(tmp_path)
    indexer.bootstrap()
    (tmp_path / "a.txt").write_bytes(b"now \0 binary")
    os.utime(tmp_path / "a.txt", ns=(0, 10**18))
    write(tmp_path, {".gitignore": "b.txt\n"})
    stats = indexer.refresh()
    assert set(stats.removed) == {"a.txt", "b.txt"}
    assert stats.added == (".gitignore",)
    again = indexer.refresh()
    assert (again.added, again.changed, again.removed, again.skipped_binary) == ((), (), (), 1)


def walks(indexer: WorkspaceIndexer, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The starts of every walk `indexer` makes from now on."""
    starts: list[Path] = []
    real = indexer._scan

    def counted(start: Path, walked: object) -> object:
        starts.append(start)
        return real(start, walked)  # type: ignore[arg-type]

    monkeypatch.setattr(indexer, "_scan", counted)
    return starts


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux only")
def test_a_refresh_with_nothing_changed_walks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {"a.py": "a = 1\n", "pkg/deep/b.py": "b = 1\n"})
    indexer = WorkspaceIndexer(tmp_path)
    indexer.bootstrap()
    starts = walks(indexer, monkeypatch)
    for _ in range(3):
        nothing = indexer.refresh()
        assert (nothing.added, nothing.changed, nothing.removed, nothing.files) == ((), (), (), 2)
    assert starts == []

    (tmp_path / "pkg/deep/b.py").write_text("b = 22\n")  # a write in place, in a deep folder
    assert indexer.refresh().changed == ("pkg/deep/b.py",)
    assert [h.path for h in indexer.search("22")] == ["pkg/deep/b.py"]
    write(tmp_path, {"pkg/deep/new/c.py": "c = 1\n"})
    assert indexer.refresh().added == ("pkg/deep/new/c.py",)
    (tmp_path / "pkg/deep/new/c.py").write_text("c = 2\n")  # in a folder made after bootstrap
    assert indexer.refresh().changed == ("pkg/deep/new/c.py",)
    assert len(starts) == 3
    indexer.refresh()
    assert len(starts) == 3


def test_an_index_reading_generated_folders_walks_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch leaves out node_modules and the like: an index that reads them must walk."""
    write(tmp_path, {"a.js": "a\n", "node_modules/m/index.js": "m\n"})
    indexer = WorkspaceIndexer(tmp_path, config=IndexConfig(exclude=[]))
    indexer.bootstrap()
    starts = walks(indexer, monkeypatch)
    (tmp_path / "node_modules/m/index.js").write_text("changed\n")
    os.utime(tmp_path / "node_modules/m/index.js", ns=(0, 10**18))
    assert indexer.refresh().changed == ("node_modules/m/index.js",)
    indexer.refresh()
    assert len(starts) == 2


# --------------------------------------------------------------------------------------------
# Keywords


def test_extract_keywords_from_a_task() -> None:
    goal = (
        "Fix the bug where `parse_config` crashes on empty files in src/app/settings.py; "
        "the ConfigLoader should return the defaults instead of raising."
    )
    keywords = extract_keywords(goal)
    assert keywords[:3] == ["parse_config", "settings.py", "ConfigLoader"]
    assert "the" not in keywords and "Fix" not in keywords and "files" not in keywords
    assert "defaults" in keywords and "crashes" in keywords


def test_extract_keywords_from_a_traceback() -> None:
    error = (
        "Traceback (most recent call last):\n"
        '  File "/home/dev/src/app/loader.py", line 12, in load_settings\n'
        "    data = json.loads(text)\n"
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n"
    )
    keywords = extract_keywords(error, max_keywords=5)
    assert keywords[0] == "json.decoder.JSONDecodeError"
    assert {"loader.py", "load_settings", "json.loads"} <= set(keywords)
    assert "Traceback" not in keywords and "line" not in keywords
    assert mentioned_paths(error) == ["/home/dev/src/app/loader.py"]


def test_extract_keywords_dedupes_and_limits() -> None:
    assert extract_keywords("Widget widget WIDGET gadget", max_keywords=1) == ["Widget"]
    assert extract_keywords("") == []
    assert WorkspaceIndexer.extract_keywords("an `os.path` question") == ["os.path", "question"]


# --------------------------------------------------------------------------------------------
# Search


@pytest.fixture(params=sorted(ENGINES))
def small(tmp_path: Path, request: pytest.FixtureRequest) -> WorkspaceIndexer:
    write(tmp_path, {
        "app/widget.py": "from app.util import helper\n\nuse = helper(1)\nuse2 = helper(2)\n"
        "x = HELPER\n",
        "app/util.py": "import os\n\n\ndef helper(x):\n    return x\n",
        "app/helpers_doc.md": "# helper\n",
        "notes.txt": "Grüße an Helper und GRÜSSE\nx == y\n",
    })  # fmt: skip
    return WorkspaceIndexer(tmp_path, config=ENGINES[request.param])


def test_search_ranking_and_case(small: WorkspaceIndexer) -> None:
    hits = small.search("helper")
    # the file defining it, then the one named after it, then by number of matches
    assert [h.path for h in hits] == [
        "app/util.py",
        "app/helpers_doc.md",
        "app/widget.py",
        "app/widget.py",
        "app/widget.py",
        "app/widget.py",
        "notes.txt",
    ]
    assert hits[0].render() == "app/util.py:4: def helper(x):"
    assert [h.line for h in small.search("HELPER", case_sensitive=True)] == [5]
    assert len(small.search("helper", max_results=2)) == 2
    assert small.search("helper", max_results=0) == []
    assert small.search("") == []


def test_search_phrases_punctuation_and_non_ascii(small: WorkspaceIndexer) -> None:
    assert [(h.path, h.line) for h in small.search("helper(2)")] == [("app/widget.py", 4)]
    assert [(h.path, h.line) for h in small.search("x == y")] == [("notes.txt", 2)]
    assert [(h.path, h.line) for h in small.search("==")] == [("notes.txt", 2)]
    assert [h.line for h in small.search("GRÜSSE")] == [1]  # Unicode case folding
    assert small.search("not there at all") == []


def test_search_from_disk_without_the_text_cache(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "class Thing:\n    pass\n", "b.py": "Thing()\nThing()\n"})
    indexer = WorkspaceIndexer(tmp_path, config=IndexConfig(text_cache_bytes=0))
    assert [h.path for h in indexer.search("thing")] == ["a.py", "b.py", "b.py"]
    assert indexer.candidates("thing") == ["a.py", "b.py"]
    assert indexer.candidates("zzz") == []


# --------------------------------------------------------------------------------------------
# Snippets


def test_read_snippets_windows_and_limits(tmp_path: Path) -> None:
    lines = [f"line {i}" for i in range(1, 31)]
    lines[4] = "target one"
    lines[7] = "TARGET two"
    lines[25] = "target three"
    write(tmp_path, {"f.txt": "\n".join(lines) + "\n", "short.txt": "a\nb\n"})
    indexer = WorkspaceIndexer(tmp_path)
    snippets = indexer.read_snippets(["f.txt"], ["target"], context=2)
    assert [(s.start, s.end) for s in snippets] == [(3, 10), (24, 28)]
    assert snippets[0].text.split("\n")[2] == "target one"
    capped = indexer.read_snippets(["f.txt"], ["target"], context=2, max_lines=10)
    assert [(s.start, s.end) for s in capped] == [(3, 10), (24, 25)]
    head = indexer.read_snippets(["short.txt", "f.txt"], max_lines=3)
    assert head == [
        Snippet("short.txt", 1, 2, "a\nb"),
        Snippet("f.txt", 1, 3, "line 1\nline 2\nline 3"),
    ]
    assert head[1].render() == "f.txt:1-3\n1| line 1\n2| line 2\n3| line 3"


def test_read_snippets_passes_over_unreadable_paths(tmp_path: Path) -> None:
    (tmp_path / "bin.dat").write_bytes(b"\0\0")
    write(tmp_path / "ws", {"a.txt": "x\n"})
    indexer = WorkspaceIndexer(tmp_path / "ws")
    paths = ["missing.txt", "../bin.dat", str(tmp_path / "bin.dat"), "a.txt"]
    assert [s.path for s in indexer.read_snippets(paths)] == ["a.txt"]


# --------------------------------------------------------------------------------------------
# Symbols and the repo map


def test_symbols_of_other_languages() -> None:
    def names(source: str, grammar: str) -> list[tuple[str | None, str, str]]:
        return [(s.parent, s.kind, s.signature) for s in extract_symbols(source.encode(), grammar)]

    assert names("func (s *Server) Start(ctx context.Context) error { return nil }\n"
                 "type Server struct { n int }\n", "go") == [
        ("Server", "method", "func (s *Server) Start(ctx context.Context) error"),
        (None, "struct", "type Server struct"),
    ]  # fmt: skip
    assert names("pub trait Shape { fn area(&self) -> f64; }\n", "rust") == [
        (None, "trait", "pub trait Shape"),
        ("Shape", "method", "fn area(&self) -> f64"),
    ]
    assert names("export class Api { async get(id: string): Promise<Item> { return x } }\n"
                 "export const run = async (n: number) => n\n", "typescript") == [
        (None, "class", "class Api"),
        ("Api", "method", "async get(id: string): Promise<Item>"),
        (None, "function", "const run = async (n: number) =>"),
    ]  # fmt: skip
    assert names("public class App { public static void main(String[] args) {} }\n", "java") == [
        (None, "class", "public class App"),
        ("App", "method", "public static void main(String[] args)"),
    ]
    assert extract_symbols(b"def broken(:\n  pass\nclass Ok: pass\n", "python")[-1].name == "Ok"
    assert extract_symbols(b"whatever", "cobol") == ()


@pytest.fixture
def project(tmp_path: Path) -> WorkspaceIndexer:
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/billing/invoice.py": "class Invoice:\n    def total(self) -> int:\n        return 0\n"
        "    def add_line(self, item: str, price: int) -> None:\n        pass\n",
        "pkg/billing/tax.py": "def vat(amount: int) -> int:\n    return amount\n",
        "pkg/users.py": "class User:\n    def __init__(self, name: str):\n        pass\n",
        "pkg/many.py": "".join(f"def f{i}(x):\n    pass\n" for i in range(60)),
        "web/app.ts": "export function render(invoice: Invoice): string { return '' }\n",
        "README.md": "# invoices\n",
    })  # fmt: skip
    return WorkspaceIndexer(tmp_path)


def test_repo_map_ranks_by_goal_and_errors(project: WorkspaceIndexer) -> None:
    result = project.repo_map("Invoice totals are wrong when adding a line")
    assert result.files[0] == "pkg/billing/invoice.py"
    assert result.text.startswith(
        "pkg/billing/invoice.py:\n"
        "  class Invoice\n"
        "    def total(self) -> int\n"
        "    def add_line(self, item: str, price: int) -> None\n"
    )
    assert "web/app.ts:\n  function render(invoice: Invoice): string" in result.text
    assert "README.md" not in result.text  # no symbols
    assert "pkg/__init__.py" not in result.files

    error = 'Traceback:\n  File "/srv/pkg/users.py", line 3, in __init__\nTypeError: boom'
    assert project.repo_map("Invoice totals", [error]).files[0] == "pkg/users.py"
    assert project.rank_files("", focus=["pkg/billing/tax.py"])[0] == "pkg/billing/tax.py"
    # with no goal: shallow paths first
    assert project.rank_files()[:3] == ["pkg/__init__.py", "pkg/many.py", "pkg/users.py"]


@pytest.mark.parametrize("budget", [20, 60, 150, 250, 5000])
def test_repo_map_stays_within_its_budget(project: WorkspaceIndexer, budget: int) -> None:
    result = project.repo_map("invoice", max_tokens=budget)
    assert result.tokens <= budget
    assert result.tokens == estimate_tokens(result.text)
    assert result.truncated == (budget < 5000)


def test_repo_map_cuts_a_long_file_with_a_more_line(project: WorkspaceIndexer) -> None:
    result = project.repo_map("f1 f2 f3", max_tokens=60)
    assert result.files == ("pkg/many.py",)
    assert result.text.startswith("pkg/many.py:\n  def f0(x)\n  def f1(x)\n")
    assert result.text.splitlines()[-1].startswith("  ... ") and result.text.endswith(" more")


def test_repo_map_with_a_custom_token_counter(project: WorkspaceIndexer) -> None:
    words = WorkspaceIndexer(project.root, count_tokens=lambda text: len(text.split()))
    result = words.repo_map("invoice", max_tokens=12)
    assert len(result.text.split()) <= 12 and result.files


def test_repo_map_of_an_empty_workspace(tmp_path: Path) -> None:
    result = WorkspaceIndexer(tmp_path).repo_map("anything")
    assert (result.text, result.files, result.tokens, result.candidates) == ("", (), 0, 0)
