"""`journeyman acp` whatever its stdin and stdout are: regular files and /dev/null work like
pipes (the end of the input ends the agent), a line that is not JSON gets the JSON-RPC parse
error, and a bad flag stops it at start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

pytest.importorskip("acp", reason="the agent-client-protocol package is not installed")

from tests.support.cli import clean_env


def acp_with(
    tmp_path: Path, stdin: IO[bytes] | int, stdout: IO[bytes] | int, *flags: str
) -> subprocess.CompletedProcess[bytes]:
    env = clean_env(
        OPENAI_API_KEY="sk-test",
        JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"),
        JOURNEYMAN_CONFIG_DIR=str(tmp_path / "user-config"),
    )
    return subprocess.run(
        [sys.executable, "-m", "journeyman", "acp", "--no-lsp", *flags],
        env=env,
        cwd=tmp_path,
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=60,
    )


def test_requests_from_a_file_with_the_answers_to_dev_null(tmp_path: Path) -> None:
    requests = tmp_path / "init.json"
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    requests.write_text(json.dumps({**initialize, "params": {"protocolVersion": 1}}) + "\n")
    with requests.open("rb") as stdin, open(os.devnull, "wb") as stdout:
        done = acp_with(tmp_path, stdin, stdout)
    assert done.returncode == 0
    assert b"Traceback" not in done.stderr


def test_an_empty_input_ends_the_agent_at_once(tmp_path: Path) -> None:
    with open(os.devnull, "rb") as stdin:
        done = acp_with(tmp_path, stdin, subprocess.PIPE)
    assert done.returncode == 0
    assert done.stdout == b""
    assert b"Traceback" not in done.stderr


def test_a_line_that_is_not_json_gets_the_parse_error(tmp_path: Path) -> None:
    """And the requests of a file are answered before the end of the file ends the agent."""
    requests = tmp_path / "garbage.txt"
    initialize = {"jsonrpc": "2.0", "id": 7, "method": "initialize"}
    initialize["params"] = {"protocolVersion": 1}
    requests.write_text("this is not json\n[1, 2]\n" + json.dumps(initialize) + "\n")
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = acp_with(tmp_path, stdin, stdout)
    assert done.returncode == 0
    assert b"Traceback" not in done.stderr
    replies = [json.loads(line) for line in answers.read_text().splitlines()]
    assert [(r["id"], r.get("error", {}).get("code")) for r in replies] == [
        (None, -32700),
        (None, -32600),
        (7, None),
    ]
    assert replies[2]["result"]["agentCapabilities"]["loadSession"] is True
    assert b"not JSON" in done.stderr


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--provider", "bogus"), "--provider 'bogus' is not a provider"),
        (("--provider", "openai:a", "--model", "b"), "the model is given twice"),
        (("--tool-format", "smoke"), "--tool-format"),
    ],
)
def test_a_bad_flag_stops_it_at_start_up(tmp_path: Path, flags: tuple[str, ...], said: str) -> None:
    with open(os.devnull, "rb") as stdin:
        done = acp_with(tmp_path, stdin, subprocess.PIPE, *flags)
    assert done.returncode == 2
    assert done.stdout == b""
    stderr = done.stderr.decode()
    assert said in stderr and stderr.count("\n") == 1
