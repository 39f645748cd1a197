"""Finding where an edit goes: exact matching first, then a whitespace-tolerant fallback that
re-indents the replacement to fit; misses explain themselves with the closest lines."""

from __future__ import annotations

import difflib
import itertools
import math
import re
from dataclasses import dataclass
from fractions import Fraction

from journeyman.core.errors import ToolError
from journeyman.tools.fileio import count_lines


@dataclass(frozen=True)
class EditOutcome:
    """The result of applying one edit to a text."""

    text: str
    replacements: int
    match: str
    """"exact" or "whitespace" (the whitespace-tolerant fallback was used)."""
    regions: tuple[tuple[int, int], ...]
    """1-based (first, last) line of each replaced region in the new text."""


def apply_edit(
    text: str, old: str, new: str, *, replace_all: bool = False, where: str = "the file"
) -> EditOutcome:
    """Replace `old` by `new` in `text`, or raise ToolError explaining why it can't be done.

    Exact matching first; when `old` is nowhere in `text`, a line-based match that ignores
    indentation and runs of whitespace is tried and used only if it finds exactly one place.
    A file whose line breaks are all CRLF is matched as if they were LF and keeps CRLF.
    """
    if old == "":
        if text == "":
            return EditOutcome(new, 1, "exact", ((1, max(1, count_lines(new))),))
        raise ToolError(f"edit_file: old_string is empty; quote the text of {where} to replace")
    crlf = "\r\n" in text and "\r" not in old and text.count("\r\n") == text.count("\n")
    if crlf:
        outcome = apply_edit(
            text.replace("\r\n", "\n"),
            old,
            new.replace("\r\n", "\n"),
            replace_all=replace_all,
            where=where,
        )
        return EditOutcome(
            outcome.text.replace("\n", "\r\n"), outcome.replacements, outcome.match, outcome.regions
        )
    positions = _find_all(text, old)
    if len(positions) == 1 or (replace_all and positions):
        return _replace_exact(text, old, new, positions)
    if len(positions) > 1:
        lines = [_line_of(text, p) for p in positions]
        raise ToolError(
            f"edit_file: old_string matched {len(positions)} times in {where} "
            f"(lines {number_list(lines)}); add neighbouring lines to old_string so it matches "
            "one place only, or pass replace_all=true to change them all"
        )
    fuzzy = _whitespace_matches(text, old)
    if len(fuzzy) == 1:
        return _replace_fuzzy(text, old, new, fuzzy[0], where)
    if len(fuzzy) > 1:
        lines = [m.start + 1 for m in fuzzy]
        raise ToolError(
            f"edit_file: old_string is not in {where} exactly, and ignoring whitespace it matches "
            f"{len(fuzzy)} places (lines {number_list(lines)}); copy the exact text from "
            "read_file and add neighbouring lines so it matches one place only"
        )
    raise ToolError(_no_match_message(text, old, where))


def _find_all(text: str, old: str) -> list[int]:
    positions = []
    start = text.find(old)
    while start != -1:
        positions.append(start)
        start = text.find(old, start + len(old))
    return positions


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def number_list(numbers: list[int], most: int = 10) -> str:
    shown = ", ".join(str(n) for n in numbers[:most])
    return shown + (f", ... ({len(numbers) - most} more)" if len(numbers) > most else "")


def _replace_exact(text: str, old: str, new: str, positions: list[int]) -> EditOutcome:
    pieces: list[str] = []
    regions: list[tuple[int, int]] = []
    cursor = 0
    line = 1  # line number in the new text where pieces so far end
    for pos in positions:
        kept = text[cursor:pos]
        pieces.append(kept)
        line += kept.count("\n")
        regions.append((line, line + new.count("\n")))
        pieces.append(new)
        line += new.count("\n")
        cursor = pos + len(old)
    pieces.append(text[cursor:])
    return EditOutcome("".join(pieces), len(positions), "exact", tuple(regions))


def split_lines(text: str) -> list[str]:
    """Lines with their line breaks kept; unlike str.splitlines only '\\n' ends a line."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _norm(line: str) -> str:
    return " ".join(line.split())


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


@dataclass(frozen=True)
class _Window:
    start: int
    """0-based index of the first file line of the match."""
    length: int


def _trimmed_old_lines(old: str) -> tuple[list[str], int, int]:
    """old_string's lines without leading and trailing blank lines, and how many were cut."""
    lines = old.split("\n")
    lead = 0
    while lead < len(lines) and not lines[lead].strip():
        lead += 1
    trail = 0
    while trail < len(lines) - lead and not lines[len(lines) - 1 - trail].strip():
        trail += 1
    return lines[lead : len(lines) - trail], lead, trail


def _whitespace_matches(text: str, old: str) -> list[_Window]:
    wanted = [_norm(line) for line in _trimmed_old_lines(old)[0]]
    if not wanted:
        return []
    lines = [_norm(line) for line in split_lines(text)]
    found: list[_Window] = []
    size = len(wanted)
    for i in range(len(lines) - size + 1):
        if lines[i] == wanted[0] and lines[i : i + size] == wanted:
            found.append(_Window(i, size))
    return found


def _replace_fuzzy(text: str, old: str, new: str, window: _Window, where: str) -> EditOutcome:
    file_lines = split_lines(text)
    old_lines, lead, trail = _trimmed_old_lines(old)
    new_lines = new.split("\n")
    # Blank lines cut from the ends of old_string are cut from new_string's ends too.
    while lead and new_lines and not new_lines[0].strip():
        new_lines.pop(0)
        lead -= 1
    while trail and new_lines and not new_lines[-1].strip():
        new_lines.pop()
        trail -= 1
    matched = file_lines[window.start : window.start + window.length]
    eol = "\r\n" if matched[0].endswith("\r\n") else "\n"
    ends_with_break = matched[-1].endswith("\n")
    reindented = reindent(new_lines, old_lines, matched, indent_unit(file_lines))
    if reindented is None:
        first, last = window.start + 1, window.start + window.length
        raise ToolError(
            f"edit_file: old_string matches lines {first}-{last} of {where} only when "
            "indentation is ignored, and its indentation does not follow the file's, so how "
            "deep new_string's lines belong cannot be told safely; nothing was changed. Copy "
            "old_string from read_file with its exact indentation (without the line numbers) "
            "and indent new_string the same way"
        )
    block = eol.join(reindented)
    if reindented and ends_with_break:
        block += eol
    if new == "":
        block = ""
    result = "".join(file_lines[: window.start]) + block
    result += "".join(file_lines[window.start + window.length :])
    first = window.start + 1
    return EditOutcome(result, 1, "whitespace", ((first, first + max(0, len(reindented) - 1)),))


def reindent(
    new_lines: list[str], old_lines: list[str], matched: list[str], unit: str | None = None
) -> list[str] | None:
    """Give `new_lines` the file's indentation, as `old_lines` (the quoted text) map onto
    `matched` (the file lines they matched ignoring whitespace); None when that cannot be
    decided safely. `unit` is the file's own indentation step, when known (`indent_unit`).

    When the quoted indentation is a faithful copy of the file's, shifted or at another width
    or in tabs for spaces (each quoted indentation maps to one file indentation, deeper to
    deeper), every new line is translated through that mapping. Otherwise the quote lost its
    indentation, and each new line is placed by its own counterpart
    (see `_reindent_by_counterpart`).
    """
    mapping: dict[str, str] = {}
    faithful = True
    for old_line, file_line in zip(old_lines, matched, strict=True):
        file_indent = _indent(file_line)
        if old_line.strip() and mapping.setdefault(_indent(old_line), file_indent) != file_indent:
            faithful = False
    by_depth = sorted(mapping.items(), key=lambda pair: len(pair[0]))
    if faithful and all(
        len(shallow[1]) < len(deep[1]) for shallow, deep in itertools.pairwise(by_depth)
    ):
        translated = _translate_indents(new_lines, old_lines, mapping, unit)
        if translated is not None:
            return translated
    return _reindent_by_counterpart(new_lines, old_lines, matched)


def reindent_in_file_frame(new_lines: list[str], matched: list[str]) -> list[str] | None:
    """`new_lines` as they are, when each already sits at the file's depth of the matched
    line it keeps or replaces (the quote lost its indentation, the new text did not); None
    otherwise."""
    return _reindent_by_counterpart(new_lines, [line.rstrip(_EOL) for line in matched], matched)


def indent_unit(lines: list[str]) -> str | None:
    """The file's indentation step: a tab when its indented lines start with tabs, else the
    greatest common width of its space indentations; None when nothing is indented."""
    indents = [_indent(line) for line in lines if line.strip()]
    tabs = sum(1 for i in indents if i.startswith("\t"))
    spaces = [len(i) for i in indents if i and set(i) == {" "}]
    if tabs > len(spaces):
        return "\t"
    width = math.gcd(*spaces) if spaces else 0
    return " " * width if width else None


@dataclass(frozen=True)
class _Scale:
    """Quoted indentation of one character to file indentation of one character: a file
    width is `slope` * the quoted width + `shift`."""

    old_char: str
    file_char: str
    slope: Fraction
    shift: Fraction

    def apply(self, indent: str) -> str | None:
        if indent.strip(self.old_char):
            return None  # another character, or a mix
        width = self.slope * len(indent) + self.shift
        if width < 0 or width.denominator != 1:
            return None
        return self.file_char * int(width)


def _scale_of(mapping: dict[str, str], quoted: list[str], unit: str | None) -> _Scale | None:
    """The scale that `mapping` (quoted indentation -> file indentation) follows, if any;
    `quoted` are every indentation of the quoted and new text, `unit` the file's step."""
    old_chars, file_chars = set("".join([*mapping, *quoted])), set("".join(mapping.values()))
    if len(old_chars) > 1 or len(file_chars) > 1:
        return None  # tabs and spaces mixed: no one scale
    old_char = old_chars.pop() if old_chars else None
    file_char = file_chars.pop() if file_chars else (unit[0] if unit else old_char)
    old_char = old_char or file_char
    if old_char is None or file_char is None:
        return None  # nothing is indented anywhere: nothing to translate
    pairs = sorted((len(old), len(new)) for old, new in mapping.items())
    if not pairs:
        return None
    (o1, f1), (o2, f2) = pairs[0], pairs[-1]
    if o2 != o1:
        slope = Fraction(f2 - f1, o2 - o1)
    else:
        one_pair = _one_pair_slope(old_char, file_char, (o1, f1), quoted, unit)
        if one_pair is None:
            return None
        slope = one_pair
    shift = f1 - slope * o1
    if slope <= 0 or any(slope * old + shift != new for old, new in pairs):
        return None
    return _Scale(old_char, file_char, slope, shift)


def _one_pair_slope(
    old_char: str, file_char: str, pair: tuple[int, int], quoted: list[str], unit: str | None
) -> Fraction | None:
    """File columns per quoted column when the quoted lines all sit at one width (`pair`:
    that width and the file's), judged by the steps between the quoted and new widths and
    the file's own step: tabs for spaces (or the reverse) is a change of unit, the same
    character a shift. None when a shift and narrower steps (two spaces a level for four)
    would both explain the quote: where its deeper or shallower lines go cannot be told."""
    widths = sorted({len(indent) for indent in quoted})
    steps = [deeper - shallower for shallower, deeper in itertools.pairwise(widths)]
    old_step = 1 if old_char == "\t" else (math.gcd(*steps) if steps else None)
    file_step = len(unit) if unit and unit[0] == file_char else None
    old_width, file_width = pair
    if old_char == file_char and old_width == file_width:
        return Fraction(1)  # the quote is indented as the file is: nothing to translate
    if old_char != file_char:
        if old_width and file_width:
            return Fraction(file_width, old_width)
        default = 1 if file_char == "\t" else 4
        return Fraction(file_step or default, old_step or 4)
    if old_step and file_step and old_step < file_step and file_step % old_step == 0:
        return None
    return Fraction(1)


def _translate_indents(
    new_lines: list[str], old_lines: list[str], mapping: dict[str, str], unit: str | None
) -> list[str] | None:
    """Translate each new line's indentation through `mapping`: by the scale it follows when
    there is one (so lines deeper or shallower than every quoted line are placed too), else
    only lines indented exactly like a quoted line. None when a line cannot be translated.
    Blank lines become empty."""
    quoted = [_indent(line) for line in (*old_lines, *new_lines) if line.strip()]
    scale = _scale_of(mapping, quoted, unit)
    out = []
    for line in new_lines:
        if not line.strip():
            out.append("")
            continue
        indent = _indent(line)
        placed = scale.apply(indent) if scale is not None else mapping.get(indent)
        if placed is None:
            return None
        out.append(placed + line[len(indent) :])
    return out


def _reindent_by_counterpart(
    new_lines: list[str], old_lines: list[str], matched: list[str]
) -> list[str] | None:
    """Indent each new line like the file line its counterpart in old_string matched.

    A new line equal to an old line (ignoring whitespace), or replacing exactly one line,
    takes that line's indentation in the file, provided new_string does not indent it
    differently from old_string (a change of depth that cannot be translated). Other new lines
    (insertions, n lines replacing m) take the depth of the old lines they replace and of the
    old lines around them, when all of those sit at one depth in the file and new_string
    indents them alike. Anything else is ambiguous: None.
    """
    matcher = difflib.SequenceMatcher(
        None, [_norm(line) for line in old_lines], [_norm(line) for line in new_lines], False
    )
    placed = [""] * len(new_lines)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "delete":
            continue
        if tag == "equal" or (i2 - i1 == 1 and j2 - j1 == 1):
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                if not new_lines[j].strip():
                    continue
                if len(_indent(new_lines[j])) != len(_indent(old_lines[i])):
                    return None
                placed[j] = _indent(matched[i]) + new_lines[j].lstrip()
            continue
        around = range(max(0, i1 - 1), min(len(old_lines), i2 + 1))
        refs = [i for i in around if old_lines[i].strip()]
        file_depths = {_indent(matched[i]) for i in refs}
        old_depths = {len(_indent(old_lines[i])) for i in refs}
        if len(file_depths) != 1 or len(old_depths) != 1:
            return None
        depth, old_depth = file_depths.pop(), old_depths.pop()
        for j in range(j1, j2):
            if not new_lines[j].strip():
                continue
            if len(_indent(new_lines[j])) != old_depth:
                return None
            placed[j] = depth + new_lines[j].lstrip()
    return placed


def _no_match_message(text: str, old: str, where: str) -> str:
    message = f"edit_file: old_string was not found in {where}, not even ignoring whitespace."
    old_lines = _trimmed_old_lines(old)[0]
    numbered = [line for line in old_lines if line.strip()]
    if numbered and all(re.match(r"\s*\d+\t", line) for line in numbered):
        message += (
            " It looks like it contains line numbers from read_file's output; pass only the "
            "file's own text."
        )
    closest = closest_text(split_lines(text), old_lines)
    if closest is None:
        return message + f" Nothing in {where} resembles it; read the file to see its contents."
    return (
        f"{message} {closest}\nCopy the text exactly from the file (read it again if it may "
        "have changed) and retry."
    )


def closest_text(file_lines: list[str], wanted: list[str]) -> str | None:
    """Where `file_lines` hold the text most like `wanted`, with those lines numbered as
    read_file shows them; None when nothing resembles it."""
    best = _closest_region(file_lines, wanted)
    if best is None:
        return None
    start, length, ratio = best
    shown = numbered_lines(file_lines, start + 1, min(start + length, start + 30))
    return (
        f"The most similar text is at lines {start + 1}-{start + length} ({ratio:.0%} alike):"
        f"\n{shown}"
    )


def _closest_region(file_lines: list[str], old_lines: list[str]) -> tuple[int, int, float] | None:
    """(start index, length, similarity) of the file region most like `old_lines`."""
    if not file_lines or not old_lines:
        return None
    size = min(len(old_lines), len(file_lines))
    normalized = [_norm(line) for line in file_lines]
    target = "\n".join(_norm(line) for line in old_lines)
    candidates: set[int] = set()
    # Find file lines resembling the first few lines of old_string; each suggests a start.
    for k, line in enumerate(old_lines[:3]):
        probe = _norm(line)
        if not probe:
            continue
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(probe)
        scored: list[tuple[float, int]] = []
        for j, candidate in enumerate(normalized):
            matcher.set_seq1(candidate)
            if matcher.real_quick_ratio() < 0.4 or matcher.quick_ratio() < 0.4:
                continue
            scored.append((matcher.ratio(), j))
        for _, j in sorted(scored, reverse=True)[:3]:
            candidates.add(min(max(0, j - k), len(file_lines) - size))
    best: tuple[int, int, float] | None = None
    for start in sorted(candidates):
        region = "\n".join(normalized[start : start + size])
        ratio = difflib.SequenceMatcher(None, region, target, autojunk=False).ratio()
        if best is None or ratio > best[2]:
            best = (start, size, ratio)
    if best is None or best[2] < 0.3:
        return None
    return best


def numbered_lines(lines: list[str], first: int, last: int) -> str:
    """Lines `first`..`last` (1-based, inclusive) in read_file's numbered format."""
    return "\n".join(f"{n:>6}\t{lines[n - 1].rstrip(_EOL)}" for n in range(first, last + 1))


_EOL = "\r\n"
