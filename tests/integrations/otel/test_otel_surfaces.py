"""Tracing on the commands other than `run`: `batch` (and `eval`, which shares its options)
trace each task's attempt as a trace of its own, `swarm` its planner and each worker, from the
endpoint variable alone or `--otel`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.proto", reason="the otel extra is not installed")

from tests.batch.support import model, task_text, tasks_for, write_tasks_file
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.swarm import SwarmModel, git_repo, openai_reply, write_then_finish
from tests.integrations.otel.receiver import OtlpReceiver
from tests.integrations.otel.test_cli_otel import otel_free_env
from tests.support.cli import jm, journeyman


def batch_args(tmp_path: Path, tasks_file: Path, *extra: str) -> list[str]:
    return [
        "batch",
        str(tasks_file),
        "--out",
        str(tmp_path / "out"),
        "--session-dir",
        str(tmp_path / "sessions"),
        "--model",
        "gpt-4.1-mini",
        "--no-verify",
        "--sandbox",
        "local",
        "--max-parallel",
        "2",
        "--output-format",
        "json",
        *extra,
    ]


def session_ids(tmp_path: Path) -> set[str]:
    text = (tmp_path / "out" / "results.jsonl").read_text()
    return {json.loads(line)["session_id"] for line in text.splitlines()}


def test_a_batch_sends_one_trace_per_task_when_the_endpoint_is_set(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks_file = write_tasks_file(
        tmp_path / "tasks.jsonl", tasks_for(tmp_path, [task_text(1), task_text(0)])
    )
    with OtlpReceiver() as receiver:
        env = otel_free_env(
            OPENAI_API_KEY="sk-test-batch",
            OPENAI_BASE_URL=fake_openai.base_url,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        )
        done = journeyman(*batch_args(tmp_path, tasks_file), env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    runs = [s for s in receiver.spans if s.name == "invoke_agent journeyman"]
    assert len(runs) == 2
    assert all(not run.parent_span_id for run in runs)
    assert len({run.trace_id for run in runs}) == 2  # a trace per task
    assert {run.attributes["gen_ai.conversation.id"] for run in runs} == session_ids(tmp_path)
    tools = [s for s in receiver.spans if s.name.startswith("execute_tool")]
    assert tools and {s.trace_id for s in tools} <= {run.trace_id for run in runs}


def test_a_batch_without_flag_or_endpoint_sends_nothing(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks_for(tmp_path, [task_text(0)]))
    with OtlpReceiver() as receiver:
        env = otel_free_env(OPENAI_API_KEY="sk-test-batch", OPENAI_BASE_URL=fake_openai.base_url)
        done = journeyman(*batch_args(tmp_path, tasks_file), env=env)
    assert done.returncode == 0, done.stderr
    assert receiver.spans == []


def test_batch_otel_without_the_extra_exits_2_before_any_task(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    shadow = tmp_path / "shadow"
    (shadow / "opentelemetry").mkdir(parents=True)
    (shadow / "opentelemetry" / "__init__.py").write_text("")
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks_for(tmp_path, [task_text(0)]))
    env = otel_free_env(
        OPENAI_API_KEY="sk-test-batch",
        OPENAI_BASE_URL=fake_openai.base_url,
        PYTHONPATH=str(shadow),
    )
    done = journeyman(*batch_args(tmp_path, tasks_file, "--otel"), env=env)
    assert done.returncode == 2
    assert "--otel: OpenTelemetry export needs the otel extra" in done.stderr
    assert fake_openai.requests == []


def test_a_swarm_sends_a_trace_for_the_planner_and_each_worker(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    repo = git_repo(tmp_path / "repo", {"a.txt": "old\n", "b.txt": "old\n"})
    plan = [
        {"title": f"update {name}", "task": f"Update {name}.", "files": [f"{name}.txt"]}
        for name in "ab"
    ]
    scripts = {
        "w1": write_then_finish("a.txt", "new a\n"),
        "w2": write_then_finish("b.txt", "new b\n"),
    }
    fake_openai.default = openai_reply(SwarmModel(plan, scripts))
    with OtlpReceiver() as receiver:
        env = otel_free_env(
            OPENAI_API_KEY="sk-test-swarm",
            OPENAI_BASE_URL=fake_openai.base_url,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        )
        done = jm(
            "swarm", "make the change", "-w", str(repo), "--model", "gpt-4.1-mini", "--yes",
            "--sandbox", "local", "--session-dir", str(tmp_path / "sessions"),
            "--verify", "true", "--workers", "2",
            env=env, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    runs = [s for s in receiver.spans if s.name == "invoke_agent journeyman"]
    assert len(runs) == 3  # the planning turn and two workers
    assert len({run.trace_id for run in runs}) == 3
    writes = [s for s in receiver.spans if s.name == "execute_tool write_file"]
    assert len(writes) == 2
