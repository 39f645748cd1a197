"""A provider that reports no usage: each reply is charged the worst case the call was fitted
to (its prompt's bound and its longest reply), the user is told once, and the USD cap holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm

CAP = 0.05
PRICE = "0.15,0.6"  # US dollars a million input, output tokens: a cheap model
WARNING = "reported no usage; charging the worst case"


def replies_without_usage(count: int) -> list[object]:
    """A model that keeps reading another file and never reports what it used."""
    return [
        reply(tool_calls=[("read_file", {"path": f"notes{i}.txt"})], omit_usage=True)
        for i in range(count)
    ]


def run_capped(provider: str, base_url: str, tmp_path: Path) -> tuple[dict[str, object], str]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for i in range(40):
        (workspace / f"notes{i}.txt").write_text(f"note {i}\n")
    env = clean_env(OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test")
    done = jm(
        "run", "--yes", "look around, forever", "-w", str(workspace),
        "--session-dir", str(tmp_path / "s"), "--provider", provider, "--model", "house-model",
        "--base-url", base_url, "--max-budget-usd", str(CAP), "--price-per-mtok", PRICE,
        "--max-iterations", "40", "--no-verify", "-o", "json",
        env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout), done.stderr


def check_capped(result: dict[str, object], stderr: str, requests: int) -> None:
    assert result["finish_reason"] == "max_budget_usd", result
    cost = result["cost_usd"]
    assert isinstance(cost, float) and 0 < cost <= CAP  # charged, and never past the cap
    assert stderr.count(WARNING) == 1, stderr  # said once, not once a call
    # each call was charged at least what it could have cost: the calls made fit the cap
    assert 1 <= requests < 40


def test_an_openai_server_without_usage_is_charged_the_worst_case(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(*replies_without_usage(40))
    result, stderr = run_capped("openai", fake_openai.base_url, tmp_path)
    check_capped(result, stderr, len(fake_openai.requests))


def test_an_anthropic_server_without_usage_is_charged_the_worst_case(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_anthropic.enqueue(*replies_without_usage(40))
    result, stderr = run_capped("anthropic", fake_anthropic.base_url, tmp_path)
    check_capped(result, stderr, len(fake_anthropic.requests))


@pytest.mark.parametrize("omit", [False, True])
def test_the_warning_is_only_for_replies_without_usage(
    fake_openai: FakeOpenAIServer, tmp_path: Path, omit: bool
) -> None:
    fake_openai.enqueue(reply(tool_calls=[("finish", {"summary": "done"})], omit_usage=omit))
    env = clean_env(OPENAI_API_KEY="sk-test")
    done = jm(
        "run", "--yes", "finish", "-w", str(tmp_path), "--session-dir", str(tmp_path / "s"),
        "--provider", "openai", "--model", "house-model", "--base-url", fake_openai.base_url,
        "--price-per-mtok", PRICE, "--no-verify", "-o", "json",
        env=env, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (WARNING in done.stderr) is omit
    cost = json.loads(done.stdout)["cost_usd"]
    if omit:  # the worst case: far more than the 12 + 7 tokens a reply reports by default
        assert cost > (12 * 0.15 + 7 * 0.6) / 1e6
