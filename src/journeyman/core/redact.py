"""Removes secret values (API keys, tokens, passwords) from text before it leaves the agent.

One home for what counts as a secret:
- `is_secret_name`: an environment variable whose name says it holds a credential
  (`*_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`, ...); its value is a secret.
- `looks_secret`: those, plus the provider's settings (`ANTHROPIC_*`, `OPENAI_*`, ...), which
  the programs the user configured (language servers, graders) do not get. Commands the model
  runs get an allow-listed environment instead (`tools.sandbox.environment`): a name
  heuristic misses `GH_PAT` or `SENTRY_DSN`.
- credentials inside URLs held by any variable (`https://user:pass@host`, `?api_key=...`),
  and URLs given with `remember_url_credentials` (a `--base-url`);
- the keys the providers were built with (`remember_provider_key`, `own_secret_values`).

A secret is found in its raw form, JSON-escaped (once or twice, ASCII-only or not),
percent-encoded, base64-encoded (at any alignment within a longer base64 text), reversed and
in hexadecimal, also when spaces or line breaks cut it (`fold`, `base64 -w`, `xxd -p`).
`Redactor` also masks well-known key shapes (`sk-ant-...`, `ghp_...`) even when they are not
ours; `redact_own_secrets` masks only the agent's own values, so that a repository's fake test
keys reach the model intact. `StreamRedactor` redacts a text that arrives in fragments
(streamed model output) as one text.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 8
"""Shorter values are not masked: they would mask ordinary words everywhere."""

_CREDENTIAL_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|SECRET_?KEY|SECRET|TOKEN|PASS|PASSPHRASE"
    r"|CREDENTIALS?|AUTH_?KEY|SESSION_?KEY)(?:_|$)"
    r"|_KEY$|_TOKEN$|_SECRET$|PASSWORD|PASSWD|API_?KEY|SECRET|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY",
    re.IGNORECASE,
)
_PROVIDER_SETTING = re.compile(r"^(?:AWS|ANTHROPIC|OPENAI|AZURE_OPENAI)_", re.IGNORECASE)
_SECRET_QUERY_NAME = re.compile(r"key|token|secret|pass|auth|sig", re.IGNORECASE)

# Well-known key shapes, caught even when the value is not in our environment.
_KEY_SHAPES = re.compile(
    r"\b(sk-ant-[A-Za-z0-9_\-]{16,}|sk-(?:proj-)?[A-Za-z0-9_\-]{20,}|"
    r"gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}|xox[baprs]-[A-Za-z0-9\-]{10,})"
)

_KEY_PREFIXES = re.compile(r"sk-|gh[pousr]_|AKIA|xox[baprs]-")
"""The literal starts of `_KEY_SHAPES`: a quick test before the full pattern."""
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^/\s:@\"'\\]+:)[^/\s@\"'\\]+(@)", re.I)
"""`scheme://user:password@host`: the password goes, the user name stays."""
_URL_SECRET_PARAM = re.compile(
    r"([?&](?:key|api[_\-]?key|apikey|token|access[_\-]?token|auth|secret|password|sig|"
    r"signature|client[_\-]?secret)=)[^&#\s\"'\\]+",
    re.I,
)
"""Query parameters that carry a credential (`?key=...`, `&access_token=...`)."""

_SPACE = re.compile(r"\s")
_SPACES = re.compile(r"\s+")
_remembered: set[str] = set()
_provider_keys: set[str] = set()


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says its value is a credential."""
    return bool(_CREDENTIAL_NAME.search(name))


def looks_secret(name: str) -> bool:
    """Whether a variable is kept from commands: a credential or a provider setting."""
    return is_secret_name(name) or bool(_PROVIDER_SETTING.search(name))


def url_credentials(text: str) -> set[str]:
    """Passwords, token user names and secret query values inside a URL (empty if none)."""
    if "://" not in text:
        return set()
    try:
        parts = urlsplit(text.strip())
        password, user = parts.password, parts.username
        query = parse_qsl(parts.query)
    except ValueError:
        return set()
    found = {value for name, value in query if _SECRET_QUERY_NAME.search(name)}
    if password:
        found.add(password)
    elif user and len(user) >= 20:
        found.add(user)  # https://<token>@host; a short one is an account name
    return found


def remember_url_credentials(url: str | None) -> None:
    """Treat the credentials inside `url` (e.g. the user's `--base-url`) as secrets too."""
    if url:
        _remembered.update(url_credentials(url))


def remember_secret(value: str | None) -> None:
    """Treat `value` (e.g. an API key given as an argument, not in the environment) as secret."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        _remembered.add(value)


def remember_provider_key(value: str | None) -> None:
    """`value` is a key a provider of this run was built with: it is masked like any secret,
    and no command gets a variable holding it (`own_secret_values`)."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        _remembered.add(value)
        _provider_keys.add(value)


def own_secret_values() -> frozenset[str]:
    """The keys this process's providers were built with (`remember_provider_key`)."""
    return frozenset(_provider_keys)


def secret_values(env: Mapping[str, str], extra: Iterable[str] = ()) -> set[str]:
    """The secret values held by `env` (see the module doc), plus `extra`."""
    values = set(extra)
    for name, value in env.items():
        if is_secret_name(name):
            values.add(value)
        values |= url_credentials(value)
    return {value for value in values if len(value) >= MIN_SECRET_LENGTH}


def encoded_forms(value: str) -> set[str]:
    """`value` as it may appear in text: raw, JSON-escaped, percent-encoded, base64, reversed
    (`rev`), hexadecimal (`xxd -p`, `od`-free dumps)."""
    raw_bytes = value.encode("utf-8", errors="surrogatepass")
    forms = {value, quote(value, safe=""), value[::-1], raw_bytes.hex(), raw_bytes.hex().upper()}
    for ascii_only in (True, False):
        once = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        forms.add(once)
        forms.add(json.dumps(once, ensure_ascii=ascii_only)[1:-1])
    raw = value.encode("utf-8", errors="surrogatepass")
    for shift in range(3):
        # Base64 of the value preceded by `shift` other bytes; keep only the characters that
        # depend on the value alone, so the fragment matches inside any longer base64 text.
        encoded = base64.b64encode(b"\0" * shift + raw).decode().rstrip("=")
        first = -(-shift * 8 // 6)
        last = (shift + len(raw)) * 8 // 6
        fragment = encoded[first:last]
        if len(fragment) >= MIN_SECRET_LENGTH:
            forms.add(fragment)
            forms.add(fragment.replace("+", "-").replace("/", "_"))
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def _pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    forms = set().union(*(encoded_forms(v) for v in values)) if values else set()
    ordered = sorted(forms, key=len, reverse=True)
    return re.compile("|".join(re.escape(f) for f in ordered)) if ordered else None


class Redactor:
    """Replaces secret values of an environment (in every encoded form) with MASK; with
    `key_shapes` (the default) also well-known key shapes and credentials written in URLs,
    whoever they belong to."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        min_length: int = MIN_SECRET_LENGTH,
        *,
        extra: Iterable[str] = (),
        key_shapes: bool = True,
    ) -> None:
        if env is None:  # the agent's own: its environment's secrets and the remembered ones
            env, extra = os.environ, [*extra, *_remembered]
        values = {v for v in secret_values(env, extra) if len(v) >= min_length}
        self._values = _pattern(values)
        self._key_shapes = key_shapes
        forms = set().union(*(encoded_forms(v) for v in values)) if values else set()
        self._forms_by_first: dict[str, list[str]] = {}
        for form in sorted(forms):
            self._forms_by_first.setdefault(form[0], []).append(form)
        self._hold = max((len(form) for form in forms), default=1) - 1

    def __call__(self, text: str) -> str:
        if self._values is not None:
            text = self._values.sub(MASK, text)
            text = self._mask_split(text)
        if not self._key_shapes:
            return text
        if "://" in text:
            text = _URL_PASSWORD.sub(rf"\g<1>{MASK}\g<2>", text)
        if "=" in text:
            text = _URL_SECRET_PARAM.sub(rf"\g<1>{MASK}", text)
        if _KEY_PREFIXES.search(text):
            text = _KEY_SHAPES.sub(MASK, text)
        return text

    def unfinished_secret(self, text: str) -> int:
        """Where the end of `text` may be the beginning of a secret's form still to come
        (`len(text)` when it cannot): what a stream must hold back."""
        for start in range(max(len(text) - self._hold, 0), len(text)):
            candidates = self._forms_by_first.get(text[start])
            if candidates and any(form.startswith(text[start:]) for form in candidates):
                return start
        return len(text)

    def _mask_split(self, text: str) -> str:
        """Forms of a secret written across spaces or line breaks (`fold`, `base64 -w`,
        `xxd -p`): masked from their first character to their last."""
        if self._values is None or not _SPACE.search(text):
            return text
        squeezed = _SPACES.sub("", text)
        matches = list(self._values.finditer(squeezed))
        if not matches:
            return text
        kept = [i for i, char in enumerate(text) if not char.isspace()]
        for match in reversed(matches):
            first, last = kept[match.start()], kept[match.end() - 1]
            text = text[:first] + MASK + text[last + 1 :]
        return text

    def finds(self, text: str) -> bool:
        """Whether redacting `text` would change anything (cheaper than redacting)."""
        if self._values is not None and self._values.search(text):
            return True
        return self._key_shapes and bool(
            ("://" in text and _URL_PASSWORD.search(text))
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


def redact_own_secrets(text: str, env: Mapping[str, str] | None = None) -> str:
    """`text` without the agent's own secret values (its environment's and remembered URLs')."""
    env = os.environ if env is None else env
    return _own_redactor(frozenset(secret_values(env, _remembered)))(text)


@functools.lru_cache(maxsize=8)
def _own_redactor(values: frozenset[str]) -> Redactor:
    return Redactor({}, extra=values, key_shapes=False)


MAX_HOLD = 4096
"""Most characters a stream holds back waiting for a word to end (a longer word is let
through in pieces, own secrets still masked)."""


class StreamRedactor:
    """Redacts a text that arrives in fragments (streamed model output) as one text.

    Redacting each fragment alone lets a secret split across two fragments through, in
    halves that join again on the reader's side. `feed` returns only what is safe to show so
    far: it holds back the end of the text that could still be the start of a secret (of any
    encoded form of a known value) and the last word, which a key shape may go on; `flush`
    gives the rest when the stream ends.
    """

    def __init__(self, redactor: Redactor | None = None, max_hold: int = MAX_HOLD) -> None:
        self._redact = redactor or Redactor()
        self._max_hold = max_hold
        self._pending = ""

    def feed(self, fragment: str) -> str:
        """The redacted text that can be shown now (possibly empty)."""
        text = self._pending + fragment
        cut = self._cut(text)
        self._pending = text[cut:]
        return self._redact(text[:cut]) if cut else ""

    def flush(self) -> str:
        """The redacted rest of the text; the stream starts anew."""
        text, self._pending = self._pending, ""
        return self._redact(text) if text else ""

    def _cut(self, text: str) -> int:
        """Where `text` may be cut: before the held-back end, at the start of a word, and
        never inside a complete secret."""
        limit = cut = self._redact.unfinished_secret(text)
        while cut and not text[cut - 1].isspace():
            cut -= 1
        if cut == 0 and len(text) > self._max_hold:
            cut = limit  # one endless word: let it through, own secrets still masked
        values = self._redact._values
        if values is not None and cut:
            for match in values.finditer(text):
                if match.start() < cut < match.end():
                    cut = match.end()
        return cut
