"""Tool calling through plain text, for models served without native tool calling.

The model is shown the tools in its system prompt and answers with fenced blocks:

    ```json
    {"tool": "read_file", "arguments": {"path": "src/app.py"}}
    ```

`render_tool_instructions` writes that system-prompt appendix; `parse_tool_calls` reads the
blocks back out of a reply; `render_tool_call` / `render_tool_result` put earlier calls and
their results back into the transcript in the same text form.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from journeyman.core.messages import ToolCall, ToolResult, ToolSpec
from journeyman.providers.arguments import MAX_NESTING, nesting_depth

CALL_ID_PREFIX = "text-call-"
"""Prefix of the ids given to tool calls parsed from text."""

STRICT_TAGS = frozenset({"json", "tool", "tool_call", "tool-call"})
"""Fence tags whose blocks must be tool calls: anything else in them is a format error."""

EXPECTED_SHAPE = (
    "Write each tool call as its own fenced block tagged json, holding one object with the "
    'tool name under "tool" and an object of arguments under "arguments":\n'
    "```json\n"
    '{"tool": "<tool name>", "arguments": {"<argument>": <value>}}\n'
    "```"
)


def render_tool_instructions(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt appendix that teaches the text protocol and lists the tools."""
    lines = [
        "# Tools",
        "",
        "You can use tools. This connection has no built-in tool calling, so a tool call is "
        "written as text: a fenced code block tagged `json` containing one object with the "
        'keys "tool" (the tool name) and "arguments" (an object with the arguments), e.g.',
        "",
        "```json",
        '{"tool": "<tool name>", "arguments": {"<argument>": "<value>"}}',
        "```",
        "",
        "- Put one call in each block; for several calls, write several blocks.",
        "- Use only the tools below, with arguments that follow their schemas.",
        "- After your tool blocks, end your message. The results arrive in the next message.",
        "- Keep `json` blocks for tool calls only; show other JSON in a block tagged `text`.",
        "- When you need no tool, reply in plain text with no `json` block.",
        "",
        "## Available tools",
    ]
    for tool in tools:
        schema = json.dumps(tool.parameters, ensure_ascii=False, sort_keys=True)
        lines += ["", f"### {tool.name}", tool.description.strip(), f"Arguments schema: {schema}"]
    return "\n".join(lines)


def render_tool_call(call: ToolCall) -> str:
    """One earlier tool call, written the way the model was asked to write it."""
    body = json.dumps({"tool": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"```json\n{body}\n```"


def render_tool_result(result: ToolResult) -> str:
    """One tool result, as the text of a user message."""
    outcome = "failed" if result.is_error else "returned"
    return f"[{result.name} ({result.call_id}) {outcome}]\n{result.content}"


@dataclass(frozen=True)
class _Block:
    start: int
    """Offset of the block's first character (its opening fence) in the text."""
    end: int
    """Offset just past the block (its closing fence and line break)."""
    tag: str
    body: str
    closed: bool


def _fenced_blocks(text: str) -> list[_Block]:
    """Fenced code blocks whose opening fence starts a line; unclosed ones run to the end."""
    blocks: list[_Block] = []
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped.startswith("```"):
            i += 1
            continue
        fence_len = len(stripped) - len(stripped.lstrip("`"))
        fence = "`" * fence_len
        rest = stripped[fence_len:]
        if rest.endswith(fence) and len(rest) > fence_len:  # ```json {...}``` on one line
            inner = rest[:-fence_len].strip()
            if inner[:1] in "{[":
                tag, body = "", inner
            else:
                tag, _, body = inner.partition(" ")
            blocks.append(_Block(offsets[i], offsets[i + 1], tag.lower(), body.strip(), True))
            i += 1
            continue
        tag = rest.strip().lower()
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        closed = j < len(lines)
        body = "".join(lines[i + 1 : j])
        end = offsets[j + 1] if closed else len(text)
        blocks.append(_Block(offsets[i], end, tag, body, closed))
        i = j + 1
    return blocks


def _calls_in(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _check_call(item: Any) -> tuple[str, dict[str, Any]] | str:
    """The (name, arguments) of one decoded call object, or what is wrong with it."""
    if not isinstance(item, dict):
        return f"expected a JSON object, found {type(item).__name__}"
    name = item.get("tool")
    if "tool" not in item:
        keys = ", ".join(sorted(map(str, item))) or "none"
        return f'the object has no "tool" key (its keys: {keys})'
    if not isinstance(name, str) or not name.strip():
        return '"tool" must be a non-empty string naming the tool'
    arguments = item.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return f'"arguments" of {name} must be a JSON object, found {type(arguments).__name__}'
    return name.strip(), arguments


def parse_tool_calls(
    text: str, *, start: int = 1, id_prefix: str = CALL_ID_PREFIX
) -> tuple[str, list[ToolCall], str | None]:
    """Split a reply into (remaining text, tool calls, format error or None).

    Blocks tagged json (or tool/tool_call) must hold a call object or a list of them;
    untagged blocks count only when they hold a call object. Well-formed blocks are removed
    from the text; malformed ones stay, and the error says what was wrong and the expected
    shape. Call ids are `<id_prefix><n>`, numbered from `start` in reading order.
    """
    calls: list[ToolCall] = []
    problems: list[str] = []
    used: list[_Block] = []
    for number, block in enumerate(_fenced_blocks(text), start=1):
        strict = block.tag in STRICT_TAGS
        if not strict and block.tag != "":
            continue
        if not block.closed:
            if strict:
                problems.append(f"block {number} is not closed with ``` (was the reply cut off?)")
            continue
        try:
            value = json.loads(block.body, strict=False)
            too_deep = nesting_depth(value) > MAX_NESTING
        except RecursionError:
            too_deep = True
        except ValueError as exc:
            if strict:
                problems.append(f"block {number} is not valid JSON ({exc})")
            continue
        if too_deep:
            problems.append(f"block {number} nests lists or objects over {MAX_NESTING} deep")
            continue
        if not strict and not (isinstance(value, dict) and "tool" in value):
            continue  # an untagged code block that is not a tool call
        checked = [_check_call(item) for item in _calls_in(value)]
        errors = [c for c in checked if isinstance(c, str)]
        if not checked:
            problems.append(f"block {number} holds an empty list")
        elif errors:
            problems.extend(f"block {number}: {e}" for e in errors)
        else:
            for name, arguments in (c for c in checked if not isinstance(c, str)):
                calls.append(ToolCall(f"{id_prefix}{start + len(calls)}", name, arguments))
            used.append(block)

    remaining = _without(text, used)
    if not problems:
        return remaining, calls, None
    listed = "\n".join(f"- {p}" for p in problems)
    error = f"Some tool calls in your reply could not be read:\n{listed}\n{EXPECTED_SHAPE}"
    return remaining, calls, error


def _without(text: str, blocks: Sequence[_Block]) -> str:
    if not blocks:
        return text.strip()
    pieces: list[str] = []
    position = 0
    for block in blocks:
        pieces.append(text[position : block.start])
        position = block.end
    pieces.append(text[position:])
    kept = [p.strip() for p in pieces if p.strip()]
    return "\n\n".join(kept)
