"""`journeyman run --subagents` and `journeyman sessions show`'s tree, through the command line
against the fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path

from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm


def test_run_with_subagents_and_the_session_tree(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.py").write_text("def f():\n    return 1\n")
    fake_openai.enqueue(
        reply(tool_calls=[("spawn_agent", {"task": "Summarise a.py in one line."})]),
        # the child: one look, then its report
        reply(tool_calls=[("read_file", {"path": "a.py"})]),
        reply("a.py defines f, which returns 1."),
        reply("The file defines f."),
    )
    env = clean_env(OPENAI_API_KEY="sk-test-sub", OPENAI_BASE_URL=fake_openai.base_url)
    sessions = tmp_path / "sessions"
    common = ("--session-dir", str(sessions))
    done = jm(
        "run", "--yes", "--no-verify", "--subagents", "What is in a.py?",
        "--workspace", str(workspace), "--model", "gpt-4.1-mini",
        "--output-format", "json", "--max-budget-usd", "1", *common,
        env=env, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["final_text"] == "The file defines f."
    # the root's second request carries the child's report as the spawn call's result
    tool_messages = [m for m in fake_openai.requests[3].json["messages"] if m["role"] == "tool"]
    assert "a.py defines f, which returns 1." in tool_messages[0]["content"]
    # the child's first request offered reading tools only
    child_tools = {t["function"]["name"] for t in fake_openai.requests[1].json["tools"]}
    assert "read_file" in child_tools and "apply_patch" not in child_tools
    store = SessionStore(sessions)
    (child,) = [s for s in store.list_sessions() if s.record.parent_id == result["session_id"]]
    store.close()
    shown = jm("sessions", "show", result["session_id"], *common, env=env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "subagents (tree cost $" in shown.stdout
    assert f"└ {child.record.id}  answered" in shown.stdout
    assert "Summarise a.py in one line." in shown.stdout
    child_shown = jm("sessions", "show", child.record.id, *common, env=env, timeout=60)
    assert f"(subagent of {result['session_id']})" in " ".join(child_shown.stdout.split())
