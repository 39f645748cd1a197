"""How tools reach a model served without working native tool calling.

Many OpenAI-compatible servers (llama.cpp's, whose default chat templates often have no place for
tools) accept a request's `tools` and silently drop them: the model never sees a schema and
answers in prose. `tools_were_dropped` recognises this from the prompt size the server reports.
The constrained modes then put the tool descriptions in the system prompt and constrain the reply
to one JSON object that is either a tool call or a final answer:

- `json_schema`: the request's `response_format` carries the schema (OpenAI's `json_schema`
  shape, or llama.cpp's `json_object` + `schema` shape, whichever the server takes);
- `grammar`: the request carries a GBNF grammar built from that schema (llama.cpp servers and
  the embedded model).

`text` (see `text_tools`) asks for fenced JSON blocks without constraining anything. The mode
found for a server and model is recorded in the user's config directory (`ToolModeRecords`),
never in a repository, so it is detected once.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from journeyman.core.messages import Message, Role, ToolCall, ToolSpec
from journeyman.providers.arguments import decode_json
from journeyman.providers.pricing import estimate_tokens

ToolMode = Literal["native", "json_schema", "grammar", "text"]
ToolModeChoice = Literal["auto", "native", "json_schema", "grammar", "text"]
TOOL_MODES: tuple[ToolModeChoice, ...] = ("auto", "native", "json_schema", "grammar", "text")
CONSTRAINED_MODES: frozenset[str] = frozenset({"json_schema", "grammar"})
ResponseFormatStyle = Literal["json_schema", "json_object"]
"""`json_schema`: OpenAI's `{"type": "json_schema", "json_schema": {...}}`; `json_object`: the
`{"type": "json_object", "schema": ...}` that llama.cpp servers read."""

ANSWER_KEY = "answer"
"""Key of the reply shape that ends a turn without a tool call."""
RECORDS_FILE = "tool_modes.json"
CONFIG_DIR_ENV = "JOURNEYMAN_CONFIG_DIR"

MODE_DESCRIPTIONS: dict[str, str] = {
    "native": "native tool calls",
    "json_schema": "tool calls constrained by a JSON schema (response_format)",
    "grammar": "tool calls constrained by a GBNF grammar",
    "text": "tool calls written as fenced JSON in the text",
}


def parse_tool_mode(value: str) -> ToolModeChoice:
    """A `--tool-format` value, checked; raises ValueError naming the choices."""
    if value not in TOOL_MODES:
        raise ValueError(f"the tool format must be one of {', '.join(TOOL_MODES)}, not {value!r}")
    return value


# --------------------------------------------------------------------------- detection


def tools_were_dropped(
    prompt_tokens: int, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> bool | None:
    """Whether a server's reported prompt size shows that it left the tools out.

    True when the count is much closer to an estimate of the prompt without the tools than
    with them, False when it is closer to the latter, None when the count says nothing (none
    reported, or far below even the messages alone, as scripted test servers report).
    """
    if prompt_tokens <= 0 or not tools:
        return None
    without = estimate_tokens(system) + sum(estimate_tokens(m.content) for m in messages)
    without += 4 * len(messages)  # each message's framing
    tool_text = sum(
        estimate_tokens(json.dumps(t.parameters)) + estimate_tokens(t.description) for t in tools
    )
    with_tools = without + tool_text
    if prompt_tokens < without / 4:
        return None
    midpoint = math.sqrt(without * with_tools)  # halfway on a log scale: tokenizers differ
    return prompt_tokens < midpoint


# --------------------------------------------------------------------------- constrained replies


BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
"""Number bounds, which llama.cpp's schema-to-grammar converter does not enforce."""


def _has_bounds(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    options = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    return any(key in schema for key in BOUNDS) or any(_has_bounds(o) for o in options)


def _inline_refs(schema: Any, defs: Mapping[str, Any], depth: int) -> Any:
    """`schema` with its local `#/$defs/...` references replaced by what they name.

    A tool's schema sits inside the reply schema, where its references would no longer
    resolve. A reference nested deeper than a few levels (a recursive type) becomes "any".
    """
    if isinstance(schema, list):
        return [_inline_refs(item, defs, depth) for item in schema]
    if not isinstance(schema, dict):
        return schema
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        target = defs.get(reference.removeprefix("#/$defs/"))
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        if not isinstance(target, dict) or depth > 5:
            return rest
        return _inline_refs({**target, **rest}, defs, depth + 1)
    return {k: _inline_refs(v, defs, depth) for k, v in schema.items() if k != "$defs"}


def constrained_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's argument schema as a constrained reply can keep to it.

    Optional arguments with number bounds are left out: the grammar could not keep a model
    inside the bounds (a small model writes `"offset": 0` where 1 is the least), and without
    them the tool uses its defaults.
    """
    shaped = _inline_refs(dict(parameters), parameters.get("$defs") or {}, depth=0)
    shaped = shaped or {"type": "object"}
    properties = shaped.get("properties")
    if isinstance(properties, dict):
        required = set(shaped.get("required") or ())
        shaped["properties"] = {
            name: schema
            for name, schema in properties.items()
            if name in required or not _has_bounds(schema)
        }
    return shaped


REPLY_OVERHEAD_TOKENS = 48
"""What a reply's JSON around its strings takes: braces, keys, the tool's name."""
LONGEST_BOUNDED_STRING = 1000
"""The largest `maxLength` a reply schema carries. llama.cpp writes a bound as a repetition
and refuses a grammar whose repetitions reach 2,000 rules (the embedded model then crashes,
a server drops the request), so a string that may be longer than this is left unbounded:
it is only the small output limits, where a rambling string would be cut, that need one."""


def _within_grammar_limit(schema: dict[str, Any], limit: int) -> dict[str, Any]:
    """`schema` bounded to `limit` characters, or unbounded when that is more than a grammar
    may repeat (a tighter bound of the tool's own is kept)."""
    own = schema.get("maxLength")
    bound = limit if not isinstance(own, int) else min(limit, own)
    if bound > LONGEST_BOUNDED_STRING:
        return {key: value for key, value in schema.items() if key != "maxLength"}
    return {**schema, "maxLength": bound}


def _bound_strings(arguments: dict[str, Any], reply_tokens: int) -> dict[str, Any]:
    """`arguments` with each top-level string argument given a `maxLength`, so that together
    they fit in a reply of `reply_tokens` (up to `LONGEST_BOUNDED_STRING` each).

    A constrained reply cut at the token limit is unusable JSON. Small models do ramble inside
    a string (a command that never closes its quote), and nothing else makes them stop: with
    the bound the grammar closes the string in time. A token is at least one character, so a
    bound in characters is a bound in tokens.
    """
    properties = arguments.get("properties")
    if not isinstance(properties, dict):
        return arguments
    strings = [
        n for n, s in properties.items() if isinstance(s, dict) and s.get("type") == "string"
    ]
    if not strings:
        return arguments
    share = max(16, (reply_tokens - REPLY_OVERHEAD_TOKENS) // len(strings))
    bounded = dict(properties)
    for name in strings:
        bounded[name] = _within_grammar_limit(bounded[name], share)
    return {**arguments, "properties": bounded}


def call_shape(tool: ToolSpec, reply_tokens: int | None = None) -> dict[str, Any]:
    """The JSON schema of one call of `tool`: `{"tool": <its name>, "arguments": {...}}`,
    its strings bounded to fit a reply of `reply_tokens` when that is given."""
    parameters = constrained_parameters(tool.parameters)
    if reply_tokens is not None:
        parameters = _bound_strings(parameters, reply_tokens)
    return {
        "type": "object",
        "properties": {"tool": {"type": "string", "enum": [tool.name]}, "arguments": parameters},
        "required": ["tool", "arguments"],
    }


ENDING_TOOLS = frozenset({"finish"})
"""Tools that end a run (`tools.finish`): not offered while a call is required."""


def reply_schema(
    tools: Sequence[ToolSpec], *, require_call: bool, reply_tokens: int | None = None
) -> dict[str, Any]:
    """The union of the tool-call shapes, plus the final-answer shape unless a call is required
    (then the tools that end the run are left out too, when other tools remain). With
    `reply_tokens`, every string is bounded so that a reply fits in that many tokens."""
    offered = [t for t in tools if not (require_call and t.name in ENDING_TOOLS)] or list(tools)
    shapes = [call_shape(tool, reply_tokens) for tool in offered]
    if not require_call or not shapes:
        answer: dict[str, Any] = {"type": "string"}
        if reply_tokens is not None:
            answer = _within_grammar_limit(answer, max(16, reply_tokens - REPLY_OVERHEAD_TOKENS))
        shapes.append(
            {
                "type": "object",
                "properties": {ANSWER_KEY: answer},
                "required": [ANSWER_KEY],
            }
        )
    return shapes[0] if len(shapes) == 1 else {"anyOf": shapes}


def call_required(messages: Sequence[Message]) -> bool:
    """A constrained reply must call a tool until one has been called: an agent that has not
    looked at the workspace has nothing to answer with yet."""
    return not any(m.role is Role.TOOL for m in messages)


def response_format(schema: dict[str, Any], style: ResponseFormatStyle) -> dict[str, Any]:
    if style == "json_object":
        return {"type": "json_object", "schema": schema}
    return {
        "type": "json_schema",
        "json_schema": {"name": "tool_call_or_answer", "schema": schema},
    }


def grammar_for(schema: dict[str, Any]) -> str:
    """A GBNF grammar accepting exactly the JSON values `schema` allows.

    Built by llama.cpp's own converter (from `llama-cpp-python`, the `local` extra), so it
    follows whatever the server's grammar engine expects.
    """
    try:
        from llama_cpp.llama_grammar import json_schema_to_gbnf
    except ImportError as error:
        raise ImportError(
            "the grammar tool format needs llama-cpp-python: pip install 'journeyman[local]' "
            "(or use --tool-format json_schema or text)"
        ) from error
    try:
        return str(json_schema_to_gbnf(json.dumps(schema)))
    except Exception:  # a schema the converter cannot read: any JSON, checked on arrival
        from llama_cpp.llama_grammar import JSON_GBNF

        return str(JSON_GBNF)


def _first_sentence(text: str) -> str:
    line = text.strip().split("\n\n")[0].replace("\n", " ")
    head, dot, _ = line.partition(". ")
    return f"{head}." if dot else line


def render_instructions(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt appendix of the constrained modes: the reply shapes and the tools.

    Each tool gets one line (its arguments, `?` marking optional ones, and the first sentence
    of its description): the constraint already holds the full schemas, and a small model's
    prompt stays short.
    """
    lines = [
        "# Tools",
        "",
        "Reply with exactly one JSON object and nothing else. To use a tool, write",
        '{"tool": "<tool name>", "arguments": {<arguments>}}',
        "and its result arrives in the next message. When the task is done, write",
        f'{{"{ANSWER_KEY}": "<what you did and found>"}}.',
        "",
        "Tools:",
    ]
    for tool in tools:
        parameters = constrained_parameters(tool.parameters)
        properties = parameters.get("properties") or {}
        required = set(parameters.get("required") or ())
        names = ", ".join(n if n in required else f"{n}?" for n in properties)
        lines.append(f"- {tool.name}({names}): {_first_sentence(tool.description)}")
    return "\n".join(lines)


def render_call(call: ToolCall) -> str:
    """An earlier call, written the way a constrained reply writes it."""
    return json.dumps({"tool": call.name, "arguments": call.arguments}, ensure_ascii=False)


def parse_reply(
    text: str, tools: Sequence[ToolSpec], call_id: str
) -> tuple[str, list[ToolCall], str | None]:
    """(answer text, calls, format error) of a constrained reply."""
    known = {tool.name for tool in tools}
    expected = (
        'Reply with one JSON object: {"tool": "<tool name>", "arguments": {...}} to call a '
        f'tool, or {{"{ANSWER_KEY}": "..."}} when you are done.'
    )
    value, problem = decode_json(text)
    if problem is not None:
        cut = " (it looks cut off: the output token limit?)" if text.strip() else ""
        return text, [], f"Your reply was not one complete JSON object{cut}. {expected}"
    if not isinstance(value, dict):
        return text, [], f"Your reply was JSON but not an object. {expected}"
    if "tool" in value:
        name = value.get("tool")
        arguments = value.get("arguments") or {}
        if not isinstance(name, str) or name not in known:
            return "", [], f"There is no tool named {name!r}. {expected}"
        if not isinstance(arguments, dict):
            return "", [], f'"arguments" of {name} must be a JSON object. {expected}'
        return "", [ToolCall(call_id, name, arguments)], None
    answer = value.get(ANSWER_KEY)
    if isinstance(answer, str):
        return answer, [], None
    return text, [], f"The object has neither a tool call nor an answer. {expected}"


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class ToolModeRecord:
    """The tool mode found for one server and model."""

    mode: ToolMode
    response_format: ResponseFormatStyle | None = None
    """For `json_schema`: the request shape the server took."""
    reason: str = ""
    """Why this mode was chosen (shown when it is used)."""


def records_path(env: Mapping[str, str] | None = None) -> Path:
    """`tool_modes.json` in the user's config directory (JOURNEYMAN_CONFIG_DIR overrides it)."""
    env = os.environ if env is None else env
    root = env.get(CONFIG_DIR_ENV)
    if not root:
        from platformdirs import user_config_dir

        root = user_config_dir("journeyman")
    return Path(root) / RECORDS_FILE


def _key(base_url: str, model: str) -> str:
    return f"{base_url.rstrip('/')} {model}"


class ToolModeRecords:
    """The detected modes on disk, one per (base URL, model); unreadable files count as empty."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or records_path()

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, base_url: str, model: str) -> ToolModeRecord | None:
        entry = self._load().get(_key(base_url, model))
        if not isinstance(entry, dict) or entry.get("mode") not in MODE_DESCRIPTIONS:
            return None
        style = entry.get("response_format")
        return ToolModeRecord(
            mode=entry["mode"],
            response_format=style if style in ("json_schema", "json_object") else None,
            reason=str(entry.get("reason", "")),
        )

    def put(self, base_url: str, model: str, record: ToolModeRecord) -> bool:
        """Record `record`; False when the file cannot be written (detection runs again)."""
        data = self._load()
        data[_key(base_url, model)] = {
            "mode": record.mode,
            "response_format": record.response_format,
            "reason": record.reason,
            "detected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
            temporary.replace(self.path)
        except OSError:
            return False
        return True
