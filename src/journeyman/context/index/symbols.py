"""Top-level symbols of code files from tree-sitter grammars (classes, functions, methods)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from journeyman.context.index.config import IndexConfig
from journeyman.context.index.records import Symbol


@dataclass(frozen=True)
class _Grammar:
    definitions: Mapping[str, str]
    """Top-level node type -> symbol kind."""
    members: Mapping[str, str]
    """Node type inside a container's body -> member kind."""
    wrappers: Mapping[str, str] = field(default_factory=dict)
    """Node type -> field holding the real definition (exports, decorators)."""
    passthrough: frozenset[str] = frozenset()
    """Body child types whose own children are members (Java enum body declarations)."""


_CONTAINERS = frozenset({"class", "interface", "trait", "impl", "enum"})

_JS_DEFINITIONS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "function_signature": "function",
}
_JS_MEMBERS = {
    "method_definition": "method",
    "method_signature": "method",
    "abstract_method_signature": "method",
}
_JS_WRAPPERS = {"export_statement": "declaration", "ambient_declaration": ""}

_GRAMMARS: Mapping[str, _Grammar] = {
    "python": _Grammar(
        definitions={"class_definition": "class", "function_definition": "function"},
        members={"function_definition": "method"},
        wrappers={"decorated_definition": "definition"},
    ),
    "javascript": _Grammar(_JS_DEFINITIONS, _JS_MEMBERS, _JS_WRAPPERS),
    "typescript": _Grammar(_JS_DEFINITIONS, _JS_MEMBERS, _JS_WRAPPERS),
    "tsx": _Grammar(_JS_DEFINITIONS, _JS_MEMBERS, _JS_WRAPPERS),
    "go": _Grammar(
        definitions={"function_declaration": "function", "method_declaration": "method"},
        members={},
    ),
    "rust": _Grammar(
        definitions={
            "function_item": "function",
            "struct_item": "struct",
            "enum_item": "enum",
            "trait_item": "trait",
            "impl_item": "impl",
            "type_item": "type",
            "union_item": "struct",
        },
        members={"function_item": "method", "function_signature_item": "method"},
    ),
    "java": _Grammar(
        definitions={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "enum_declaration": "enum",
            "record_declaration": "class",
            "annotation_type_declaration": "interface",
        },
        members={"method_declaration": "method", "constructor_declaration": "method"},
        passthrough=frozenset({"enum_body_declarations"}),
    ),
}

_parsers: dict[str, Any] = {}


def _parser(grammar: str) -> Any:
    parser = _parsers.get(grammar)
    if parser is None:
        from tree_sitter_language_pack import get_parser

        parser = _parsers[grammar] = get_parser(grammar)  # type: ignore[arg-type]
    return parser


def extract_symbols(
    source: bytes, grammar: str, config: IndexConfig | None = None
) -> tuple[Symbol, ...]:
    """Top-level definitions of `source` and the members of its classes, in file order.

    `grammar` is a tree-sitter grammar name (python, javascript, typescript, tsx, go, rust,
    java). A file with syntax errors still yields what tree-sitter could parse.
    """
    spec = _GRAMMARS.get(grammar)
    if spec is None:
        return ()
    limit = (config or IndexConfig()).signature_chars
    tree = _parser(grammar).parse(source)
    out: list[Symbol] = []
    for child in tree.root_node.named_children:
        for node in _unwrap(child, spec):
            out += _definition(node, source, grammar, spec, limit)
    return tuple(out)


def _unwrap(node: Any, spec: _Grammar) -> list[Any]:
    """The definitions behind an export/decorator/ambient wrapper (the node itself otherwise)."""
    field_name = spec.wrappers.get(node.type)
    if field_name is None:
        return [node]
    inner = node.child_by_field_name(field_name) if field_name else None
    if inner is not None:
        return _unwrap(inner, spec)
    return [n for c in node.named_children for n in _unwrap(c, spec)]


def _definition(node: Any, source: bytes, grammar: str, spec: _Grammar, limit: int) -> list[Symbol]:
    line = node.start_point[0] + 1
    if grammar == "go" and node.type == "type_declaration":
        return [_go_type(spec_node, source, limit) for spec_node in node.named_children
                if spec_node.type in ("type_spec", "type_alias")]  # fmt: skip
    if node.type in ("lexical_declaration", "variable_declaration") and grammar in (
        "javascript",
        "typescript",
        "tsx",
    ):
        return _js_function_variables(node, source, limit)
    kind = spec.definitions.get(node.type)
    if kind is None:
        return []
    name = _name(node, source)
    parent = None
    if grammar == "go" and node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")
        parent = _receiver_type(receiver, source) if receiver is not None else None
    symbol = Symbol(name, kind, _signature(node, source, limit), line, parent)
    out = [symbol]
    if kind in _CONTAINERS:
        body = node.child_by_field_name("body")
        members = list(body.named_children) if body is not None else []
        while members:
            member = members.pop(0)
            if member.type in spec.passthrough:
                members = list(member.named_children) + members
                continue
            for inner in _unwrap(member, spec):
                member_kind = spec.members.get(inner.type)
                if member_kind is not None:
                    out.append(
                        Symbol(
                            _name(inner, source),
                            member_kind,
                            _signature(inner, source, limit),
                            inner.start_point[0] + 1,
                            name,
                        )
                    )
    return out


def _text(node: Any, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def _name(node: Any, source: bytes) -> str:
    name = node.child_by_field_name("name")
    if name is not None:
        return _text(name, source)
    if node.type == "impl_item":  # impl Trait for Type / impl Type
        target = node.child_by_field_name("type")
        trait = node.child_by_field_name("trait")
        if target is not None:
            base = _text(target, source)
            return f"{_text(trait, source)} for {base}" if trait is not None else base
    return "?"


_OPEN_SPACE = re.compile(r"([(\[{]) ")
_CLOSE_SPACE = re.compile(r",? ([)\]}])")


def _squash(text: str, limit: int) -> str:
    """One line: whitespace runs collapsed, no padding inside brackets, cut at `limit`."""
    text = _CLOSE_SPACE.sub(r"\1", _OPEN_SPACE.sub(r"\1", " ".join(text.split())))
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _signature(node: Any, source: bytes, limit: int) -> str:
    """The node's text up to its body, on one line (first line for body-less nodes)."""
    body = node.child_by_field_name("body")
    if body is None and node.type == "type_alias_declaration":
        body = node.child_by_field_name("value")
    if body is not None and body.start_byte > node.start_byte:
        # Up to the last token before the body: comments between header and body stay out.
        end = max(
            (c.end_byte for c in node.children
             if c.end_byte <= body.start_byte and c.type != "comment"),
            default=body.start_byte,
        )  # fmt: skip
        text = source[node.start_byte : end].decode("utf-8", errors="replace")
        text = text.rstrip().removesuffix("=").removesuffix(":")
    else:
        text = _text(node, source).split("\n", 1)[0].rstrip().removesuffix("{")
    return _squash(text.rstrip().removesuffix(";"), limit)


def _go_type(node: Any, source: bytes, limit: int) -> Symbol:
    name = (
        _text(node.child_by_field_name("name"), source) if node.child_by_field_name("name") else "?"
    )
    value = node.child_by_field_name("type")
    kinds = {"struct_type": "struct", "interface_type": "interface"}
    kind = kinds.get(value.type, "type") if value is not None else "type"
    shown = kind if kind != "type" and value is not None else _text(value, source) if value else ""
    return Symbol(name, kind, _squash(f"type {name} {shown}", limit), node.start_point[0] + 1)


def _receiver_type(receiver: Any, source: bytes) -> str:
    text = _text(receiver, source).strip("()").split()
    return text[-1].lstrip("*").split("[", 1)[0] if text else "?"


def _js_function_variables(node: Any, source: bytes, limit: int) -> list[Symbol]:
    out = []
    for declarator in node.named_children:
        if declarator.type != "variable_declarator":
            continue
        value = declarator.child_by_field_name("value")
        if value is None or value.type not in ("arrow_function", "function_expression", "function"):
            continue
        body = value.child_by_field_name("body")
        end = body.start_byte if body is not None else value.end_byte
        header = source[node.start_byte : end].decode("utf-8", errors="replace").rstrip()
        out.append(
            Symbol(
                _name(declarator, source),
                "function",
                _squash(header.removesuffix("=>").rstrip() + " =>", limit),
                node.start_point[0] + 1,
            )
        )
    return out
