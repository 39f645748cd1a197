"""The page counts a file's lines one way: at "\\n" only, as the tools do."""

from __future__ import annotations

from journeyman.inspector.render import _change, _diff_lines, text_lines
from journeyman.session.store import FileChange
from journeyman.tools.fileio import count_lines

TEXT = "one\u2028still line one\fand still\nsecond\r\n"


def created(after: str) -> FileChange:
    return FileChange(1, "s", 1, "notes.txt", "created", None, after, "write_file", 0.0)


def test_a_file_with_unusual_breaks_is_counted_as_the_tools_count_it() -> None:
    change = created(TEXT)
    lines = _diff_lines(change)
    added = [line for line in lines if line.startswith("+")]
    assert len(added) == count_lines(TEXT) == 2
    assert '<span class="plus">+2</span><span class="minus">−0</span>' in _change(
        change, lines, True
    )


def test_text_lines() -> None:
    assert text_lines("") == []
    assert text_lines("a\nb") == ["a", "b"]
    assert text_lines("a\r\nb\n") == ["a", "b"]
    assert text_lines("a\u2028b\n\n") == ["a\u2028b", ""]
