"""The overview's run count and cost as a user meets them: a run killed and resumed through the
CLI counts two runs, and the embedded model's calls cost "$0 (local)", not "unknown"."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from journeyman.core.events import Event
from journeyman.core.result import FinishReason
from journeyman.inspector import load_report, render_html
from journeyman.session.store import SessionStore
from tests.fakes.agents import call, finish, make_agent, turn
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.projects import calc_package
from tests.fakes.script import hang, reply
from tests.support.cli import clean_env, jm

READ = ("read_file", {"path": "calc/__init__.py"})


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow  # three journeyman processes
def test_a_run_killed_then_resumed_counts_as_two_runs(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = calc_package(tmp_path)
    env = clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=fake_openai.base_url,
        JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"),
    )
    fake_openai.enqueue(reply("Reading it.", tool_calls=[READ]), hang(120))
    first = subprocess.Popen(
        [sys.executable, "-m", "journeyman", "run", "fix add", "--no-verify", "--yes"],
        cwd=workspace,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: len(fake_openai.requests) >= 2, "the second model call")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)

    fake_openai.enqueue(reply(tool_calls=[("finish", {"summary": "nothing to fix"})]))
    resumed = jm("resume", "--last", "--yes", env=env, cwd=workspace)
    assert resumed.returncode in (0, 1), resumed.stderr
    page = tmp_path / "page.html"
    done = jm("inspect", "--last", "-o", str(page), env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr

    html = page.read_text(encoding="utf-8")
    assert '<div class="s">2 runs</div>' in html
    assert "the run before did not finish (its process stopped)" in html
    assert "run resumed after step 1" in html


async def _local_session(tmp_path: Path, model: str = "smollm2-135m") -> tuple[Path, str]:
    script = [turn(call("list_files", "l1", path=".")), finish("looked")]
    agent, _ = make_agent(tmp_path, script, provider_options={"name": "local", "model": model})
    result = await agent.run("look around")
    return tmp_path / "sessions", result.session_id


def _page(sessions: Path, session_id: str) -> str:
    store = SessionStore(sessions)
    try:
        return render_html(load_report(store, session_id))
    finally:
        store.close()


def test_the_embedded_models_calls_cost_zero_local(tmp_path: Path) -> None:
    sessions, session_id = asyncio.run(_local_session(tmp_path))
    html = _page(sessions, session_id)
    assert '<div class="v">$0 (local)</div>' in html
    assert "$0 (local): every model call ran on this machine" in html
    assert ">unknown<" not in html and "Unknown: at least one" not in html


def test_a_session_stored_before_local_calls_were_priced_is_zero_local_too(
    tmp_path: Path,
) -> None:
    sessions, session_id = asyncio.run(_local_session(tmp_path))
    with sqlite3.connect(sessions / "journeyman.db") as db:  # as an older version stored it
        db.execute("UPDATE usage_logs SET cost_usd = NULL")
    assert '<div class="v">$0 (local)</div>' in _page(sessions, session_id)


def test_an_unpriced_remote_model_stays_unknown(tmp_path: Path) -> None:
    script = [turn(call("list_files", "l1", path=".")), finish("looked")]
    options = {"name": "openai", "model": "no-such-model-xyz"}
    agent, _ = make_agent(tmp_path, script, provider_options=options)
    result = asyncio.run(agent.run("look around"))
    html = _page(tmp_path / "sessions", result.session_id)
    assert '<div class="v">unknown</div>' in html and "(local)" not in html
    assert "Unknown: at least one model call had no price" in html


def test_a_cancelled_turn_then_a_follow_up_are_two_runs_and_no_error(tmp_path: Path) -> None:
    script = [turn(call("list_files", "l1", path=".")), finish("looked"), finish("again")]
    agent, _ = make_agent(tmp_path, script)

    def cancel_after_the_call(event: Event) -> None:
        if event.type == "tool_result":
            agent.cancel()

    async def session() -> str:
        agent.on_event = cancel_after_the_call
        first = await agent.run("look around")
        assert first.finish_reason is FinishReason.CANCELLED
        agent.on_event = None
        await agent.send(first.session_id, "go on")
        return first.session_id

    session_id = asyncio.run(session())
    store = SessionStore(tmp_path / "sessions")
    try:
        report = load_report(store, session_id)
    finally:
        store.close()
    notes = [n.title for s in report.steps for n in s.notes]
    assert report.totals.runs == 2
    assert "run finished: cancelled" in notes and "run finished: completed" in notes
    assert not any("error" in title for title in notes), notes  # a cancel is not an error
