"""`journeyman sessions export` beyond one ATIF file: mini-swe-agent's `.traj.json` (its shape,
and read back by `sessions import`), every task of a batch (`--batch OUT`), and a compacted
session, whose rewritten history is not exported twice."""

from __future__ import annotations

import json
from pathlib import Path

import atif
import pytest

from journeyman.core.events import ContextCompacted, event_to_dict
from journeyman.core.messages import Message, ToolCall, ToolResult
from journeyman.session.atif_export import atif_trajectory
from journeyman.session.store import SessionRecord, SessionStore, StepRecord
from journeyman.session.trajectory import MINI_FORMAT
from tests.batch.support import model, task_text, tasks_for, write_tasks_file
from tests.fakes.agents import call, finish, make_agent, turn
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.cli import clean_env, jm


def export(sessions: Path, *args: str) -> object:
    return jm("sessions", "export", *args, "--session-dir", str(sessions), env=clean_env())


async def test_mini_traj_has_mini_swe_agents_shape_and_imports_back(tmp_path: Path) -> None:
    agent, _ = make_agent(
        tmp_path,
        [
            turn(call("write_file", "w1", path="notes.txt", content="hello\n"), text="Writing."),
            turn(call("run_command", "r1", command="cat notes.txt")),
            finish("wrote the notes"),
        ],
        sandbox="local",
        price_per_mtok=(10.0, 10.0),
    )
    result = await agent.run("write the notes")
    assert result.success, result.error
    sessions = tmp_path / "sessions"
    out = tmp_path / "run.traj.json"
    done = export(sessions, result.session_id, "--format", "mini-traj", "-o", str(out))
    assert done.returncode == 0, done.stderr  # type: ignore[attr-defined]
    data = json.loads(out.read_text(encoding="utf-8"))
    assert list(data) == ["info", "messages", "trajectory_format"]
    assert data["trajectory_format"] == MINI_FORMAT == "mini-swe-agent-1.1"
    info = data["info"]
    store = SessionStore(sessions)
    rows = store.usage_rows(result.session_id)
    assert info["model_stats"]["api_calls"] == len(rows) == 3
    assert info["model_stats"]["instance_cost"] == round(sum(r.cost_usd or 0 for r in rows), 10)
    assert info["exit_status"] == "completed"
    assert "+hello" in info["submission"] and "notes.txt" in info["submission"]
    assert info["config"]["environment"]["cwd"] == str(tmp_path / "ws")
    messages = data["messages"]
    # (the user message after the write is the harness's nudge: an edit before any read)
    assert [m["role"] for m in messages] == [
        "system", "user", "assistant", "tool", "user", "assistant", "tool", "assistant", "tool",
        "exit",
    ]  # fmt: skip
    write = messages[2]
    assert write["tool_calls"][0]["function"] == {
        "name": "write_file",
        "arguments": json.dumps({"path": "notes.txt", "content": "hello\n"}),
    }
    assert write["extra"]["cost"] == rows[0].cost_usd
    assert messages[5]["extra"]["actions"][0]["command"] == "cat notes.txt"
    assert messages[6]["tool_call_id"] == "r1" and messages[6]["extra"]["returncode"] == 0
    assert messages[-1]["extra"] == {"exit_status": "completed", "submission": info["submission"]}

    imported = jm(
        "sessions", "import", str(out), "--workspace", str(tmp_path / "ws"),
        "--session-dir", str(sessions), env=clean_env(),
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    new_id = imported.stdout.strip()
    original = [m.to_dict() for m in store.messages(result.session_id)]
    again = [m.to_dict() for m in store.messages(new_id)]
    # what the model saw comes back: texts, calls, results (their metadata is not in the file)
    assert [_shape(m) for m in again] == [_shape(m) for m in original]
    assert (
        store.load_session(new_id).system_prompt
        == store.load_session(result.session_id).system_prompt
    )
    store.close()


def _shape(message: dict[str, object]) -> tuple[object, ...]:
    result = message.get("tool_result")
    return (
        message["role"],
        message.get("content"),
        json.dumps(message.get("tool_calls"), sort_keys=True),
        result.get("call_id") if isinstance(result, dict) else None,
    )


@pytest.mark.slow
def test_batch_export_writes_one_trajectory_per_task(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks = tasks_for(tmp_path, [task_text(1), task_text(2)])
    tasks[0] = tasks[0].model_copy(update={"id": "django__django-11099"})
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks)
    env = clean_env(OPENAI_API_KEY="sk-test-batch", OPENAI_BASE_URL=fake_openai.base_url)
    sessions, out = tmp_path / "sessions", tmp_path / "out"
    ran = jm(
        "batch", str(tasks_file), "--out", str(out), "--session-dir", str(sessions),
        "--model", "gpt-4.1-mini", "--price-per-mtok", "0,1000", "--no-verify",
        "--sandbox", "local", env=env,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    done = export(sessions, "--batch", str(out), "--format", "atif")
    assert done.returncode == 0, done.stderr  # type: ignore[attr-defined]
    folder = out / "trajectories"
    assert sorted(p.name for p in folder.iterdir()) == ["django__django-11099.json", "task-2.json"]
    rows = {
        row["id"]: row for row in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    for task_id, file in (
        ("django__django-11099", "django__django-11099.json"),
        ("task-2", "task-2.json"),
    ):
        trajectory = atif.Trajectory.model_validate_json((folder / file).read_text())
        assert trajectory.session_id == rows[task_id]["session_id"]
        assert trajectory.final_metrics is not None
        assert trajectory.final_metrics.total_cost_usd == rows[task_id]["cost_usd"]
    mini = export(sessions, "--batch", str(out), "--format", "mini-traj", "-o", str(tmp_path / "m"))
    assert mini.returncode == 0, mini.stderr  # type: ignore[attr-defined]
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "django__django-11099.traj.json",
        "task-2.traj.json",
    ]
    # the wrong session folder: said, exit 2, nothing written
    elsewhere = export(tmp_path / "other", "--batch", str(out), "--format", "atif", "-o",
                       str(tmp_path / "none"))  # fmt: skip
    assert elsewhere.returncode == 2  # type: ignore[attr-defined]
    assert "pass the --session-dir the batch ran with" in elsewhere.stderr  # type: ignore[attr-defined]
    assert not list((tmp_path / "none").iterdir())


def test_a_hand_edited_results_file_cannot_write_outside_the_folder(tmp_path: Path) -> None:
    from journeyman.cli.session_export import task_file_name

    taken: set[str] = set()
    names = [task_file_name(i, taken) for i in ("../../etc/passwd", ".hidden", "..", "a/b", "A/B")]
    assert names == ["_.._etc_passwd", "hidden", "task", "a_b", "A_B-2"]
    assert all("/" not in name and not name.startswith(".") for name in names)


def test_a_compacted_history_is_exported_once_with_the_compaction_between(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path / "sessions")
    store.create_session(SessionRecord("s-long", "tidy up", str(tmp_path), {}, "system text"))

    def reply(cid: str) -> Message:
        return Message.assistant(f"calling {cid}", [ToolCall(cid, "read_file", {"path": cid})])

    def result(cid: str, text: str) -> Message:
        return Message.tool(ToolResult(cid, "read_file", text))

    store.record_step("s-long", StepRecord(0, [Message.user("tidy up")], [], {}))
    store.record_step("s-long", StepRecord(1, [reply("c1"), result("c1", "one " * 50)], [], {}))
    store.record_step("s-long", StepRecord(2, [reply("c2"), result("c2", "two " * 50)], [], {}))
    compacted = ContextCompacted("threshold", ("mask", "summarise"), 9_000, 2_000)
    rewritten = [
        Message.user("Summary: c1 and c2 were read."),
        reply("c2"),
        result("c2", "[older output left out]"),
        reply("c3"),
        result("c3", "three"),
    ]
    store.record_step(
        "s-long",
        StepRecord(3, rewritten, [event_to_dict(compacted)], {}, replaces_history=True),
    )
    trajectory = atif_trajectory(store, "s-long")
    store.close()
    kinds = [
        (s.source, s.message.split(":")[0] if isinstance(s.message, str) else "")
        for s in trajectory.steps
    ]
    assert kinds == [
        ("system", "system text"),
        ("user", "tidy up"),
        ("agent", "calling c1"),
        ("agent", "calling c2"),
        ("system", "context compacted (threshold)"),
        ("user", "Summary"),
        ("agent", "calling c3"),
    ]
    observed = [
        r.content
        for s in trajectory.steps
        for r in (s.observation.results if s.observation else ())
    ]
    assert observed == ["one " * 50, "two " * 50, "three"]  # the full outputs, not the masks


def test_parent_links_that_loop_or_run_deep_end_the_embedding(tmp_path: Path) -> None:
    # parent ids come from imported files too: a loop must not recurse forever
    store = SessionStore(tmp_path / "sessions")
    for session_id, parent in (("a", "b"), ("b", "a")):
        store.create_session(
            SessionRecord(session_id, "t", str(tmp_path), {}, "", parent_id=parent)
        )
    chain = [f"deep-{i}" for i in range(40)]
    for i, session_id in enumerate(chain):
        parent = chain[i - 1] if i else None
        store.create_session(
            SessionRecord(session_id, "t", str(tmp_path), {}, "", parent_id=parent)
        )
    looped = atif_trajectory(store, "a")
    assert [t.trajectory_id for t in looped.subagent_trajectories or ()] == ["b"]
    assert (
        looped.subagent_trajectories and not looped.subagent_trajectories[0].subagent_trajectories
    )
    deep = atif_trajectory(store, "deep-0")
    levels = 0
    while deep.subagent_trajectories:
        (deep,) = deep.subagent_trajectories
        levels += 1
    store.close()
    assert levels == 32 and deep.extra and deep.extra["subagents_not_embedded"] == ["deep-33"]


async def test_a_forks_copy_of_its_parents_history_is_marked_copied_context(
    tmp_path: Path,
) -> None:
    agent, _ = make_agent(
        tmp_path,
        [turn(call("list_files", "l1")), finish("listed"), finish("listed again", cid="f2")],
        sandbox="local",
    )
    first = await agent.run("list the files")
    store = SessionStore(tmp_path / "sessions")
    history = store.messages(first.session_id, up_to_step=1)
    store.close()
    forked = await agent.run("list them again", history=history, forked_at_step=1)
    assert forked.success, forked.error
    store = SessionStore(tmp_path / "sessions")
    trajectory = atif_trajectory(store, forked.session_id)
    store.close()
    copied = [(s.source, s.message) for s in trajectory.steps if s.is_copied_context]
    assert copied == [("user", "list the files"), ("agent", "")]
    own = [s for s in trajectory.steps if not s.is_copied_context and s.source != "system"]
    assert own[0].message == "list them again" and own[1].metrics is not None


def test_an_imported_file_with_odd_values_exports_or_says_why(tmp_path: Path) -> None:
    lines = [
        {"kind": "session", "format": "journeyman-session-1", "task": "t", "workspace": "/x"},
        {"kind": "message", "role": "user", "content": "hi"},
        {
            "kind": "message",
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": 5, "name": 7, "arguments": {"n": [1, {"deep": None}]}}],
        },
        {
            "kind": "message",
            "role": "tool",
            "content": "",
            "tool_result": {"call_id": 5, "name": "n", "content": ["a", 1]},
        },
    ]
    file = tmp_path / "odd.jsonl"
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    sessions = tmp_path / "sessions"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    imported = jm(
        "sessions", "import", str(file), "-w", str(workspace), "--session-dir", str(sessions),
        env=clean_env(),
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    done = export(sessions, imported.stdout.strip(), "--format", "atif")
    assert done.returncode == 0, done.stderr  # type: ignore[attr-defined]
    trajectory = atif.Trajectory.model_validate_json(done.stdout)  # type: ignore[attr-defined]
    (step,) = [s for s in trajectory.steps if s.tool_calls]
    assert step.tool_calls and step.tool_calls[0].tool_call_id == "5"
    assert step.observation and step.observation.results[0].content == '["a", 1]'
