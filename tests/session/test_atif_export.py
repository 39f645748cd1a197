"""`journeyman sessions export --format atif`: a session with its subagents (three levels deep,
run by the real agent on scripted models) as one ATIF trajectory, read back by the `atif`
package's models and checked against the store; hostile content; bad input."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import atif
import pytest

from journeyman import Agent, AgentConfig
from journeyman.core.messages import Message, Role, ToolCall, Usage
from journeyman.providers.resilient import RetryPolicy
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.store import SessionStore
from journeyman.swarm import SubagentConfig, enable_subagents
from journeyman.swarm.spawn import ChildSpec
from journeyman.swarm.tree import session_tree
from journeyman.tools.base import ToolArgs, tool
from journeyman.tools.builtin import default_tools
from journeyman.tools.context import ToolContext
from tests.fakes.agents import turn
from tests.support.cli import clean_env, jm

NO_WAIT = RetryPolicy(max_retries=0, base_delay_s=0.0, jitter=0.0, max_retry_after_s=0.0)
PRICE = (10.0, 10.0)
"""$0.01 per thousand tokens."""
CACHED = Usage(600, 200, 300, 50)
"""A turn's usage, part of its prompt read from the cache and part written to it."""


class Family:
    """A root agent whose subagents play the script their task names (the child spawns the
    grandchild), all in one session store."""

    def __init__(self, tmp_path: Path, scripts: dict[str, list[Any]], root: list[Any]) -> None:
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir(exist_ok=True)
        (self.workspace / "notes.txt").write_text("alpha\nbeta\n")
        self.sessions = tmp_path / "sessions"
        self.scripts = scripts
        self.root = Agent(
            ScriptedProvider(root),
            workspace=self.workspace,
            tools=default_tools(journal_commands=False),
            config=AgentConfig(
                session_dir=self.sessions,
                sandbox="local",
                journal_commands=False,
                verify=False,
                price_per_mtok=PRICE,
            ),
            retry_policy=NO_WAIT,
        )
        enable_subagents(self.root, SubagentConfig(max_depth=2), make_child=self.make_child)

    def make_child(self, spec: ChildSpec) -> Agent:
        script = next(s for key, s in self.scripts.items() if key in spec.task)
        return Agent(
            ScriptedProvider(script),
            workspace=spec.parent.workspace,
            tools=[t for n in spec.tools.names if (t := spec.tools.get(n)) is not None],
            config=spec.config,
            retry_policy=NO_WAIT,
        )


def spawn(task: str, cid: str) -> ToolCall:
    return ToolCall(cid, "spawn_agent", {"task": task})


async def three_levels(tmp_path: Path) -> tuple[Path, str]:
    """parent -> child -> grandchild, each reading a file and making calls with cached tokens."""
    family = Family(
        tmp_path,
        {
            "grandchild": [
                turn(ToolCall("g1", "read_file", {"path": "notes.txt"}), usage=CACHED),
                turn(text="notes.txt holds alpha and beta.", usage=CACHED),
            ],
            "child": [
                turn(ToolCall("c1", "list_files", {}), text="Looking around.", usage=CACHED),
                turn(spawn("grandchild: read notes.txt", "c2"), usage=CACHED),
                turn(text="The notes hold alpha and beta.", usage=CACHED),
            ],
        },
        [
            turn(spawn("child: find out what the notes say", "p1"), usage=CACHED),
            turn(ToolCall("p2", "grep", {"pattern": "beta"}), usage=CACHED),
            turn(text="They say alpha and beta.", usage=CACHED),
        ],
    )
    result = await family.root.run("what do the notes say?")
    assert result.success, result.error
    return family.sessions, result.session_id


def export(sessions: Path, *args: str, **env: str) -> Any:
    return jm("sessions", "export", *args, "--session-dir", str(sessions), env=clean_env(**env))


def walk(trajectory: atif.Trajectory) -> Iterator[atif.Trajectory]:
    yield trajectory
    for child in trajectory.subagent_trajectories or ():
        yield from walk(child)


def stored_messages(store: SessionStore, session_id: str) -> list[Message]:
    return [message for _, _, message in store.message_rows(session_id)]


async def test_a_three_level_session_round_trips_through_atif(tmp_path: Path) -> None:
    sessions, root_id = await three_levels(tmp_path)
    out = tmp_path / "root.json"
    done = export(sessions, root_id, "--format", "atif", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "with 2 subagent trajectories embedded" in done.stderr
    trajectory = atif.Trajectory.model_validate_json(out.read_text(encoding="utf-8"))
    assert trajectory.schema_version == "ATIF-v1.8"
    assert trajectory.agent.name == "journeyman" and trajectory.agent.version
    assert trajectory.agent.model_name == "scripted"

    store = SessionStore(sessions)
    tree = session_tree(store, root_id)
    (child_node,) = tree.children
    (grand_node,) = child_node.children
    chain = list(walk(trajectory))
    assert [t.trajectory_id for t in chain] == [
        root_id,
        child_node.summary.record.id,
        grand_node.summary.record.id,
    ]
    for exported in chain:
        check_against_store(store, exported)
    # each spawn call's result points at the child it started, embedded in its parent
    for parent, child in pairwise(chain):
        refs = [
            ref.trajectory_id
            for step in parent.steps
            for result in (step.observation.results if step.observation else ())
            for ref in result.subagent_trajectory_ref or ()
        ]
        assert refs == [child.trajectory_id]
        assert [c.trajectory_id for c in parent.subagent_trajectories or ()] == refs
    # the tree's cost, as `sessions show` gives it
    root_metrics = trajectory.final_metrics
    assert root_metrics is not None and root_metrics.extra is not None
    assert root_metrics.extra["tree_cost_usd"] == pytest.approx(tree.tree_cost_usd)
    store.close()


def check_against_store(store: SessionStore, exported: atif.Trajectory) -> None:
    """Every stored message is a step (or a step's observation), with its text; every tool
    call has its result; the metrics add up to the store's usage rows."""
    session_id = exported.trajectory_id or ""
    record = store.load_session(session_id)
    messages = stored_messages(store, session_id)
    steps = exported.steps
    assert steps[0].source == "system" and steps[0].message == record.system_prompt
    users = [m.content for m in messages if m.role is Role.USER]
    assert [s.message for s in steps if s.source == "user"] == users
    assert users[0] == record.task
    replies = [m for m in messages if m.role is Role.ASSISTANT]
    agent_steps = [s for s in steps if s.source == "agent"]
    assert [s.message for s in agent_steps] == [m.content for m in replies]
    for step, reply in zip(agent_steps, replies, strict=True):
        assert [(c.tool_call_id, c.function_name, c.arguments) for c in step.tool_calls or ()] == [
            (c.id, c.name, c.arguments) for c in reply.tool_calls
        ]
        observed = step.observation.results if step.observation else []
        assert [r.source_call_id for r in observed] == [c.id for c in reply.tool_calls]
    results = {m.tool_result.call_id: m.tool_result.content for m in messages if m.tool_result}
    observed_by_call = {
        r.source_call_id: r.content
        for s in agent_steps
        for r in (s.observation.results if s.observation else ())
    }
    assert observed_by_call == results
    assert len(steps) == 1 + len(users) + len(replies)

    rows = store.usage_rows(session_id)
    metrics = [s.metrics for s in agent_steps if s.metrics is not None]
    assert len(metrics) == len(rows) == len(replies)
    final = exported.final_metrics
    assert final is not None and final.total_steps == len(steps)
    assert final.total_prompt_tokens == sum(r.usage.total_input_tokens for r in rows)
    assert final.total_prompt_tokens == sum(m.prompt_tokens or 0 for m in metrics)
    assert final.total_completion_tokens == sum(r.usage.output_tokens for r in rows)
    assert final.total_cached_tokens == sum(r.usage.cache_read_tokens for r in rows) > 0
    assert final.total_cost_usd == pytest.approx(sum(r.cost_usd or 0.0 for r in rows))
    assert final.total_cost_usd == pytest.approx(sum(m.cost_usd or 0.0 for m in metrics))
    assert final.total_cost_usd and final.total_cost_usd > 0


class _Noise(ToolArgs):
    pass


CONTROL = "red \x1b[31mALERT\x1b[0m bell\x07 nul\x00 back\x08 csi\x9b2J del\x7f rtl\u202e end"
HUGE = "line of output\n" * 20_000
SHAPED_KEY = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0" * 2
EXPORT_TIME_SECRET = "hunter2-correct-horse-battery"


@pytest.mark.slow
async def test_hostile_tool_results_are_escaped_whole_and_redacted(tmp_path: Path) -> None:
    @tool(args=_Noise, read_only=True)
    def noise(args: _Noise, ctx: ToolContext) -> str:
        """Print something awkward."""
        return f"{CONTROL}\nkey {SHAPED_KEY}\nset later {EXPORT_TIME_SECRET}\n{HUGE}"

    family = Family(
        tmp_path,
        {},
        [turn(ToolCall("n1", "noise", {}), usage=CACHED), turn(text="Noisy.", usage=CACHED)],
    )
    family.root.registry.register(noise)
    result = await family.root.run("make noise")
    assert result.success, result.error
    out = tmp_path / "noise.json"
    # a variable named like a credential, set only where the export runs: its value is masked
    done = export(
        family.sessions, result.session_id, "--format", "atif", "-o", str(out),
        DEPLOY_TOKEN=EXPORT_TIME_SECRET,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    for raw in ("\x1b", "\x00", "\x9b", "\x7f", "\u202e"):
        assert raw not in text  # escaped in the JSON, so the file is safe to print
    assert SHAPED_KEY not in text and EXPORT_TIME_SECRET not in text
    trajectory = atif.Trajectory.model_validate_json(text)
    (step,) = [s for s in trajectory.steps if s.tool_calls]
    assert step.observation is not None
    content = step.observation.results[0].content
    assert isinstance(content, str)
    assert content.startswith(CONTROL)  # control characters come back as they were
    assert content.count("line of output") > 1_000  # the output as the model saw it
    assert "key [REDACTED]" in content and "set later [REDACTED]" in content
    for fmt in ("mini-traj", "jsonl"):
        other = export(family.sessions, result.session_id, "--format", fmt,
                       DEPLOY_TOKEN=EXPORT_TIME_SECRET)  # fmt: skip
        assert other.returncode == 0, other.stderr
        assert SHAPED_KEY not in other.stdout and EXPORT_TIME_SECRET not in other.stdout
        assert "\x9b" not in other.stdout and "\x1b" not in other.stdout


def test_a_lone_surrogate_in_a_stored_message_is_written_as_utf8(tmp_path: Path) -> None:
    from journeyman.session.store import SessionRecord, StepRecord

    store = SessionStore(tmp_path / "sessions")
    store.create_session(SessionRecord("s-odd", "look at b\udcff.txt", str(tmp_path), {}, ""))
    store.record_step("s-odd", StepRecord(0, [Message.user("look at b\udcff.txt")], [], {}))
    store.close()
    out = tmp_path / "odd.json"
    done = export(tmp_path / "sessions", "s-odd", "--format", "atif", "-o", str(out))
    assert done.returncode == 0, done.stderr
    trajectory = atif.Trajectory.model_validate_json(out.read_bytes())
    assert trajectory.steps[0].message == "look at b\ufffd.txt"


def test_an_unknown_session_or_format_is_one_line_and_exit_2(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    SessionStore(sessions).close()
    missing = export(sessions, "no-such-session", "--format", "atif", "-o", str(tmp_path / "x"))
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"journeyman: no session 'no-such-session' in {sessions / 'journeyman.db'}"
    ]
    assert not (tmp_path / "x").exists()
    bad = export(sessions, "whatever", "--format", "xml")
    assert bad.returncode == 2 and "choose one of jsonl, atif, mini-traj" in bad.stderr
    assert "Traceback" not in missing.stderr + bad.stderr
