"""Every command finds the sessions `run` stored in the folder the user config names (and only
the user: a repository's config cannot move the store)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from journeyman.session.store import SessionStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman

WRITE_A = reply(tool_calls=[("write_file", {"path": "a.txt", "content": "one\n"})])
FINISH = reply(tool_calls=[("finish", {"summary": "done"})])


@dataclass
class Setup:
    """A user config whose `session_dir` is `chosen`, and the environment that uses it."""

    env: dict[str, str]
    chosen: Path
    default: Path
    """Where sessions would go if the user config were not read."""
    server: FakeOpenAIServer
    root: Path

    def workspace(self, name: str) -> Path:
        folder = self.root / name
        folder.mkdir()
        return folder

    def run(self, workspace: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
        done = journeyman(
            "run", "--yes", "write a.txt", "-w", str(workspace), "--provider", "openai",
            "--model", "m", "--base-url", self.server.base_url, "--no-verify", "-o", "json",
            *extra, env=self.env,
        )  # fmt: skip
        return done.returncode, json.loads(done.stdout), done.stderr

    def finished_run(self, workspace: Path) -> str:
        self.server.enqueue(WRITE_A, FINISH)
        code, result, stderr = self.run(workspace)
        assert code == 0, stderr
        return str(result["session_id"])

    def stored_ids(self) -> list[str]:
        store = SessionStore(self.chosen)
        try:
            return [row.record.id for row in store.list_sessions()]
        finally:
            store.close()


def make_setup(root: Path, server: FakeOpenAIServer) -> Setup:
    config = root / "user-config"
    config.mkdir()
    chosen = root / "chosen-sessions"
    (config / "config.toml").write_text(f"session_dir = {str(chosen)!r}\n")
    env = clean_env(
        OPENAI_API_KEY="sk-test",
        JOURNEYMAN_CONFIG_DIR=str(config),
        XDG_DATA_HOME=str(root / "data"),
        COLUMNS="250",  # session ids stay whole in tables
    )
    return Setup(env, chosen, root / "data" / "journeyman" / "sessions", server, root)


@pytest.fixture
def setup(fake_openai: FakeOpenAIServer, tmp_path: Path) -> Setup:
    return make_setup(tmp_path, fake_openai)


@dataclass
class Stored:
    setup: Setup
    workspace: Path
    session: str


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stored]:
    """One finished run, for the commands that only read."""
    with FakeOpenAIServer() as server:
        made = make_setup(tmp_path_factory.mktemp("folder"), server)
        workspace = made.workspace("ws")
        yield Stored(made, workspace, made.finished_run(workspace))


def test_run_stores_the_session_in_the_user_configs_folder(stored: Stored) -> None:
    assert stored.setup.stored_ids() == [stored.session]
    assert not stored.setup.default.exists()


READERS: dict[str, tuple[list[str], str]] = {
    "sessions list": (["sessions", "list"], "{id}"),
    "sessions show": (["sessions", "show", "{id}"], "a.txt"),
    "sessions export": (["sessions", "export", "{id}"], "{id}"),
    "diff": (["diff", "--session", "{id}"], "+one"),
    "diff --last": (["diff", "-w", "{ws}"], "+one"),
    "usage": (["usage"], "openai"),
    "inspect": (["inspect", "{id}", "-o", "{ws}/../page.html"], "page.html"),
}


@pytest.mark.parametrize("name", list(READERS))
def test_a_reading_command_finds_the_run(stored: Stored, name: str) -> None:
    args, expected = READERS[name]
    fill = {"id": stored.session, "ws": str(stored.workspace)}
    done = journeyman(*(a.format(**fill) for a in args), env=stored.setup.env)
    assert done.returncode == 0, done.stderr
    assert expected.format(**fill) in "".join(done.stdout.split())
    assert not stored.setup.default.exists()  # nothing looked in the default folder


def test_undo_finds_the_run(setup: Setup) -> None:
    workspace = setup.workspace("ws")
    setup.finished_run(workspace)
    done = journeyman("undo", "-w", str(workspace), env=setup.env)
    assert done.returncode == 0, done.stderr
    assert not (workspace / "a.txt").exists()


def test_delete_and_import_use_the_user_configs_folder(setup: Setup, tmp_path: Path) -> None:
    workspace = setup.workspace("ws")
    session = setup.finished_run(workspace)
    export = tmp_path / "export.jsonl"
    exported = journeyman("sessions", "export", session, "-o", str(export), env=setup.env)
    assert exported.returncode == 0, exported.stderr
    deleted = journeyman("sessions", "delete", session, env=setup.env)
    assert deleted.returncode == 0, deleted.stderr
    assert setup.stored_ids() == []
    imported = journeyman("sessions", "import", str(export), env=setup.env)
    assert imported.returncode == 0, imported.stderr
    assert len(setup.stored_ids()) == 1
    assert not setup.default.exists()


def test_run_continue_finds_the_session_and_stores_the_follow_up_beside_it(setup: Setup) -> None:
    workspace = setup.workspace("ws")
    session = setup.finished_run(workspace)
    setup.server.enqueue(
        reply(tool_calls=[("write_file", {"path": "b.txt", "content": "two\n"})]), FINISH
    )
    done = journeyman("run", "--continue", session, "now b.txt", "-o", "json", env=setup.env)
    assert done.returncode == 0, done.stderr
    assert (workspace / "b.txt").read_text() == "two\n"
    store = SessionStore(setup.chosen)
    try:
        assert [c.path for c in store.file_changes(session)] == ["a.txt", "b.txt"]
    finally:
        store.close()
    assert not setup.default.exists()


def test_resume_finds_an_unfinished_session_and_goes_on_in_the_same_store(setup: Setup) -> None:
    workspace = setup.workspace("ws")
    setup.server.enqueue(WRITE_A)
    code, result, _stderr = setup.run(workspace, "--max-iterations", "1")
    assert code != 0 and result["finish_reason"] != "completed"
    session = str(result["session_id"])
    setup.server.enqueue(FINISH)
    done = journeyman("resume", session, "--max-iterations", "5", "-o", "json", env=setup.env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["session_id"] == session
    assert setup.stored_ids() == [session]
    assert not setup.default.exists()


def test_fork_finds_the_session_and_stores_the_fork_beside_it(setup: Setup) -> None:
    workspace = setup.workspace("ws")
    session = setup.finished_run(workspace)
    setup.server.enqueue(FINISH)
    done = journeyman(
        "fork", session, "--at-step", "1", "--into", str(setup.root / "fork"), "-o", "json",
        env=setup.env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    forked = json.loads(done.stdout)["session_id"]
    assert forked != session and setup.stored_ids() == [session, forked]
    assert not setup.default.exists()


def test_chat_resume_finds_the_session_and_keeps_writing_there(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    from journeyman.cli import chat_cmd

    workspace = setup.workspace("ws")
    session = setup.finished_run(workspace)
    opened: dict[str, Any] = {}

    def open_app(settled: Any, **kwargs: Any) -> None:
        opened.update(root=settled.workspace, config=settled.config, **kwargs)

    for key in [k for k in os.environ if k.startswith("JOURNEYMAN_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", setup.env["JOURNEYMAN_CONFIG_DIR"])
    monkeypatch.setenv("XDG_DATA_HOME", setup.env["XDG_DATA_HOME"])
    monkeypatch.setattr(chat_cmd, "open_app", open_app)
    chat_cmd.chat(resume=session[:10], last=False)
    assert opened["session_id"] == session
    assert opened["config"].session_dir == setup.chosen
    assert not setup.default.exists()

    # the run's limits and check stay unless given again; given ones go on top
    assert opened["config"].verify is False and opened["config"].max_iterations == 50
    chat_cmd.chat(resume=session[:10], last=False, max_iterations=9, verify="make check")
    assert opened["config"].max_iterations == 9
    assert opened["config"].verify_command == "make check" and opened["config"].verify
    assert opened["config"].session_dir == setup.chosen


def test_the_environment_variable_comes_before_the_user_config(setup: Setup) -> None:
    workspace = setup.workspace("ws")
    elsewhere = setup.root / "from-env"
    setup.env["JOURNEYMAN_SESSION_DIR"] = str(elsewhere)
    session = setup.finished_run(workspace)
    listed = journeyman("sessions", "list", env=setup.env)
    assert session in listed.stdout
    assert (elsewhere / "journeyman.db").is_file() and not setup.chosen.exists()


def test_a_workspace_config_cannot_move_the_store(setup: Setup) -> None:
    workspace = setup.workspace("ws")
    evil = setup.root / "evil-sessions"
    (workspace / "journeyman.toml").write_text(f"session_dir = {str(evil)!r}\n")
    setup.server.enqueue(WRITE_A, FINISH)
    code, result, stderr = setup.run(workspace)
    assert code == 0, stderr
    assert "ignored session_dir" in stderr
    session = str(result["session_id"])
    assert setup.stored_ids() == [session]
    for args in (["diff", "-w", str(workspace)], ["sessions", "list", "-w", str(workspace)]):
        done = journeyman(*args, env=setup.env, cwd=workspace)
        assert done.returncode == 0, done.stderr
    assert not evil.exists() and not setup.default.exists()


def test_a_broken_user_config_is_reported_not_bypassed(setup: Setup) -> None:
    config = Path(setup.env["JOURNEYMAN_CONFIG_DIR"]) / "config.toml"
    config.write_text("session_dir = [\n")
    done = journeyman("sessions", "list", env=setup.env)
    assert done.returncode == 2
    assert str(config) in done.stderr and "Traceback" not in done.stderr
    assert not setup.default.exists()


def test_batch_stores_its_tasks_where_the_other_commands_look(setup: Setup) -> None:
    from tests.batch.support import model, task_text, tasks_for, write_tasks_file

    setup.server.default = model
    tasks_file = write_tasks_file(
        setup.root / "tasks.jsonl", tasks_for(setup.workspace("tasks"), [task_text(1)])
    )
    setup.env["OPENAI_BASE_URL"] = setup.server.base_url
    done = journeyman(
        "batch", str(tasks_file), "--out", str(setup.root / "out"), "--model", "gpt-4.1-mini",
        "--price-per-mtok", "0,1000", "--no-verify", "--sandbox", "local", env=setup.env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [row] = [
        json.loads(line) for line in (setup.root / "out/results.jsonl").read_text().splitlines()
    ]
    assert row["session_id"] in setup.stored_ids()
    shown = journeyman("sessions", "show", row["session_id"], env=setup.env)
    assert shown.returncode == 0, shown.stderr
    assert not setup.default.exists()
