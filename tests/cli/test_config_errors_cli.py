"""Configuration errors as a user meets them on the command line: one that rules out the run
stores no session and is said once; a key the model server refuses ends with exit 2 and advice
that names the environment variable and `--base-url`, never a flag that does not exist."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import error, reply
from tests.support.cli import clean_env, journeyman

PRICE_REFUSED = "cannot be enforced"
KEY_REFUSED = "rejected the API key"


def run_args(server: FakeOpenAIServer, tmp_path: Path, *extra: str) -> list[str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return [
        "run", "fix it", "-w", str(workspace), "--session-dir", str(tmp_path / "sessions"),
        "--provider", "openai", "--model", "house-model", "--base-url", server.base_url,
        "--no-verify", *extra,
    ]  # fmt: skip


def stored_sessions(tmp_path: Path) -> list[str]:
    if not (tmp_path / "sessions").exists():
        return []
    store = SessionStore(tmp_path / "sessions")
    try:
        return [s.record.id for s in store.list_sessions()]
    finally:
        store.close()


def test_a_usd_limit_on_an_unpriced_model_stores_nothing_and_is_said_once(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.default = reply("never asked")
    done = journeyman(
        *run_args(fake_openai, tmp_path, "--max-budget-usd", "1"),
        env=clean_env(OPENAI_API_KEY="sk-test"),
    )
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert said.count(PRICE_REFUSED) == 1, said
    assert done.stderr.startswith("journeyman: ") and "--price-per-mtok" in done.stderr
    assert "session" not in done.stdout  # no header, no "resume this session" advice
    assert stored_sessions(tmp_path) == []
    assert fake_openai.requests == []


def test_a_refused_key_exits_2_with_advice_naming_real_settings(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.default = error(401, "Incorrect API key provided", code="invalid_api_key")
    done = journeyman(*run_args(fake_openai, tmp_path), env=clean_env(OPENAI_API_KEY="sk-wrong"))
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("journeyman: configuration_error: ")
    assert KEY_REFUSED in last and "OPENAI_API_KEY" in last and "--base-url" in last
    assert "api_key" not in last.replace("OPENAI_API_KEY", "").replace("invalid_api_key", "")
    assert "sk-wrong" not in done.stdout + done.stderr
    assert len(fake_openai.requests) == 1  # not retried: no retry fixes a refused key
    # nothing to resume: no session is kept, and the summary says so instead of `resume`
    assert stored_sessions(tmp_path) == []
    assert "no session kept" in done.stdout and "journeyman resume" not in done.stdout


def test_the_openai_service_refusing_the_key_names_the_variable_only() -> None:
    from journeyman.providers.http_errors import provider_error_from_status

    refused = provider_error_from_status(
        "openai",
        401,
        "bad key",
        {},
        env_var="OPENAI_API_KEY",
        base_url="https://api.openai.com/v1",
        base_url_env="OPENAI_BASE_URL",
    )
    assert "set OPENAI_API_KEY to a valid key" in refused.message
    assert "--base-url" not in refused.message and "api_key" not in refused.message.lower().replace(
        "openai_api_key", ""
    )


def on_one_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on one pseudo-terminal; its exit code and screen."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "journeyman", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the process exited and closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    code = process.wait(timeout=30)
    os.close(master)
    return code, screen.decode("utf-8", errors="replace")


def test_a_refused_key_is_said_once_on_a_terminal(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.default = error(401, "Incorrect API key provided")
    env = clean_env(OPENAI_API_KEY="sk-wrong", TERM="xterm-256color", COLUMNS="400")
    code, screen = on_one_terminal(run_args(fake_openai, tmp_path, "--no-stream"), env)
    assert code == 2, screen
    assert screen.count(KEY_REFUSED) == 1, screen
    assert "configuration_error: the reason is shown above" in screen
