"""Records read back from JSON (the session store, a results file, a stream-json line): a
dataclass is rebuilt field by field from its type hints, and anything that does not fit is a
`StoredFormatError` saying which field and why, never a half-built record.

A stored record is data: it may come from an older version (fields added since have defaults
and read as those), from an imported file, or from someone who edited the store. Keys the
dataclass does not know are ignored; a field without a default that is missing, or a value of
the wrong kind, refuses the record.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any, Literal, TypeVar

T = TypeVar("T")

MISSING_TIMESTAMP = 0.0
"""What a stored event without its `timestamp` reads as (never the time it was read)."""


class StoredFormatError(ValueError):
    """A stored record this version cannot read."""


def decode(cls: type[T], data: Any, path: str = "") -> T:
    """`data` (a JSON object) as a `cls` dataclass; `path` names it in errors (a field of an
    enclosing record)."""
    if not isinstance(data, Mapping):
        raise StoredFormatError(f"{_named(path, cls)} is {_kind(data)}, not an object")
    values: dict[str, Any] = {}
    for name, hint, required in _fields(cls):
        if name not in data:
            if name == "timestamp":
                values[name] = MISSING_TIMESTAMP
            elif required:
                raise StoredFormatError(f"{_at(path, name)!r} is missing")
            continue
        value = data[name]
        if type(value) is hint and hint in _PLAIN:  # the common case, checked first
            values[name] = value
        else:
            values[name] = _value(hint, value, _at(path, name))
    return cls(**values)


_PLAIN = frozenset({str, int, float, bool})
"""Types whose JSON value is taken as it is when it has exactly that type."""


def _at(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def decode_tagged(types_by_tag: Mapping[str, type[T]], data: Any, what: str = "event") -> T:
    """`data` as the dataclass its `type` names in `types_by_tag`; `what` names the kind of
    record in errors."""
    if not isinstance(data, Mapping):
        raise StoredFormatError(f"{what} is {_kind(data)}, not an object")
    tag = data.get("type")
    if not isinstance(tag, str):
        raise StoredFormatError(f"{what} has no type")
    cls = types_by_tag.get(tag)
    if cls is None:
        raise StoredFormatError(f"{what} of unknown type {tag[:80]!r}")
    try:
        return decode(cls, data)
    except StoredFormatError as error:
        raise StoredFormatError(f"{tag} {what}: {error}") from None


def tag_of(cls: type[Any]) -> str:
    """The `type` a tagged dataclass is stored under (its `type` field's default)."""
    for f in dataclasses.fields(cls):
        if f.name == "type" and isinstance(f.default, str):
            return f.default
    raise TypeError(f"{cls.__name__} has no default `type` to be stored under")


_FIELDS: dict[type[Any], tuple[tuple[str, Any, bool], ...]] = {}


def _fields(cls: type[Any]) -> tuple[tuple[str, Any, bool], ...]:
    """(name, type hint, required) of each field `cls` is built from, worked out once."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELDS[cls] = tuple(
            (
                f.name,
                hints[f.name],
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
            if f.init
        )
    return found


def _value(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if hint is type(None):
        if value is not None:
            raise StoredFormatError(f"{where!r} is {_kind(value)}, not null")
        return None
    if origin is typing.Union or origin is types.UnionType:
        return _union(typing.get_args(hint), value, where)
    if origin is Literal:
        if value not in typing.get_args(hint):
            raise StoredFormatError(f"{where!r} is not one of {typing.get_args(hint)}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, list | tuple):
            raise StoredFormatError(f"{where!r} is {_kind(value)}, not a list")
        item = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        items = [_value(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or hint is dict:
        if not isinstance(value, Mapping):
            raise StoredFormatError(f"{where!r} is {_kind(value)}, not an object")
        return dict(value)
    if isinstance(hint, type):
        return _plain(hint, value, where)
    raise TypeError(f"{where}: no reader for {hint!r}")  # a field type this module lacks


def _union(options: tuple[Any, ...], value: Any, where: str) -> Any:
    if value is None and type(None) in options:
        return None
    problems = []
    for option in options:
        if option is type(None):
            continue
        try:
            return _value(option, value, where)
        except StoredFormatError as error:
            problems.append(str(error))
    raise StoredFormatError(
        problems[0] if len(problems) == 1 else f"{where!r} fits none of its types"
    )


def _plain(cls: type[Any], value: Any, where: str) -> Any:
    if issubclass(cls, Enum):
        try:
            return cls(value)
        except (ValueError, TypeError):
            raise StoredFormatError(
                f"{where!r}: {str(value)[:80]!r} is not a known value"
            ) from None
    if dataclasses.is_dataclass(cls):
        return decode(cls, value, where)
    if cls is bool:
        if not isinstance(value, bool):
            raise StoredFormatError(f"{where!r} is {_kind(value)}, not true or false")
        return value
    if cls is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise StoredFormatError(f"{where!r} is {_kind(value)}, not a whole number")
        return value
    if cls is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise StoredFormatError(f"{where!r} is {_kind(value)}, not a number")
        return float(value)
    if cls is str:
        if not isinstance(value, str):
            raise StoredFormatError(f"{where!r} is {_kind(value)}, not text")
        return value
    raise TypeError(f"{where}: no reader for {cls.__name__}")


def _named(path: str, cls: type[Any]) -> str:
    return repr(path) if path else cls.__name__


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
