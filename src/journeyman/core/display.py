"""Text from data (model replies, tool output, file names, stored sessions) made safe to print.

A terminal obeys control sequences wherever they appear: an escape sequence inside a model's
reply or a command's output can write the clipboard (OSC 52), set the window title, clear the
screen, move the cursor back over a line (`\\r`, `ESC [2K`) to hide what follows, or reverse
the reading order of text (bidirectional overrides). Everything that did not come from
journeyman itself passes through `printable` before it reaches the terminal: such characters
are shown as visible escapes (`\\x1b`, `\\r`, `\\u202e`) instead of being obeyed. Newlines and
tabs stay as they are.
"""

from __future__ import annotations

import re
import unicodedata

_KEPT = {"\n", "\t"}
_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}
_HIDDEN_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")
_LONG_BLANK = re.compile(r"[ \t]{12,}")


def _is_hidden(char: str) -> bool:
    if char in _KEPT:
        return False
    code = ord(char)
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return True
    # format characters (bidirectional overrides and isolates, zero-width joiners and spaces)
    # change how the rest of a line reads without being seen themselves; a lone surrogate
    # cannot even be encoded for output
    return unicodedata.category(char) in _HIDDEN_CATEGORIES


def _visible(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control and invisible formatting character shown as an escape."""
    if text.isprintable():
        return text
    return "".join(_visible(c) if _is_hidden(c) else c for c in text)


def printable_name(name: str) -> str:
    """A name (a file path, a tool name) on one line: `printable`, with newlines and tabs
    escaped too, so a name cannot start a line of its own and pass for something else."""
    if name.isprintable():
        return name
    return "".join(_visible(c) if c in _KEPT or _is_hidden(c) else c for c in name)


def printable_json(text: str) -> str:
    """A JSON document with the characters `json.dumps` leaves raw (DEL, C1 controls, format
    characters) written as `\\uXXXX` escapes: the same JSON value, safe on a terminal."""
    return "".join(_json_escape(c) if c not in _KEPT and _is_hidden(c) else c for c in text)


def _json_escape(char: str) -> str:
    """`\\uXXXX`, or a surrogate pair of them above U+FFFF (JSON escapes have four digits)."""
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def command_for_approval(command: str) -> str:
    """A shell command as the user must see it before allowing it: whole, never cut, controls
    escaped, and long runs of blanks named (so text pushed off screen by padding shows up)."""
    shown = printable(command)
    return _LONG_BLANK.sub(lambda m: f"⟨{len(m.group())} blanks⟩", shown)
