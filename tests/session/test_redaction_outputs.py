"""No secret reaches the session store, an export, or the json and stream-json outputs, in any
of the forms it takes inside JSON text (a key holding `"`, `\\` and `é` is written differently
once escaped); stored settings keep no URL credentials or secrets in hook commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from journeyman.session.redact import MASK, Redactor
from journeyman.session.store import SessionRecord, SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env

SECRET = 'q"uo\\te-é-' + "x7" * 8
"""The value of a secret environment variable, with the characters JSON escapes."""

REPO = Path(__file__).resolve().parents[2]


def leaked_forms(text: str) -> list[str]:
    """The forms of SECRET found in `text`: raw, JSON-escaped once or twice, ASCII or not."""
    forms = {SECRET}
    for _ in range(2):
        forms |= {json.dumps(f, ensure_ascii=a)[1:-1] for f in set(forms) for a in (True, False)}
    return sorted(form for form in forms if form in text)


def test_the_redactor_catches_every_json_form_of_a_secret() -> None:
    redact = Redactor({"MY_SERVICE_TOKEN": SECRET})
    document = json.dumps({"text": f"key {SECRET}", "inner": json.dumps({"k": SECRET})})
    for text in (document, json.dumps(document), json.dumps(document, ensure_ascii=False)):
        assert leaked_forms(text)  # the secret is there, escaped
        assert leaked_forms(redact(text)) == []
        json.loads(redact(text))  # and the JSON is still valid


def test_url_credentials_and_secret_keys_are_masked_in_stored_settings(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, redactor=Redactor({"MY_SERVICE_TOKEN": SECRET}))
    try:
        store.create_session(
            SessionRecord(
                id="s",
                task="t",
                workspace="/w",
                settings={
                    "base_url": "https://bob:hunter2-pass@llm.example/v1?key=abc123&model=m",
                    "config": {
                        "hooks": [{"command": f"curl -H 'X-Token: {SECRET}' https://h"}],
                        "api_key": "plain-value-1",
                        "max_total_tokens": 1000,
                    },
                },
                system_prompt="s",
            )
        )
        settings = store.load_session("s").settings
    finally:
        store.close()
    assert settings["base_url"] == f"https://bob:{MASK}@llm.example/v1?key={MASK}&model=m"
    assert settings["config"]["hooks"][0]["command"] == f"curl -H 'X-Token: {MASK}' https://h"
    assert settings["config"]["api_key"] == MASK
    assert settings["config"]["max_total_tokens"] == 1000
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("journeyman.db*"))
    assert b"hunter2-pass" not in raw and b"abc123" not in raw and b"plain-value-1" not in raw


def script(server: FakeOpenAIServer) -> None:
    server.enqueue(
        reply(
            f"The service key is {SECRET}.",
            tool_calls=[
                ("write_file", {"path": "conf.json", "content": json.dumps({"k": SECRET})})
            ],
        ),
        reply(f"Done; wrote {SECRET} into conf.json."),
    )


@pytest.mark.parametrize("output", ["json", "stream-json"])
def test_no_output_format_and_no_stored_byte_holds_the_secret(
    fake_openai: FakeOpenAIServer, tmp_path: Path, output: str
) -> None:
    script(fake_openai)
    workspace, sessions = tmp_path / "ws", tmp_path / "sessions"
    workspace.mkdir()
    env = clean_env(
        OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url, MY_SERVICE_TOKEN=SECRET
    )
    run = subprocess.run(
        [sys.executable, "-m", "journeyman", "run", "--yes", "store the key", "-o", output,
         "-w", str(workspace), "--session-dir", str(sessions), "--sandbox", "local"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert SECRET in (workspace / "conf.json").read_text(encoding="utf-8") or json.dumps(SECRET)[
        1:-1
    ] in (workspace / "conf.json").read_text(encoding="utf-8")
    assert "Done; wrote" in run.stdout, run.stderr
    assert leaked_forms(run.stdout) == [] and leaked_forms(run.stderr) == []

    export = subprocess.run(
        [sys.executable, "-m", "journeyman", "sessions", "export", "--session-dir", str(sessions),
         _only_session(sessions)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert export.returncode == 0, export.stderr
    assert MASK in export.stdout and leaked_forms(export.stdout) == []

    stored = b"".join(p.read_bytes() for p in sessions.glob("journeyman.db*"))
    assert leaked_forms(stored.decode("utf-8", "replace")) == []


def _only_session(root: Path) -> str:
    store = SessionStore(root)
    try:
        [summary] = store.list_sessions()
    finally:
        store.close()
    return summary.record.id


def test_resume_asks_again_for_a_base_url_whose_credentials_were_not_stored(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    try:
        store.create_session(
            SessionRecord(
                id="s1",
                task="t",
                workspace=str(tmp_path),
                settings={"provider": "openai", "base_url": "http://u:pw-123456@h/v1"},
                system_prompt="s",
            )
        )
    finally:
        store.close()
    done = subprocess.run(
        [sys.executable, "-m", "journeyman", "resume", "s1", "--session-dir", str(tmp_path)],
        env=clean_env(OPENAI_API_KEY="sk-test"), cwd=REPO, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "held credentials" in done.stderr and "--base-url" in done.stderr
