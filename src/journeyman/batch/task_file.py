"""One task of a batch and the JSONL file of them, validated up front.

A line holds `id`, `task`, `workspace` (a local folder, or a git repository — a folder or a
URL — used with `base_commit`), and optionally `verify`, `setup`, `limits`, `grading` and
`image` (a container image its commands and check run in). A bad line is refused with its line
number before anything runs, so a batch never dies half-way over a typo; so is a workspace that
is missing, not a git repository while `base_commit` is set, or that lacks the `base_commit`
named (a URL's commit is checked when it is cloned). A folder of tasks is an eval suite's
business (`tasks.load_tasks`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from journeyman.batch.grading import GradingSpec
from journeyman.core.errors import ConfigurationError
from journeyman.core.safe_git import safe_git_command, safe_git_env

TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,199}$")
"""What a task id may look like: it names a folder and goes into a session id."""
IMAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9._/:@-]{0,254}$")
"""What a container image reference may look like (registry/name:tag or @digest): never a
word the engine's command line would take for an option."""


def check_image(value: str) -> str:
    """`value` if it can name a container image; ValueError saying why not."""
    if not IMAGE_NAME.match(value):
        raise ValueError(
            "must name a container image (e.g. python:3.12-slim or "
            "ghcr.io/org/image@sha256:...): lowercase letters, digits and ._/:@-, starting "
            "with a letter or digit"
        )
    return value


class TaskLimits(BaseModel):
    """A task's own limits; the batch's allocation may lower them, never raise them."""

    model_config = ConfigDict(extra="forbid")

    max_iterations: int | None = Field(default=None, ge=1)
    """Model turns the task may take."""
    max_budget_usd: float | None = Field(default=None, gt=0)
    """US dollars the task may spend."""
    max_total_tokens: int | None = Field(default=None, gt=0)
    """Tokens (input + output) the task may consume."""
    max_duration_s: float | None = Field(default=None, gt=0)
    """Wall-clock seconds one attempt of the task may last."""
    offline: bool = False
    """Its commands, check and grading never get the network, even when the batch allows it
    (`--allow-network`); a task cannot turn the network on."""


class BatchTask(BaseModel):
    """One unit of work of a batch."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """Unique within the batch; letters, digits and `._:@+-` (it names the task's folder)."""
    task: str = Field(min_length=1)
    """What the agent should do, in plain words."""
    workspace: str = Field(min_length=1)
    """A local folder (copied for the task), a git repository (a worktree at `base_commit`), or
    a git repository's URL (`https://`, `ssh://`, `git://`, `user@host:path`; with
    `base_commit`: cloned for the task)."""
    base_commit: str | None = None
    """With a git repository: the commit the task's worktree starts from."""
    verify: str | None = None
    """Shell command whose exit code 0 means the task is done (overrides the batch's --verify)."""
    setup: str | None = None
    """Shell command run in the fresh workspace before the agent starts (e.g. install deps)."""
    limits: TaskLimits = Field(default_factory=TaskLimits)
    """The task's own limits."""
    grading: GradingSpec | None = None
    """How an eval grades the task after the agent stops (see `journeyman.batch.grading`)."""
    image: str | None = None
    """Container image the agent's commands and the check run in (docker sandbox); needs a
    container engine: without one the task is not run, and says so."""

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not TASK_ID.match(value):
            raise ValueError(
                "must be 1-200 letters, digits or ._:@+- and start with a letter or digit"
            )
        return value

    @field_validator("image")
    @classmethod
    def _image_shape(cls, value: str | None) -> str | None:
        return None if value is None else check_image(value)


class TaskFileError(ConfigurationError):
    """The tasks file (or folder) cannot be used as given."""


def read_tasks_file(path: Path) -> list[BatchTask]:
    """The tasks of the JSONL file `path`.

    Raises `TaskFileError` naming the file, the line and the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError(f"tasks file {path} does not exist") from None
    except UnicodeDecodeError as error:
        raise TaskFileError(f"tasks file {path} is not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise TaskFileError(f"cannot read tasks file {path} ({error.strerror})") from None
    tasks: list[BatchTask] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        task = _parse_line(path, number, line)
        if task.id in seen:
            raise TaskFileError(
                f"{path}:{number}: task id {task.id!r} is already used on line {seen[task.id]}; "
                "give every task its own id"
            )
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise TaskFileError(f"tasks file {path} holds no task (one JSON object per line)")
    check_workspaces([(f"{path}:{seen[task.id]}", task) for task in tasks])
    return tasks


MAX_PROBLEMS_SHOWN = 5


def check_workspaces(located: list[tuple[str, BatchTask]]) -> None:
    """Refuse (`TaskFileError`) tasks whose workspace cannot be prepared, before anything runs:
    a folder that is missing, a `base_commit` on a folder that is not a git repository, or a
    `base_commit` the repository does not hold. `located` pairs each task with where it was
    written (file:line), which every message starts with."""
    problems: list[str] = []
    commits: dict[Path, list[tuple[str, BatchTask]]] = {}
    for where, task in located:
        problem = _folder_problem(task)
        if problem is not None:
            problems.append(f"{where}: task {task.id}: {problem}")
        elif task.base_commit and not is_git_url(task.workspace):
            source = Path(task.workspace).expanduser().resolve()
            commits.setdefault(source, []).append((where, task))
    for repository, wanted in commits.items():
        problems += _missing_commits(repository, wanted)
    if problems:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        raise TaskFileError(
            "; ".join(shown) + (f"; and {more} more like these" if more > 0 else "")
        )


GIT_URL = re.compile(r"^(?:(?:https?|ssh|git)://[^/\s]+/\S+|\w[\w.-]*@\w[\w.-]*:\S+)$")
"""A repository by URL: a workspace no local check can see (its clone can fail at run time)."""


def is_git_url(workspace: str) -> bool:
    """Whether a task's `workspace` names a repository by URL rather than a local folder."""
    return bool(GIT_URL.match(workspace))


def _folder_problem(task: BatchTask) -> str | None:
    if is_git_url(task.workspace):
        if not task.base_commit:
            return (
                f"its workspace {task.workspace} is a repository URL, which needs a "
                "base_commit (the commit its clone starts from)"
            )
        return None
    source = Path(task.workspace).expanduser()
    relative = "" if source.is_absolute() else f" (relative to {Path.cwd()})"
    if not source.exists():
        return f"its workspace {source}{relative} does not exist; give an existing folder"
    if not source.is_dir():
        return f"its workspace {source}{relative} is a file, not a folder"
    if task.base_commit and not _is_repository_top(source):
        return (
            f"it has a base_commit, but its workspace {source}{relative} is not a git "
            "repository (no .git in it); give the repository's top folder, or drop base_commit "
            "to copy the folder as it is"
        )
    return None


def _is_repository_top(folder: Path) -> bool:
    """A git repository whose top is `folder` (not merely a folder inside one)."""
    if (folder / ".git").exists():
        return True
    done = _git(folder, "rev-parse", "--is-bare-repository")
    return done is not None and done.returncode == 0 and done.stdout.strip() == "true"


def _missing_commits(repository: Path, wanted: list[tuple[str, BatchTask]]) -> list[str]:
    """The tasks whose base_commit `repository` does not hold, as messages (one git call)."""
    names = [f"{task.base_commit}^{{commit}}" for _, task in wanted]
    done = _git(repository, "cat-file", "--batch-check", stdin="".join(n + "\n" for n in names))
    if done is None or done.returncode != 0:
        why = "git is not installed" if done is None else (done.stderr.strip() or "no output")
        return [
            f"{wanted[0][0]}: task {wanted[0][1].id}: cannot look up commits in {repository} "
            f"({why})"
        ]
    answers = done.stdout.splitlines()
    problems = []
    for index, (where, task) in enumerate(wanted):
        answer = answers[index] if index < len(answers) else "missing"
        if answer.split()[1:2] == ["commit"]:
            continue
        why = "is ambiguous (give more of its digits)" if "ambiguous" in answer else "is not there"
        problems.append(
            f"{where}: task {task.id}: its base_commit {task.base_commit} {why} in the "
            f"repository {repository}; fetch that commit into it, or correct the id"
        )
    return problems


def _git(folder: Path, *args: str, stdin: str | None = None) -> Any:
    import subprocess

    try:
        return subprocess.run(
            safe_git_command("-C", str(folder), *args),
            env=safe_git_env(os.environ),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except FileNotFoundError:
        return None
    except (OSError, subprocess.TimeoutExpired) as error:
        return subprocess.CompletedProcess(args, 1, "", str(error))


def _parse_line(path: Path, number: int, line: str) -> BatchTask:
    where = f"{path}:{number}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        raise TaskFileError(
            f"{where}: not valid JSON ({error.msg} at column {error.colno}); "
            "each line must be one JSON object"
        ) from None
    if not isinstance(data, dict):
        raise TaskFileError(f"{where}: expected a JSON object, got {type(data).__name__}")
    try:
        return BatchTask.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'line'}: {_message(e)}" for e in error.errors()
        )
        raise TaskFileError(f"{where}: {problems}") from None


def _message(error: Any) -> str:
    if error.get("type") == "extra_forbidden":
        return (
            "unknown field (expected id, task, workspace, base_commit, verify, setup, limits, "
            "grading)"
        )
    if error.get("type") == "missing":
        return "missing"
    return str(error.get("msg", "invalid"))


__all__ = [
    "IMAGE_NAME",
    "TASK_ID",
    "BatchTask",
    "TaskFileError",
    "TaskLimits",
    "check_image",
    "check_workspaces",
    "is_git_url",
    "read_tasks_file",
]
