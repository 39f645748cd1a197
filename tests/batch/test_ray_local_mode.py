"""Without an address (and without RAY_ADDRESS) the Ray executor starts a private Ray instance
on this machine for the batch, and stops it when the batch closes the executor."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest
import ray

from journeyman.batch.job import TaskJob, TaskOutcome, session_id_for
from journeyman.batch.ray_executor import RayExecutor
from journeyman.batch.task_file import BatchTask
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.ray_cluster import RAY_ENV

pytestmark = pytest.mark.slow


def test_without_an_address_a_private_instance_runs_the_batch_and_stops_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer
) -> None:
    ray_tmp = Path(tempfile.mkdtemp(prefix="jmray", dir="/tmp"))  # short: Ray's socket paths
    monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
    for name, value in RAY_ENV.items():  # no token written into the home folder
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-local-mode")  # the workers inherit it
    fake_openai.default = reply(tool_calls=[("finish", {"summary": "done"})])
    assert not ray.is_initialized()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    job = TaskJob(
        batch_id="b1",
        task=BatchTask(id="t1", task="finish", workspace="."),
        workspace_dir=str(workspace),
        store_path=str(tmp_path / "sessions"),
        session_id=session_id_for("b1", "t1", 1),
        model="gpt-4.1-mini",
        base_url=fake_openai.base_url,
        provider="openai",
        mode="react",
        verify=None,
        granted_tokens=None,
        granted_usd=None,
        attempt=1,
        resume=True,
        config={"price_per_mtok": (0.0, 1000.0), "verify": False, "sandbox": "local"},
    )
    try:
        executor = RayExecutor(None, max_parallel=1)
        assert ray.is_initialized()

        async def go() -> TaskOutcome:
            try:
                return await executor.run(job)
            finally:
                await executor.close()

        outcome = asyncio.run(go())
        assert outcome.status == "succeeded", outcome
        assert outcome.cost_usd == pytest.approx(0.007)
        assert not ray.is_initialized()
        assert (ray_tmp / "ray").is_dir()  # its files went under RAY_TMPDIR, not /tmp/ray
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
