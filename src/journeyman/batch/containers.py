"""Whether tasks that name a container image can run here: a container engine must answer.

`engine_problem()` asks the docker client for the engine's version (`docker info`, a few
seconds at most) once per process. Tasks with an `image` are refused when it gives a reason:
the whole batch (exit 2) when every task needs the engine, else each such task ends "not run:
needs a container engine" and the others run. Nothing is ever run outside the image a task
asked for.
"""

from __future__ import annotations

import functools
import shutil
import subprocess

from journeyman.batch.task_file import BatchTask

ENGINE_PROBE_TIMEOUT_S = 5.0
"""How long `docker info` may take before the engine counts as not answering."""
NEEDS_ENGINE = "needs_container_engine"
"""Finish reason of a task not run because it names an image and no engine answers."""


@functools.cache
def engine_problem(docker: str = "docker") -> str | None:
    """Why no container engine can run a task's image here (None: one answers)."""
    if shutil.which(docker) is None:
        return f"the {docker!r} command is not installed"
    try:
        done = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=ENGINE_PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"`{docker} info` did not answer within {ENGINE_PROBE_TIMEOUT_S:g} s"
    except OSError as error:
        return f"`{docker} info` could not start ({error.strerror or error})"
    version = done.stdout.strip()
    if done.returncode != 0 or not version or version == "<no value>":
        lines = (done.stderr or done.stdout).strip().splitlines()
        return f"the Docker engine does not answer ({lines[-1] if lines else 'no output'})"
    return None


def needing_engine(tasks: list[BatchTask]) -> list[BatchTask]:
    """The tasks that name a container image."""
    return [task for task in tasks if task.image is not None]


def not_run_reason(problem: str) -> str:
    """The error a task that needs an engine gets when none answers."""
    return (
        f"not run: needs a container engine for its image ({problem}); start Docker (or set "
        "DOCKER_HOST) and run the batch again to run it"
    )


__all__ = ["NEEDS_ENGINE", "engine_problem", "needing_engine", "not_run_reason"]
