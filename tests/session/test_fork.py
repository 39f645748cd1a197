"""Forking a session at step K: a new session with the first K steps of history and the files
as they were at step K, which then carries on (the Python API, and `journeyman fork`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.cli.app import app
from journeyman.cli.run_cmd import CONTINUE_FORK
from journeyman.core.errors import ConfigurationError
from journeyman.core.messages import Message, Role, ToolCall
from journeyman.providers.base import ModelRequest, ModelResponse
from journeyman.providers.scripted import ScriptedProvider, ScriptStep
from journeyman.session.fork import prepare_fork
from journeyman.session.store import SessionStore, short_id
from tests.fakes.agents import finish
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply

APP = "def total(xs):\n    return 0\n"

# step k of the parent (k = 1..5), each changing the workspace
PARENT_CALLS = [
    ToolCall("c1", "write_file", {"path": "a.txt", "content": "a1\n"}),
    ToolCall("c2", "edit_file", {"path": "app.py", "old_string": "0", "new_string": "sum(xs)"}),
    ToolCall("c3", "write_file", {"path": "a.txt", "content": "a3\n"}),
    ToolCall("c4", "write_file", {"path": "b/c.txt", "content": "c4\n"}),
    ToolCall("c5", "edit_file", {"path": "app.py", "old_string": "sum(xs)", "new_string": "9"}),
]


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}


class Parent:
    """A finished five-step session; `states[k]` is the workspace after step k."""

    def __init__(self, tmp_path: Path) -> None:
        self.ws = tmp_path / "ws"
        self.ws.mkdir()
        (self.ws / "app.py").write_text(APP)
        self.sessions = tmp_path / "sessions"
        self.states: list[dict[str, str]] = []

        def seeing(response: ModelResponse) -> ScriptStep:
            def answer(_request: ModelRequest) -> ModelResponse:
                self.states.append(snapshot(self.ws))
                return response

            return answer

        script: list[ScriptStep] = [
            seeing(ModelResponse(text=f"step {i + 1}", tool_calls=(call,)))
            for i, call in enumerate(PARENT_CALLS)
        ]
        script.append(seeing(finish()))
        self.provider = ScriptedProvider(script)
        result = asyncio.run(self.agent(self.provider, self.ws).run("improve app.py"))
        assert result.finish_reason is FinishReason.COMPLETED
        self.id = result.session_id
        self.final = snapshot(self.ws)

    def agent(self, provider: ScriptedProvider, ws: Path) -> Agent:
        return Agent(
            provider, workspace=ws, config=AgentConfig(session_dir=self.sessions, verify=False)
        )


@pytest.fixture
def parent(tmp_path: Path) -> Parent:
    return Parent(tmp_path)


@pytest.mark.parametrize("k", [0, 2, 4])
def test_fork_keeps_the_first_k_steps_and_their_files(
    parent: Parent, tmp_path: Path, k: int
) -> None:
    store = SessionStore(parent.sessions)
    try:
        plan = prepare_fork(store, parent.id, k, into=tmp_path / "fork")
        # the history is what the model saw before step k + 1
        assert plan.history == list(parent.provider.requests[k].messages)
        assert plan.history[0] == Message.user("improve app.py")
        assert sum(m.role is Role.ASSISTANT for m in plan.history) == k
    finally:
        store.close()
    assert plan.workspace == tmp_path / "fork"
    assert snapshot(plan.workspace) == parent.states[k]
    assert snapshot(parent.ws) == parent.final  # the parent's workspace is not touched


def test_a_fork_is_a_new_session_that_records_its_parent_and_continues(
    parent: Parent, tmp_path: Path
) -> None:
    store = SessionStore(parent.sessions)
    plan = prepare_fork(store, parent.id, 2, into=tmp_path / "fork")
    store.close()

    child_provider = ScriptedProvider(
        [
            ModelResponse(
                text="another way",
                tool_calls=(ToolCall("n1", "write_file", {"path": "d.txt", "content": "d\n"}),),
            ),
            finish("forked"),
        ]
    )
    result = asyncio.run(
        parent.agent(child_provider, plan.workspace).run(
            "use a loop instead",
            history=plan.history,
            parent_session_id=parent.id,
            forked_at_step=2,
        )
    )
    assert result.finish_reason is FinishReason.COMPLETED
    assert result.session_id != parent.id
    assert list(child_provider.requests[0].messages) == [
        *plan.history,
        Message.user("use a loop instead"),
    ]
    assert snapshot(plan.workspace) == {**parent.states[2], "d.txt": "d\n"}
    assert not (parent.ws / "d.txt").exists()

    store = SessionStore(parent.sessions)
    try:
        child = store.load_session(result.session_id)
        assert (child.parent_id, child.forked_at_step) == (parent.id, 2)
        assert child.task == "use a loop instead"
        stored = store.messages(result.session_id)
        assert stored[: len(plan.history) + 1] == list(child_provider.requests[0].messages)
        assert store.summary(parent.id).steps == 6  # the parent is unchanged
        assert [c.path for c in store.file_changes(result.session_id)] == ["d.txt"]
    finally:
        store.close()


def test_fork_in_place_rolls_the_workspace_back(parent: Parent) -> None:
    store = SessionStore(parent.sessions)
    try:
        plan = prepare_fork(store, parent.id, 3, in_place=True)
    finally:
        store.close()
    assert plan.workspace == parent.ws and plan.reverted_files == 2
    assert snapshot(parent.ws) == parent.states[3]


def test_fork_ignores_changes_that_were_already_undone(parent: Parent, tmp_path: Path) -> None:
    from journeyman.session.undo import FileChangeTracker

    store = SessionStore(parent.sessions)
    try:
        FileChangeTracker(store, parent.id, parent.ws).undo_last()  # step 5's edit
        plan = prepare_fork(store, parent.id, 3, into=tmp_path / "fork")
    finally:
        store.close()
    assert snapshot(plan.workspace) == parent.states[3]


def test_fork_refuses_a_step_out_of_range_or_a_used_folder(parent: Parent, tmp_path: Path) -> None:
    store = SessionStore(parent.sessions)
    try:
        with pytest.raises(ConfigurationError, match="between 0 and 6"):
            prepare_fork(store, parent.id, 7, into=tmp_path / "f")
        used = tmp_path / "used"
        used.mkdir()
        (used / "x").write_text("mine")
        with pytest.raises(ConfigurationError, match="not empty"):
            prepare_fork(store, parent.id, 1, into=used)
        assert (used / "x").read_text() == "mine"
    finally:
        store.close()


def test_fork_in_place_refuses_to_overwrite_later_edits(parent: Parent) -> None:
    """Undo's conflict check: app.py was edited by hand after the agent's last change to it."""
    (parent.ws / "app.py").write_text("def total(xs):\n    return len(xs)  # mine\n")
    before = snapshot(parent.ws)
    store = SessionStore(parent.sessions)
    try:
        with pytest.raises(ConfigurationError, match=r"overwrite changes .*: app\.py;") as caught:
            prepare_fork(store, parent.id, 1, in_place=True)
        assert "--force" in caught.value.message and "# mine" in caught.value.message
        assert snapshot(parent.ws) == before  # nothing rolled back, not even a.txt
        plan = prepare_fork(store, parent.id, 1, in_place=True, force=True)
    finally:
        store.close()
    assert snapshot(plan.workspace) == parent.states[1]


def test_fork_refuses_a_folder_inside_the_workspace(parent: Parent) -> None:
    store = SessionStore(parent.sessions)
    try:
        for inside in (parent.ws / "copy", parent.ws, parent.ws / "b" / "deeper"):
            with pytest.raises(ConfigurationError, match="inside the workspace"):
                prepare_fork(store, parent.id, 1, into=inside)
    finally:
        store.close()
    assert snapshot(parent.ws) == parent.final


# --- the command line, against the fake OpenAI server ---------------------------------------


def jm(*args: str, env: dict[str, str]) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


@pytest.fixture
def env(fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    # the scripted runs write files in a folder without tests: no check to hold them to
    return {
        "OPENAI_API_KEY": "sk-test-fork",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "JOURNEYMAN_VERIFY": "false",
    }


def cli_parent(
    fake_openai: FakeOpenAIServer, env: dict[str, str], tmp_path: Path
) -> tuple[str, Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text(APP)
    sessions = tmp_path / "sessions"
    fake_openai.enqueue(
        reply("one", tool_calls=[("write_file", {"path": "a.txt", "content": "a1\n"})]),
        reply("two", tool_calls=[("write_file", {"path": "a.txt", "content": "a2\n"})]),
        reply("three", tool_calls=[("write_file", {"path": "b.txt", "content": "b3\n"})]),
        reply(tool_calls=[("finish", {"summary": "parent done"})]),
    )
    done = jm(
        "run",
        "--yes",
        "write the files",
        "-w",
        str(ws),
        "--model",
        "gpt-4.1-mini",
        "--session-dir",
        str(sessions),
        env=env,
    )
    assert done.exit_code == 0, done.output
    store = SessionStore(sessions)
    [summary] = store.list_sessions()
    store.close()
    return summary.record.id, ws, sessions


def conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of a request without the system prompt (which names the workspace)."""
    return [m for m in body["messages"] if m["role"] != "system"]


def user_texts(body: dict[str, Any]) -> list[str]:
    """What the user said, without the harness's own notes to the model."""
    return [
        m["content"]
        for m in body["messages"]
        if m["role"] == "user" and not m["content"].startswith("[journeyman]")
    ]


def test_cli_fork_with_a_new_task(
    fake_openai: FakeOpenAIServer, env: dict[str, str], tmp_path: Path
) -> None:
    parent_id, ws, sessions = cli_parent(fake_openai, env, tmp_path)
    parent_requests = [r.json for r in fake_openai.requests]
    fake_openai.enqueue(
        reply("forked", tool_calls=[("write_file", {"path": "z.txt", "content": "z\n"})]),
        reply(tool_calls=[("finish", {"summary": "fork done"})]),
    )
    into = tmp_path / "forked"
    done = jm(
        "fork",
        parent_id[:12],
        "--at-step",
        "1",
        "--task",
        "now write z.txt",
        "--into",
        str(into),
        "--session-dir",
        str(sessions),
        env=env,
    )
    assert done.exit_code == 0, done.output
    assert f"forking {parent_id} at step 1 into {into}" in done.stdout
    assert "(2 later file change(s) rolled back)" in done.stdout

    first = fake_openai.requests[len(parent_requests)].json
    # the parent's task and step 1 (its call and result) as the parent's second request sent
    # them, without the note the harness added before step 2, then the new task
    seen = conversation(parent_requests[1])
    kept = seen[: max(i for i, m in enumerate(seen) if m["role"] == "tool") + 1]
    assert [m["role"] for m in kept] == ["user", "assistant", "tool"]
    assert conversation(first)[: len(kept)] == kept
    assert conversation(first)[len(kept)] == {"role": "user", "content": "now write z.txt"}
    assert user_texts(first) == ["write the files", "now write z.txt"]
    assert first["model"] == "gpt-4.1-mini"
    assert snapshot(into) == {"app.py": APP, "a.txt": "a1\n", "z.txt": "z\n"}
    assert snapshot(ws) == {"app.py": APP, "a.txt": "a2\n", "b.txt": "b3\n"}

    store = SessionStore(sessions)
    try:
        child = next(s.record for s in store.list_sessions() if s.record.id != parent_id)
        assert (child.parent_id, child.forked_at_step) == (parent_id, 1)
        assert child.workspace == str(into.resolve())
    finally:
        store.close()
    shown = jm(
        "sessions", "show", child.id, "--session-dir", str(sessions), env={**env, "COLUMNS": "300"}
    )
    assert f"forked from {parent_id} at step 1" in shown.stdout


def test_cli_fork_without_a_task_goes_on_in_a_sibling_folder(
    fake_openai: FakeOpenAIServer, env: dict[str, str], tmp_path: Path
) -> None:
    parent_id, ws, sessions = cli_parent(fake_openai, env, tmp_path)
    fake_openai.enqueue(reply(tool_calls=[("finish", {"summary": "nothing left"})]))
    done = jm("fork", parent_id, "--at-step", "2", "--session-dir", str(sessions), env=env)
    assert done.exit_code == 0, done.output
    assert user_texts(fake_openai.requests[-1].json) == ["write the files", CONTINUE_FORK]
    sibling = ws.with_name(f"ws-fork-{short_id(parent_id)}-2")
    assert snapshot(sibling) == {"app.py": APP, "a.txt": "a2\n"}


def test_cli_fork_of_an_unknown_session_or_step_fails_cleanly(
    fake_openai: FakeOpenAIServer, env: dict[str, str], tmp_path: Path
) -> None:
    parent_id, _, sessions = cli_parent(fake_openai, env, tmp_path)
    sent = len(fake_openai.requests)
    unknown = jm("fork", "nosuch", "--at-step", "1", "--session-dir", str(sessions), env=env)
    assert unknown.exit_code == 2 and "no session 'nosuch'" in unknown.stderr
    too_far = jm("fork", parent_id, "--at-step", "99", "--session-dir", str(sessions), env=env)
    assert too_far.exit_code == 2 and "--at-step must be between 0 and 4" in too_far.stderr
    assert len(fake_openai.requests) == sent


def test_cli_fork_in_place_names_the_edited_files_and_exits_2(
    fake_openai: FakeOpenAIServer, env: dict[str, str], tmp_path: Path
) -> None:
    parent_id, ws, sessions = cli_parent(fake_openai, env, tmp_path)
    (ws / "b.txt").write_text("edited by me\n")
    sent = len(fake_openai.requests)
    args = ("fork", parent_id, "--at-step", "1", "--in-place", "--session-dir", str(sessions))
    refused = jm(*args, env=env)
    assert refused.exit_code == 2, refused.output
    assert "b.txt" in refused.stderr and "--force" in refused.stderr
    assert (ws / "b.txt").read_text() == "edited by me\n" and len(fake_openai.requests) == sent
    fake_openai.enqueue(reply(tool_calls=[("finish", {"summary": "ok"})]))
    forced = jm(*args, "--force", env=env)
    assert forced.exit_code == 0, forced.output
    assert snapshot(ws) == {"app.py": APP, "a.txt": "a1\n"}


def test_cli_fork_into_the_workspace_is_refused(
    fake_openai: FakeOpenAIServer, env: dict[str, str], tmp_path: Path
) -> None:
    parent_id, ws, sessions = cli_parent(fake_openai, env, tmp_path)
    done = jm(
        "fork",
        parent_id,
        "--at-step",
        "1",
        "--into",
        str(ws / "sub"),
        "--session-dir",
        str(sessions),
        env=env,
    )
    assert done.exit_code == 2 and "inside the workspace" in done.stderr
    assert not (ws / "sub").exists()
