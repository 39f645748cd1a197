"""Removes secret values (API keys, tokens) from anything we persist or print."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

SECRET_NAME = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY)", re.IGNORECASE
)
"""Environment variable names whose values are treated as secrets."""

# Well-known key shapes, caught even when the value is not in our environment.
_KEY_SHAPES = re.compile(
    r"\b(sk-ant-[A-Za-z0-9_\-]{16,}|sk-(?:proj-)?[A-Za-z0-9_\-]{20,}|"
    r"gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}|xox[baprs]-[A-Za-z0-9\-]{10,})"
)
MASK = "[REDACTED]"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


class Redactor:
    """Replaces the values of secret-looking environment variables and known key shapes."""

    def __init__(self, env: Mapping[str, str] | None = None, min_length: int = 8) -> None:
        env = os.environ if env is None else env
        values = sorted(
            {v for k, v in env.items() if is_secret_name(k) and len(v) >= min_length},
            key=len,
            reverse=True,
        )
        self._values = re.compile("|".join(re.escape(v) for v in values)) if values else None

    def __call__(self, text: str) -> str:
        if self._values is not None:
            text = self._values.sub(MASK, text)
        return _KEY_SHAPES.sub(MASK, text)
