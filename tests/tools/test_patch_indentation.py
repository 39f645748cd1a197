"""apply_patch never writes mis-indented code: a hunk that matches only with whitespace ignored
has its '+' lines moved by the hunk's offset from the file (or refused when there is none)."""

from __future__ import annotations

import ast
import difflib
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journeyman.core.errors import ToolError
from journeyman.core.messages import ToolCall, ToolResult
from journeyman.tools.context import ToolContext
from journeyman.tools.patch import ApplyPatchTool, apply_hunks, parse_patch
from journeyman.tools.registry import ToolRegistry

SOURCE = """\
def total(xs):
    result = 0
    for x in xs:
        if x > 0:
            result += x
    return result


def main():
    print(total([1, -2, 3]))
"""


def applied(text: str, patch: str) -> str:
    patches = parse_patch(patch)
    assert len(patches) == 1
    return apply_hunks(text, patches[0].hunks, "calc.py")[0]


async def run_patch(ctx: ToolContext, text: str) -> ToolResult:
    registry = ToolRegistry([ApplyPatchTool()])
    return await registry.execute(
        ToolCall(id="p-1", name="apply_patch", arguments={"patch": text}), ctx, 30
    )


def envelope(*body: str) -> str:
    return "*** Begin Patch\n*** Update File: calc.py\n" + "".join(body) + "*** End Patch\n"


def test_a_hunk_shifted_right_keeps_the_new_code_in_its_block() -> None:
    # Every line two spaces too deep: the new `if` would otherwise be two spaces off.
    patch = envelope(
        "@@\n",
        "       for x in xs:\n",
        "           if x > 0:\n",
        "-              result += x\n",
        "+              if x % 2:\n",
        "+                  result += x\n",
    )
    after = applied(SOURCE, patch)
    assert "        if x > 0:\n            if x % 2:\n                result += x\n" in after
    ast.parse(after)


def test_a_hunk_shifted_right_still_adds_a_top_level_function() -> None:
    # Every line four spaces too deep: the new function, written at four spaces, belongs at
    # the top level, not inside total().
    patch = envelope(
        "@@\n", "         return result\n", "+\n", "+\n", "+    def mean(xs):\n",
        "+        return total(xs) / len(xs)\n",
    )  # fmt: skip
    after = applied(SOURCE, patch)
    assert "    return result\n\n\ndef mean(xs):\n    return total(xs) / len(xs)\n" in after
    functions = [node.name for node in ast.parse(after).body if isinstance(node, ast.FunctionDef)]
    assert functions == ["total", "mean", "main"]


def test_tabs_for_spaces_and_spaces_for_tabs() -> None:
    patch = envelope(
        "@@\n", " \tfor x in xs:\n", " \t\tif x > 0:\n", "-\t\t\tresult += x\n",
        "+\t\t\tresult += x\n", "+\t\tresult -= 1\n",
    )  # fmt: skip
    after = applied(SOURCE, patch)
    assert "            result += x\n        result -= 1\n    return result\n" in after
    tabbed = SOURCE.replace("    ", "\t")
    spaced = patch.replace("\t", "  ")  # two spaces a level, for a file indented with tabs
    assert applied(tabbed, spaced) == after.replace("    ", "\t")


def test_a_hunk_indented_as_the_file_is_applied_as_written() -> None:
    # Found only ignoring whitespace (a doubled space inside the line), but indented as the
    # file is: the '+' lines, a continuation line among them, keep their own indentation.
    patch = envelope(
        "@@\n", "-    print(total([1,  -2, 3]))\n",
        "+    print(total([1, -2, 3]),\n", "+      end='')\n",
    )  # fmt: skip
    assert applied(SOURCE, patch).endswith("    print(total([1, -2, 3]),\n      end='')\n")


def test_a_one_depth_hunk_that_reads_two_ways_is_refused() -> None:
    # `result += x` quoted at 6 for the file's 12: shifted by 6, or at two spaces a level?
    # The new line at 8 would go to 14 or to 16.
    patch = envelope("@@\n", "-      result += x\n", "+      if x:\n", "+        result += x\n")
    with pytest.raises(ToolError, match="cannot be told"):
        applied(SOURCE, patch)


def test_inconsistent_indentation_is_refused_with_the_files_lines() -> None:
    # `for` at 2 for 4, `if` at 5 for 8, `result` at 10 for 12: no one offset or unit maps
    # the hunk on the file, and the '+' line sits at none of those depths.
    patch = envelope(
        "@@\n", "   for x in xs:\n", "      if x > 0:\n", "-          result += x\n",
        "+         result += 2 * x\n",
    )  # fmt: skip
    with pytest.raises(ToolError) as caught:
        applied(SOURCE, patch)
    message = str(caught.value)
    assert "hunk 1 of calc.py matches lines 3-5 only when indentation is ignored" in message
    assert "     3\t    for x in xs:" in message and "     5\t            result += x" in message


async def test_a_refused_hunk_leaves_every_file_untouched(
    workspace: Path, ctx: ToolContext
) -> None:
    (workspace / "calc.py").write_text(SOURCE)
    (workspace / "other.py").write_text("a = 1\n")
    before = {p.name: p.read_bytes() for p in workspace.iterdir() if p.is_file()}
    result = await run_patch(
        ctx,
        "*** Begin Patch\n*** Update File: other.py\n@@\n-a = 1\n+a = 2\n"
        "*** Update File: calc.py\n@@\n   for x in xs:\n      if x > 0:\n"
        "-          result += x\n+         result += 2 * x\n*** End Patch\n",
    )
    assert result.is_error and "cannot be told" in result.content
    assert {p.name: p.read_bytes() for p in workspace.iterdir() if p.is_file()} == before


async def test_the_tool_reindents_a_shifted_unified_diff(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "calc.py").write_text(SOURCE)
    result = await run_patch(
        ctx,
        "--- a/calc.py\n+++ b/calc.py\n@@ -9,2 +9,3 @@\n"
        "   def main():\n-      print(total([1, -2, 3]))\n"
        "+      values = [1, -2, 3]\n+      print(total(values))\n",
    )
    assert not result.is_error, result.content
    text = (workspace / "calc.py").read_text()
    assert text.endswith("def main():\n    values = [1, -2, 3]\n    print(total(values))\n")


# --------------------------------------------------------------------------------------------
# Property: a patch written at a wrong uniform indentation gives the program the model meant


@dataclass
class Block:
    """A compound statement (or the module, with no header) and its body."""

    header: str | None
    body: list[Block | str] = field(default_factory=list)


HEADERS = ("def f{n}(a{n}):", "if c{n}:", "for i{n} in r{n}:", "with m{n}() as w{n}:")


@st.composite
def _statement(draw: Any, numbers: itertools.count[int], depth: int) -> Block | str:
    n = next(numbers)
    if depth >= 3 or draw(st.integers(0, 2)) > 0:
        return draw(st.sampled_from(["v{n} = {n}", "call{n}()", "v{n} += a{n}"])).format(n=n)
    block = Block(draw(st.sampled_from(HEADERS)).format(n=n))
    for _ in range(draw(st.integers(1, 3))):
        block.body.append(draw(_statement(numbers, depth + 1)))
    return block


def _bodies(block: Block) -> list[Block]:
    """`block` and every block inside it."""
    found = [block]
    for item in block.body:
        if isinstance(item, Block):
            found.extend(_bodies(item))
    return found


def _render(block: Block, unit: str, depth: int = 0) -> list[str]:
    lines = []
    for item in block.body:
        if isinstance(item, str):
            lines.append(unit * depth + item)
        else:
            lines.append(unit * depth + str(item.header))
            lines.extend(_render(item, unit, depth + 1))
    return lines


def _copy(block: Block) -> Block:
    return Block(block.header, [_copy(i) if isinstance(i, Block) else i for i in block.body])


@st.composite
def _change(draw: Any, module: Block, numbers: itertools.count[int]) -> None:
    """One change the model means: insert, replace, delete, wrap or unwrap a statement."""
    body = draw(st.sampled_from(_bodies(module))).body
    at = draw(st.integers(0, len(body) - 1))
    action = draw(st.sampled_from(["insert", "replace", "delete", "wrap", "unwrap"]))
    if action == "insert":
        body.insert(draw(st.integers(0, len(body))), draw(_statement(numbers, 1)))
    elif action == "replace":
        body[at] = draw(_statement(numbers, 1))
    elif action == "delete" and len(body) > 1:
        del body[at]
    elif action == "wrap":
        body[at] = Block(draw(st.sampled_from(HEADERS)).format(n=next(numbers)), [body[at]])
    elif action == "unwrap" and isinstance(body[at], Block):
        inner = body[at]
        assert isinstance(inner, Block)
        body[at : at + 1] = inner.body


def _unified(before: list[str], after: list[str], context: int) -> str:
    lines = difflib.unified_diff(
        [f"{line}\n" for line in before], [f"{line}\n" for line in after], "a/f.py", "b/f.py",
        n=context,
    )  # fmt: skip
    return "".join(lines)


def _as_envelope(diff: str) -> str:
    """The same hunks in the '*** Begin Patch' envelope: '@@' lines without numbers."""
    body = [
        "@@\n" if line.startswith("@@") else line for line in diff.splitlines(keepends=True)[2:]
    ]
    return "*** Begin Patch\n*** Update File: f.py\n" + "".join(body) + "*** End Patch\n"


def _misindent(diff: str, change: Any) -> str:
    """Every hunk line of `diff` (context, '-' and '+') with its indentation changed."""
    out = []
    for line in diff.splitlines(keepends=True):
        if line[:1] in (" ", "-", "+") and not line.startswith(("---", "+++")):
            text = line[1:]
            body = text.lstrip(" \t")
            out.append(line[0] + change(text[: len(text) - len(body)]) + body)
        else:
            out.append(line)
    return "".join(out)


@dataclass(frozen=True)
class Case:
    before: str
    meant: str
    patch: str
    how: str


@st.composite
def _cases(draw: Any) -> Case:
    numbers = itertools.count()
    module = Block(None)
    for _ in range(draw(st.integers(1, 4))):
        module.body.append(draw(_statement(numbers, 0)))
    changed = _copy(module)
    for _ in range(draw(st.integers(1, 3))):
        draw(_change(changed, numbers))
    tabs = draw(st.booleans())
    unit = "\t" if tabs else "    "
    before, after = _render(module, unit), _render(changed, unit)
    diff = _unified(before, after, draw(st.integers(1, 3)))
    if tabs:
        width = draw(st.sampled_from([2, 4, 8]))
        how = f"spaces ({width} a level) for tabs"
        patch = _misindent(diff, lambda indent: " " * width * len(indent))
    else:
        # (Two spaces a level for four is left out: a hunk whose lines sit two levels
        # apart reads as well as four spaces a level, shifted.)
        if draw(st.booleans()):
            how, patch = "tabs for spaces", _misindent(diff, lambda i: "\t" * (len(i) // 4))
        else:
            hunk_lines = [
                line[1:] for line in diff.splitlines()[2:] if line[:1] in " -+" and line[1:]
            ]
            least = min((len(t) - len(t.lstrip()) for t in hunk_lines), default=0)
            k = draw(st.integers(-least, 8).filter(lambda k: k != 0))
            how = f"shifted by {k}"
            patch = _misindent(diff, lambda i: " " * (len(i) + k))
    if draw(st.booleans()):
        patch = _as_envelope(patch)
    text = lambda lines: "".join(f"{line}\n" for line in lines)  # noqa: E731
    return Case(text(before), text(after), patch, how)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_a_misindented_patch_keeps_the_meant_block_structure(case: Case) -> None:
    if case.before == case.meant:
        return
    patches = parse_patch(case.patch)
    result = apply_hunks(case.before, patches[0].hunks, "f.py")[0]
    tree = ast.parse(result)  # a SyntaxError or IndentationError fails the property
    assert ast.dump(tree) == ast.dump(ast.parse(case.meant)), case.how
