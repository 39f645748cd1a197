"""Removes secret values (API keys, tokens, URL credentials) from anything we persist or print.

A secret is found in the form it was given and in the forms it takes inside JSON text: a value
holding `"`, `\\`, a control character or a non-ASCII letter is written differently once
escaped (`"` becomes `\\"`, `é` becomes `\\u00e9` under `ensure_ascii`), and a JSON text quoted
inside another (a tool result holding JSON) escapes it twice.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_NAME = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY)", re.IGNORECASE
)
"""Environment variable names whose values are treated as secrets."""

# Well-known key shapes, caught even when the value is not in our environment.
_KEY_SHAPES = re.compile(
    r"\b(sk-ant-[A-Za-z0-9_\-]{16,}|sk-(?:proj-)?[A-Za-z0-9_\-]{20,}|"
    r"gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}|xox[baprs]-[A-Za-z0-9\-]{10,})"
)
_KEY_PREFIXES = re.compile(r"sk-|gh[pousr]_|AKIA|xox[baprs]-")
"""The literal starts of `_KEY_SHAPES`: a quick test before the full pattern."""
MASK = "[REDACTED]"

_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^/\s:@\"'\\]+:)[^/\s@\"'\\]+(@)", re.I)
"""`scheme://user:password@host`: the password goes, the user name stays."""
_URL_SECRET_PARAM = re.compile(
    r"([?&](?:key|api[_\-]?key|apikey|token|access[_\-]?token|auth|secret|password|sig|"
    r"signature|client[_\-]?secret)=)[^&#\s\"'\\]+",
    re.I,
)
"""Query parameters that carry a credential (`?key=...`, `&access_token=...`)."""

JSON_DEPTH = 2
"""How many times a secret may be JSON-escaped and still be found (a JSON text in a JSON
string in a JSON document)."""


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def encoded_forms(secret: str, depth: int = JSON_DEPTH) -> set[str]:
    """`secret` as given and as it appears inside JSON strings, escaped up to `depth` times,
    with and without ASCII escaping of non-ASCII characters."""
    forms = {secret}
    current = {secret}
    for _ in range(depth):
        escaped = {
            json.dumps(form, ensure_ascii=ascii_only)[1:-1]
            for form in current
            for ascii_only in (False, True)
        }
        forms |= escaped
        current = escaped
    return forms


class Redactor:
    """Replaces the values of secret-looking environment variables (in every encoded form),
    known key shapes and credentials in URLs."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        min_length: int = 8,
        secrets: Iterable[str] = (),
    ) -> None:
        env = os.environ if env is None else env
        values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= min_length}
        values |= {v for v in secrets if len(v) >= min_length}
        forms = sorted({form for v in values for form in encoded_forms(v)}, key=len, reverse=True)
        self._values = re.compile("|".join(re.escape(f) for f in forms)) if forms else None

    def __call__(self, text: str) -> str:
        if self._values is not None:
            text = self._values.sub(MASK, text)
        if "://" in text:
            text = _URL_PASSWORD.sub(rf"\g<1>{MASK}\g<2>", text)
        if "=" in text:
            text = _URL_SECRET_PARAM.sub(rf"\g<1>{MASK}", text)
        if _KEY_PREFIXES.search(text):
            text = _KEY_SHAPES.sub(MASK, text)
        return text

    def finds(self, text: str) -> bool:
        """Whether `redact(text)` would change anything (a cheaper test than redacting)."""
        return bool(
            (self._values is not None and self._values.search(text))
            or ("://" in text and _URL_PASSWORD.search(text))
            or ("=" in text and _URL_SECRET_PARAM.search(text))
            or (_KEY_PREFIXES.search(text) and _KEY_SHAPES.search(text))
        )

    def tree(self, data: Any) -> Any:
        """`data` (JSON-like: dicts, lists, strings, numbers) with every string redacted, and
        the value of every key named like a secret masked whole."""
        if isinstance(data, str):
            return self(data)
        if isinstance(data, Mapping):
            return {
                key: MASK
                if isinstance(key, str) and is_secret_name(key) and isinstance(value, str) and value
                else self.tree(value)
                for key, value in data.items()
            }
        if isinstance(data, list | tuple):
            return [self.tree(item) for item in data]
        if data is None or isinstance(data, bool | int | float):
            return data
        return self(str(data))  # what json.dumps(default=str) would write
