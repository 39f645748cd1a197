"""`eval --fail-under` as a CI gate uses it, and eval.json's figures as written: through the CLI
against the fake OpenAI server."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from journeyman.batch.suites.micro import micro_root
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, reply
from tests.support.cli import clean_env, journeyman


def finishing(request: RecordedRequest) -> ScriptItem:
    """A model that fixes nothing."""
    return reply(tool_calls=[("finish", {"summary": "done"})], output_tokens=7)


def run_eval(
    tmp_path: Path, server: FakeOpenAIServer, *args: str
) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "suite"
    if not suite.exists():
        for task in ("url-join", "inventory-reorder"):
            shutil.copytree(micro_root() / task, suite / task)
    env = clean_env(OPENAI_API_KEY="sk-test-eval", OPENAI_BASE_URL=server.base_url)
    return journeyman(
        *("eval", str(suite), "--out", str(tmp_path / "out")),
        *("--session-dir", str(tmp_path / "sessions"), "--model", "gpt-4.1-mini"),
        *("--price-per-mtok", "0,1000", "--no-verify", "--max-parallel", "2"),
        *("--sandbox", "local", "--allow-unsandboxed"),
        *args,
        env=env,
    )


def floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for item in value.values() for f in floats(item)]
    if isinstance(value, list):
        return [f for item in value for f in floats(item)]
    return []


def test_fail_under_exits_1_below_the_rate_and_eval_json_holds_no_float_noise(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = finishing
    below = run_eval(tmp_path, fake_openai, "--fail-under", "50%")
    assert below.returncode == 1, below.stderr
    assert "eval: resolved rate 0/2 (0.0 %" in below.stderr
    assert "is below --fail-under 50 %" in below.stderr
    report = json.loads((tmp_path / "out" / "eval.json").read_text())
    assert report["summary"]["low"] == 0.0  # the Wilson bound at 0 successes, no 2.78e-17
    for figure in floats(report):
        assert figure == round(figure, 6), figure
    # the same run, gated at what it reached: every task ran, so the gate passes
    at_rate = run_eval(tmp_path, fake_openai, "--fail-under", "0")
    assert at_rate.returncode == 0, at_rate.stderr
    assert "fail-under" not in at_rate.stderr


@pytest.mark.parametrize("value", ["abc", "1.5", "150%", "-0.1", "nan", "80"])
def test_a_bad_fail_under_is_refused_before_anything_runs(
    tmp_path: Path, fake_openai: FakeOpenAIServer, value: str
) -> None:
    done = run_eval(tmp_path, fake_openai, "--fail-under", value)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "--fail-under" in done.stderr and "80%" in done.stderr
    assert not fake_openai.requests and not (tmp_path / "out").exists()
