from __future__ import annotations

from journeyman.session.redact import MASK, Redactor


def test_redactor_masks_env_secrets_and_known_key_shapes() -> None:
    redact = Redactor({"MY_SERVICE_TOKEN": "tok-1234567890", "HOME": "/root"})
    text = "token tok-1234567890 home /root key sk-ant-api03-abcdefghijklmnopqrstuv"
    cleaned = redact(text)
    assert "tok-1234567890" not in cleaned and "sk-ant-api03" not in cleaned
    assert "/root" in cleaned and cleaned.count(MASK) == 2
