"""What counts as a secret, and the forms it is found in."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from journeyman.core.redact import (
    MASK,
    Redactor,
    is_secret_name,
    looks_secret,
    redact_own_secrets,
    remember_url_credentials,
    secret_values,
)

KEY = 'sk-weird"key\\wörd-0123456789'


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("ANTHROPIC_API_KEY", True),
        ("STRIPE_KEY", True),
        ("GITHUB_TOKEN", True),
        ("CLIENT_SECRET", True),
        ("PGPASSWORD", True),
        ("db_password_file", True),
        ("OPENAI_BASE_URL", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("KEYBOARD", False),
        ("GIT_ASKPASS", False),
        ("HOME", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_provider_settings_are_kept_from_commands_but_not_masked() -> None:
    assert looks_secret("OPENAI_BASE_URL") and not is_secret_name("OPENAI_BASE_URL")


def test_raw_json_escaped_percent_and_base64_forms_are_masked() -> None:
    redact = Redactor({"MY_API_KEY": KEY}, key_shapes=False)
    texts = [
        f"raw {KEY} end",
        json.dumps({"v": KEY}),
        json.dumps({"v": KEY}, ensure_ascii=False),
        json.dumps(json.dumps({"v": KEY})),  # JSON inside a JSON string
        quote(KEY, safe=""),
        base64.b64encode(KEY.encode()).decode(),
        base64.b64encode(b"x" + KEY.encode()).decode(),
        base64.b64encode(b"xy" + KEY.encode() + b"tail").decode(),
    ]
    for text in texts:
        cleaned = redact(text)
        assert MASK in cleaned, text
        assert "0123456789" not in cleaned and "wörd" not in cleaned, text


@given(prefix=st.binary(max_size=5), suffix=st.binary(max_size=5))
def test_base64_of_the_key_inside_other_bytes_is_masked(prefix: bytes, suffix: bytes) -> None:
    redact = Redactor({"MY_API_KEY": KEY}, key_shapes=False)
    encoded = base64.b64encode(prefix + KEY.encode() + suffix).decode()
    assert MASK in redact(encoded)


def test_url_credentials_are_secrets() -> None:
    env = {
        "OPENAI_BASE_URL": "https://me:hunter2-long-pass@proxy.example/v1",
        "MIRROR": "https://example.org/simple?api_key=abcdef123456&page=2",
        "REPO": "https://ghp_tokenvalue0123456789abcd@github.com/x/y",
        "DATABASE_URL": "postgres://postgres@localhost/db",
    }
    values = secret_values(env)
    assert {"hunter2-long-pass", "abcdef123456", "ghp_tokenvalue0123456789abcd"} <= values
    assert "postgres" not in values  # an account name, not a credential


def test_own_secrets_only_and_remembered_base_url() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-own-key-0123456789"}
    text = "ours sk-ant-own-key-0123456789, a fixture sk-ant-fake-fixture-abcdefghij"
    cleaned = redact_own_secrets(text, env)
    assert "own-key" not in cleaned and "sk-ant-fake-fixture-abcdefghij" in cleaned
    remember_url_credentials("http://user:flag-password-42@127.0.0.1:9/v1")
    assert "flag-password-42" not in redact_own_secrets("pw flag-password-42", {})


STREAM_KEY = "sk-proj-" + "Ab3dE5gH" * 5


@given(
    before=st.text(alphabet="ab \n.", max_size=30),
    after=st.text(alphabet="ab \n.", max_size=30),
    cuts=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=40),
    form=st.sampled_from(["raw", "reversed", "hex", "unknown shape"]),
)
def test_a_stream_cut_anywhere_never_shows_a_secret(
    before: str, after: str, cuts: list[int], form: str
) -> None:
    from journeyman.core.redact import StreamRedactor

    secret = {
        "raw": STREAM_KEY,
        "reversed": STREAM_KEY[::-1],
        "hex": STREAM_KEY.encode().hex(),
        "unknown shape": "ghp_" + "Z9" * 18,  # no variable holds it: found by its shape
    }[form]
    text = f"{before} {secret} {after}"
    stream = StreamRedactor(Redactor({"OPENAI_API_KEY": STREAM_KEY}))
    shown, start = [], 0
    for size in cuts * 20:
        if start >= len(text):
            break
        shown.append(stream.feed(text[start : start + size]))
        start += size
    shown.append(stream.feed(text[start:]))
    shown.append(stream.flush())
    joined = "".join(shown)
    assert secret not in joined and MASK in joined
    assert joined.replace(MASK, "").strip() == f"{before}  {after}".strip()


def test_a_stream_lets_ordinary_words_through_as_they_end() -> None:
    from journeyman.core.redact import StreamRedactor

    stream = StreamRedactor(Redactor({"OPENAI_API_KEY": STREAM_KEY}))
    assert [stream.feed(w) for w in ("I ", "will ", "wri", "te")] == ["I ", "will ", "", ""]
    assert stream.flush() == "write"


def test_forms_cut_by_line_breaks_or_spaces_are_masked() -> None:
    redact = Redactor({"MY_TOKEN": STREAM_KEY}, key_shapes=False)
    folded = "\n".join(STREAM_KEY[i : i + 7] for i in range(0, len(STREAM_KEY), 7))
    hexed = STREAM_KEY.encode().hex()
    dumped = " ".join(hexed[i : i + 4] for i in range(0, len(hexed), 4))
    for text in (folded, dumped, base64.encodebytes(STREAM_KEY.encode()).decode()):
        out = redact(f"before\n{text}\nafter")
        assert out.startswith("before\n") and out.endswith("\nafter") and MASK in out
        assert STREAM_KEY[:7] not in out
