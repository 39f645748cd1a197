"""--price-per-mtok: a USD limit on a model the price list does not know needs a price."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm


def run(server: FakeOpenAIServer, tmp_path: Path, *flags: str) -> tuple[int, str]:
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url)
    args = ["run", "--yes", "say hi", "-w", str(tmp_path), "--session-dir", str(tmp_path / "s")]
    args.append("--no-verify")  # a greeting: nothing to check
    done = jm(*args, "--model", "house-model-7b", *flags, env=env, timeout=90)
    return done.returncode, done.stderr


def test_a_usd_limit_without_a_known_price_is_refused(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    code, stderr = run(fake_openai, tmp_path, "--max-budget-usd", "1")
    assert code == 2 and "--price-per-mtok" in stderr
    assert fake_openai.requests == []


def test_a_given_price_lets_the_limited_run_go(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.enqueue(reply("hi"))
    code, stderr = run(fake_openai, tmp_path, "--max-budget-usd", "1", "--price-per-mtok", "3,15")
    assert code == 0, stderr


def test_a_malformed_price_exits_2(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    code, stderr = run(fake_openai, tmp_path, "--price-per-mtok", "cheap")
    assert code == 2 and "two numbers" in stderr
