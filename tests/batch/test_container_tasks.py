"""Tasks that name a container image: refused clearly where no container engine answers,
and set up to run in the docker sandbox where one does."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from journeyman.batch.containers import engine_problem
from journeyman.batch.job import Spending, TaskJob, session_id_for, settle_job
from journeyman.batch.task_file import BatchTask, TaskFileError, read_tasks_file
from journeyman.tools.sandbox import DockerSandbox
from tests.batch.support import model, task_text, tasks_for, write_tasks_file
from tests.batch.test_batch_cli import batch_args, env_for, rows
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.cli import journeyman

NO_ENGINE = engine_problem()
"""Why no container engine runs images here (None when one answers)."""
needs_no_engine = pytest.mark.skipif(
    NO_ENGINE is None, reason="a container engine answers here: these tests need one that does not"
)


def test_a_tasks_image_is_read_and_an_option_like_one_refused(tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.jsonl"
    line = {"id": "a", "task": "x", "workspace": str(tmp_path), "image": "python:3.12-slim"}
    tasks_file.write_text(json.dumps(line) + "\n")
    assert read_tasks_file(tasks_file)[0].image == "python:3.12-slim"
    for bad in ("--privileged", "Python 3", ""):
        tasks_file.write_text(json.dumps(line | {"image": bad}) + "\n")
        with pytest.raises(TaskFileError, match=r"tasks.jsonl:1.*image"):
            read_tasks_file(tasks_file)


def test_a_task_with_an_image_runs_its_commands_and_check_in_the_docker_sandbox(
    tmp_path: Path,
) -> None:
    task = BatchTask(id="a", task="x", workspace=str(tmp_path), image="ghcr.io/org/img:1")
    job = TaskJob(
        batch_id="b",
        task=task,
        workspace_dir=str(tmp_path),
        store_path=str(tmp_path / "sessions"),
        session_id=session_id_for("b", "a", 1),
        model=None,
        base_url=None,
        provider=None,
        mode="react",
        verify=None,
        granted_tokens=None,
        granted_usd=None,
        attempt=1,
        resume=True,
        config={"sandbox": "local"},  # the batch's own choice gives way to the task's image
    )
    config = settle_job(job, Spending(0.0, 0)).config
    assert config.sandbox.value == "docker" and config.sandbox_image == "ghcr.io/org/img:1"
    plain = settle_job(replace(job, task=task.model_copy(update={"image": None})), Spending(0, 0))
    assert plain.config.sandbox.value == "local" and plain.config.sandbox_image is None
    assert DockerSandbox(tmp_path).image == "python:3.12-slim"  # the default stays


@needs_no_engine
def test_without_an_engine_a_batch_whose_every_task_needs_one_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    tasks = [
        t.model_copy(update={"image": "python:3.12-slim"})
        for t in tasks_for(tmp_path, [task_text(0)] * 2)
    ]
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", tasks)
    done = journeyman(*batch_args(tmp_path, tasks_file), env=env_for(fake_openai))
    assert done.returncode == 2, done.stderr
    assert "every task names a container image" in done.stderr
    assert "no container engine answers" in done.stderr and "Traceback" not in done.stderr
    assert not fake_openai.requests and not (tmp_path / "out" / "results.jsonl").exists()


@needs_no_engine
def test_without_an_engine_only_the_tasks_that_need_one_are_not_run(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = model
    plain, boxed = tasks_for(tmp_path, [task_text(0), task_text(0)])
    boxed = boxed.model_copy(update={"image": "python:3.12-slim"})
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", [plain, boxed])
    done = journeyman(*batch_args(tmp_path, tasks_file), env=env_for(fake_openai))
    assert done.returncode == 1, done.stderr
    assert "1 of 2 tasks name a container image (task-2)" in done.stderr
    assert "1 succeeded, 0 failed, 0 infrastructure errors, 1 not run" in done.stdout
    by_id = {row["id"]: row for row in rows(tmp_path)}
    assert by_id["task-1"]["status"] == "succeeded"
    refused = by_id["task-2"]
    assert refused["status"] == "not_run" and refused["finish_reason"] == "needs_container_engine"
    assert refused["error"].startswith("not run: needs a container engine")
    assert refused["session_id"] is None  # nothing of it ran, not even outside the image


@pytest.mark.skipif(NO_ENGINE is not None, reason=f"no container engine answers here: {NO_ENGINE}")
def test_with_an_engine_a_task_runs_in_its_image(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:  # pragma: no cover - needs a Docker engine
    fake_openai.default = model
    (task,) = tasks_for(tmp_path, [task_text(1)])
    task = task.model_copy(update={"image": "python:3.12-slim"})
    tasks_file = write_tasks_file(tmp_path / "tasks.jsonl", [task])
    done = journeyman(
        *batch_args(tmp_path, tasks_file, "--verify", "test -f /.dockerenv"),
        env=env_for(fake_openai),
    )
    assert done.returncode == 0, done.stderr


def test_a_micro_suite_task_may_name_an_image(tmp_path: Path) -> None:
    from journeyman.batch.suites import SuiteError, load_suite
    from journeyman.batch.suites.micro import micro_task_dirs

    source = micro_task_dirs()[0]
    folder = tmp_path / "suite" / source.name
    shutil.copytree(source, folder)
    meta = json.loads((folder / "task.json").read_text())
    (folder / "task.json").write_text(json.dumps(meta | {"image": "python:3.12-slim"}))
    assert [t.image for t in load_suite(tmp_path / "suite")] == ["python:3.12-slim"]
    (folder / "task.json").write_text(json.dumps(meta | {"image": "--privileged"}))
    with pytest.raises(SuiteError, match=r"task.json: image '--privileged' must name"):
        load_suite(tmp_path / "suite")
