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
