"""The whitespace-tolerant fallback of edit_file must never change the code's structure."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from journeyman.core.errors import ToolError
from journeyman.tools.edit_match import apply_edit

LOOP = """\
def first_positive(xs):
    for x in xs:
        if x > 0:
            print(x)
    return None
"""


def test_flat_old_string_keeps_each_line_at_its_own_depth() -> None:
    # old_string and new_string lost all their indentation.
    outcome = apply_edit(
        LOOP,
        "for x in xs:\nif x > 0:\nprint(x)\nreturn None",
        "for x in xs:\nif x > 0:\nprint(x)\nreturn -1",
    )
    assert outcome.match == "whitespace"
    assert outcome.text == LOOP.replace("return None", "return -1")
    compile(outcome.text, "loop.py", "exec")


def test_return_is_not_moved_into_the_loop() -> None:
    # old_string kept only its relative indentation: 'return' looks as deep as 'if'.
    outcome = apply_edit(
        LOOP, "if x > 0:\n    print(x)\nreturn None", "if x > 0:\n    print(x)\nreturn x"
    )
    assert outcome.text == LOOP.replace("return None", "return x")
    assert "\n    return x\n" in outcome.text


def test_inserted_line_takes_its_neighbours_depth() -> None:
    outcome = apply_edit(LOOP, "if x > 0:\nprint(x)", "if x > 0:\nprint(x)\nbreak")
    assert outcome.text == LOOP.replace("print(x)\n", "print(x)\n            break\n")


def test_ambiguous_depth_is_refused() -> None:
    # 'break' between a line at depth 3 and one at depth 1: where does it belong?
    with pytest.raises(ToolError, match="cannot be told safely"):
        apply_edit(LOOP, "print(x)\nreturn None", "print(x)\nbreak\nreturn None")
    # Two lines become three: which one replaces which is a guess.
    with pytest.raises(ToolError, match="cannot be told safely"):
        apply_edit(LOOP, "if x > 0:\nprint(x)", "if x:\nx += 1\nprint(x)")


def test_faithful_reindentation_still_works() -> None:
    # old_string copied at two spaces per level: translate to the file's four.
    outcome = apply_edit(
        LOOP,
        "for x in xs:\n  if x > 0:\n    print(x)",
        "for x in xs:\n  if x > 0:\n    print(x)\n    continue",
    )
    assert outcome.text == LOOP.replace("print(x)\n", "print(x)\n            continue\n")


# --------------------------------------------------------------------------------------------
# Property: a tolerant edit changes only what new_string asks, at the file's own depths

UNIT = "    "


@st.composite
def _cases(draw: Any) -> tuple[str, str, str, str, bool]:
    depths = [draw(st.integers(0, 1))]
    for _ in range(draw(st.integers(2, 11))):
        depths.append(draw(st.integers(0, depths[-1] + 1)))
    texts = [f"s{i}()" for i in range(len(depths))]
    a = draw(st.integers(0, len(depths) - 1))
    b = draw(st.integers(a + 1, len(depths)))
    style = draw(st.sampled_from(["flat", "relative", "two", "jumbled"]))
    base = depths[a]

    def old_indent(i: int) -> str:
        if style == "flat":
            return ""
        if style == "relative":
            return UNIT * max(0, depths[i] - base)
        if style == "two":
            return "  " * depths[i]
        return " " * ((i * 7) % 5)

    window = list(range(a, b))
    old = "\n".join(old_indent(i) + texts[i] for i in window)
    ops = draw(
        st.dictionaries(
            st.sampled_from(window), st.sampled_from(["replace", "delete", "insert"]), max_size=3
        )
    )
    for i in list(ops):  # "delete k+1, insert after k" reads as replacing k+1: keep one
        if ops.get(i) == "insert" and ops.get(i + 1) == "delete":
            del ops[i + 1]
    if not ops:
        ops = {window[0]: "replace"}
    new_parts: list[str] = []
    expected: list[str] = []
    for i, text in enumerate(texts):
        line = UNIT * depths[i] + text
        if i not in window:
            expected.append(line)
            continue
        op = ops.get(i)
        if op == "delete":
            continue
        if op == "replace":
            new_parts.append(old_indent(i) + f"r{i}()")
            expected.append(UNIT * depths[i] + f"r{i}()")
            continue
        new_parts.append(old_indent(i) + text)
        expected.append(line)
        if op == "insert":
            new_parts.append(old_indent(i) + f"n{i}()")
            expected.append(UNIT * depths[i] + f"n{i}()")
    file_text = "\n".join(UNIT * d + t for d, t in zip(depths, texts, strict=True)) + "\n"
    simple = len(ops) == 1 and "insert" not in ops.values()
    return file_text, old, "\n".join(new_parts), "\n".join(expected) + "\n", simple


@settings(max_examples=400)
@given(_cases())
def test_tolerant_edit_keeps_the_structure(case: tuple[str, str, str, str, bool]) -> None:
    file_text, old, new, expected, simple = case
    assume(old != new and new != "")  # deleting all of old_string leaves its line break
    assume(old not in file_text)  # the tolerant fallback, not an exact (substring) match
    try:
        outcome = apply_edit(file_text, old, new)
    except ToolError as exc:
        assert not simple, f"a one-line change was refused: {exc}"
        assert "cannot be told safely" in str(exc)
        return
    assert outcome.text == expected
