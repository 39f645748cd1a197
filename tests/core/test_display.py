"""Data on the terminal: control sequences are shown, never obeyed."""

from __future__ import annotations

import json
import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st

from journeyman.core.display import printable, printable_json, printable_name

OSC52_CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x1b\\"
TITLE = "\x1b]0;innocent\x07"
CLEAR = "\x1b[2J\x1b[H"
OVERWRITE = "\r\x1b[2K"
RIGHT_TO_LEFT = "\u202e"
CSI_8BIT = "\x9b31m"


def test_escape_sequences_are_shown_not_obeyed() -> None:
    for attack in (OSC52_CLIPBOARD, TITLE, CLEAR, OVERWRITE, RIGHT_TO_LEFT, CSI_8BIT):
        shown = printable(f"before{attack}after")
        assert shown.isprintable(), repr(shown)
        assert shown.startswith("before") and shown.endswith("after")
    assert printable(OVERWRITE) == "\\r\\x1b[2K"


def test_newlines_tabs_and_ordinary_unicode_stay() -> None:
    text = "line one\n\tindented — café ✓ 日本語"
    assert printable(text) == text


def obeyable(text: str) -> list[str]:
    """Characters a terminal could act on or that hide text (newline and tab aside)."""
    return [
        c
        for c in text
        if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    ]


@given(st.text())
def test_printable_output_never_holds_a_control_character(text: str) -> None:
    shown = printable(text)
    assert obeyable(shown) == []
    shown.encode("utf-8")  # lone surrogates too are shown as escapes, so output never fails


@given(st.text())
@example("tag space \U000e0020 beyond U+FFFF")  # a JSON escape has four digits: surrogate pair
def test_printable_json_is_the_same_json_value(text: str) -> None:
    document = json.dumps({"text": text}, ensure_ascii=False)
    safe = printable_json(document)
    assert json.loads(safe) == {"text": text}
    assert obeyable(safe) == []


def test_a_name_is_kept_on_one_line() -> None:
    assert printable_name("src/app.py") == "src/app.py"
    assert printable_name("a\nb\tc\rd\x1b[2K\u202e.py") == "a\\nb\\tc\\rd\\x1b[2K\\u202e.py"
    assert printable("a\nb\tc\rd") == "a\nb\tc\\rd"  # text keeps its newlines and tabs
