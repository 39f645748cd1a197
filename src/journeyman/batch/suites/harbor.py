"""Harbor task folders as an eval suite, run without a container where they can be.

A Harbor task is a folder with `instruction.md` (what the agent is told), `task.toml` (limits
and the environment), `environment/` (a Dockerfile, and files it copies into the image),
`tests/test.sh` (run after the agent stops; it writes the reward to `/logs/verifier/reward.txt`
or `reward.json`) and, unused here, `solution/`. A suite is one such folder or a folder of them.

A task runs without a container when its Dockerfile only names a base image, a working folder
and local files to copy into it (no `RUN`, no prebuilt `docker_image`, no compose file), and its
test script installs and downloads nothing: the copied files become the agent's workspace, the
working folder (`/app`, say) stands for the workspace in the instruction, and the tests run
through `harbor_verify.py` (see there) with their container paths mapped into the grading tree.
Every other task is reported as needing a container engine and not run; the caller is told of
each through `note`.

From `task.toml`: `[agent] timeout_sec` is the task's wall-clock limit, `[verifier] timeout_sec`
the tests' (Harbor's default 600 s), `[verifier] env` literal values are set for the tests (a
`${VAR}` template, which would read the host's environment, is refused), `[environment]
workdir` overrides the Dockerfile's `WORKDIR`. The agent phase's network (`[agent]
network_mode`, else `[environment] network_mode` or the older `allow_internet`) can only take
the network away: "no-network" and "allowlist" (hosts cannot be singled out without a
container) run the task offline (`TaskLimits.offline`) even under `--allow-network`; "public"
leaves the batch's choice, which is off unless the user allowed it. The grading runs in the
agent's sandbox, so with the agent's network.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from journeyman.batch.grading import GradingSpec
from journeyman.batch.suites.errors import SuiteError
from journeyman.batch.suites.harbor_verify import MANIFEST
from journeyman.batch.task_file import TASK_ID, BatchTask, TaskLimits

VERIFY_SCRIPT = Path(__file__).with_name("harbor_verify.py")
HARBOR_DEFAULT_VERIFIER_TIMEOUT = 600.0
"""Harbor's own default for `[verifier] timeout_sec`."""

_IGNORED_INSTRUCTIONS = frozenset(
    {"ARG", "ENV", "LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "USER", "VOLUME", "STOPSIGNAL",
     "MAINTAINER", "HEALTHCHECK", "SHELL"}
)  # fmt: skip
"""Dockerfile instructions that change nothing the agent's files or the tests depend on here."""
_INSTALLS = re.compile(
    r"(?m)^[^#\n]*?\b(?:(?:apt-get|apt|apk|yum|dnf|brew)\s+(?:-\S+\s+)*(?:install|add|update)"
    r"|curl|wget|uvx?|pip3?\s+install|npm\s+(?:install|i)|conda\s+install)\b"
)


_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


NetworkMode = Literal["public", "no-network", "allowlist"]


class _Phase(BaseModel):
    model_config = ConfigDict(extra="allow")

    timeout_sec: float | None = Field(default=None, gt=0)
    """Seconds the phase may last."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the phase (only the verifier's are used here)."""
    network_mode: NetworkMode | None = None
    """The phase's network; unset, the environment's applies."""


class _Environment(BaseModel):
    model_config = ConfigDict(extra="allow")

    docker_image: str | None = None
    """A prebuilt image: the task needs a container engine."""
    workdir: str | None = None
    """The container's working folder, overriding the Dockerfile's WORKDIR."""
    os: str = "linux"
    """The container's operating system; only linux runs here."""
    gpus: int | None = None
    """GPUs the task asks for: it needs a container engine that provides them."""
    network_mode: NetworkMode = "public"
    """The network of every phase that does not set its own (Harbor's default: public)."""
    allow_internet: bool | None = None
    """The older way of saying it: false is `network_mode = "no-network"`."""

    def baseline_network(self) -> NetworkMode:
        if self.allow_internet is False:
            return "no-network"
        return self.network_mode


class TaskToml(BaseModel):
    """What journeyman reads of a Harbor `task.toml` (the rest is Harbor's own business)."""

    model_config = ConfigDict(extra="allow")

    agent: _Phase = Field(default_factory=_Phase)
    """`[agent]`: the agent's timeout."""
    verifier: _Phase = Field(default_factory=lambda: _Phase(timeout_sec=600.0))
    """`[verifier]`: the tests' timeout and environment."""
    environment: _Environment = Field(default_factory=_Environment)
    """`[environment]`: image, working folder, OS, GPUs."""
    steps: list[Any] | None = None
    """`[[steps]]`: a multi-step task."""


@dataclass(frozen=True)
class Excluded:
    """A task of the suite that cannot run here, and why."""

    id: str
    reason: str

    def note(self) -> str:
        return f"Harbor task {self.id} needs a container engine ({self.reason}); not run"


@dataclass
class _Plan:
    """The files a task's Dockerfile copies into its working folder."""

    workdir: str | None = None
    copies: list[tuple[Path, PurePosixPath]] = field(default_factory=list)
    """(source under environment/, destination under the working folder)."""


def is_harbor_task(folder: Path) -> bool:
    """True when `folder` holds `instruction.md` and `task.toml`."""
    return (folder / "instruction.md").is_file() and (folder / "task.toml").is_file()


def looks_like_harbor(folder: Path) -> bool:
    """A Harbor task folder, or a folder holding at least one."""
    if is_harbor_task(folder):
        return True
    return any(is_harbor_task(child) for child in folder.iterdir() if child.is_dir())


def load_harbor(
    root: Path, staging: Path, note: Callable[[str], None] | None = None
) -> list[BatchTask]:
    """The tasks of the Harbor suite `root` that can run here; each one that needs a container
    engine is passed to `note` (never silently left out). `staging` receives, per task, the
    agent's starting copy (`<id>/start`) and what grading lays over it (`<id>/hidden`)."""
    root = root.resolve()
    folders = [root] if is_harbor_task(root) else _task_folders(root)
    tasks: list[BatchTask] = []
    excluded: list[Excluded] = []
    for folder in folders:
        outcome = _task(folder, staging)
        if isinstance(outcome, Excluded):
            excluded.append(outcome)
        else:
            tasks.append(outcome)
    for item in excluded:
        if note is not None:
            note(item.note())
    if not tasks:
        reasons = "; ".join(f"{item.id}: {item.reason}" for item in excluded[:5])
        raise SuiteError(
            f"none of the {len(excluded)} Harbor tasks in {root} can run without a container "
            f"engine ({reasons}); run them with Harbor itself (`harbor run`, see docs/harbor.md)"
        )
    return tasks


def _task_folders(root: Path) -> list[Path]:
    folders = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith("."):
            continue
        if child.is_symlink():
            raise SuiteError(f"{child} is a symlink; a Harbor task must be a real folder")
        if is_harbor_task(child):
            folders.append(child)
        elif (child / "task.toml").is_file():
            raise SuiteError(f"{child} has a task.toml but no instruction.md")
    return folders


def _task(folder: Path, staging: Path) -> BatchTask | Excluded:
    task_id = folder.name
    if not TASK_ID.match(task_id):
        raise SuiteError(f"{folder}: the folder name {task_id!r} cannot name a task")
    config = read_task_toml(folder / "task.toml")
    reason = _needs_container(folder, config)
    if reason is not None:
        return Excluded(task_id, reason)
    plan = _dockerfile_plan(folder, config)
    if isinstance(plan, str):
        return Excluded(task_id, plan)
    start, hidden = staging / task_id / "start", staging / task_id / "hidden"
    _stage(folder, plan, start, hidden)
    return BatchTask(
        id=task_id,
        task=_instruction(folder, plan.workdir),
        workspace=str(start),
        limits=TaskLimits(max_duration_s=config.agent.timeout_sec, offline=_agent_offline(config)),
        grading=GradingSpec(
            kind="harbor",
            test_cmd=_test_command(config, plan.workdir),
            hidden_tests_dir=str(hidden),
            timeout_s=config.verifier.timeout_sec or HARBOR_DEFAULT_VERIFIER_TIMEOUT,
        ),
    )


def _agent_offline(config: TaskToml) -> bool:
    """Whether the agent's phase must run without the network: "no-network", and also
    "allowlist" (a list of hosts cannot be enforced without a container, so none is reached)."""
    mode = config.agent.network_mode or config.environment.baseline_network()
    return mode != "public"


def read_task_toml(path: Path) -> TaskToml:
    """The parts of `task.toml` journeyman uses; `SuiteError` when it cannot be read."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"cannot read {path}: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise SuiteError(f"{path}: not valid TOML ({error})") from None
    try:
        return TaskToml.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise SuiteError(f"{path}: {where}: {first['msg']}") from None


def _needs_container(folder: Path, config: TaskToml) -> str | None:
    env = config.environment
    if config.steps:
        return "a multi-step task ([[steps]])"
    if env.os.lower() != "linux":
        return f"its environment's os is {env.os}"
    if env.docker_image:
        return f"it runs in the prebuilt image {env.docker_image}"
    if env.gpus:
        return f"it asks for {env.gpus} GPU(s)"
    for compose in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml"):
        if (folder / "environment" / compose).is_file():
            return f"environment/{compose} starts services"
    test = folder / "tests" / "test.sh"
    if not test.is_file():
        if (folder / "tests" / "test.bat").is_file():
            return "its tests are a Windows script (tests/test.bat)"
        raise SuiteError(f"{folder}: no tests/test.sh; a Harbor task needs one")
    match = _INSTALLS.search(test.read_text(encoding="utf-8", errors="replace"))
    if match is not None:
        return f"tests/test.sh installs or downloads software: `{match.group(0).strip()[:60]}`"
    odd = [name for name in config.verifier.env if not _VARIABLE.fullmatch(name)]
    if odd:
        raise SuiteError(f"{folder}: [verifier] env name {odd[0]!r} is not a variable name")
    templated = [name for name, value in config.verifier.env.items() if "${" in value]
    if templated:
        return f"[verifier] env reads the host's variables ({', '.join(sorted(templated))})"
    return None


def _dockerfile_lines(path: Path) -> list[str]:
    """The instructions of a Dockerfile: continuations joined, comments and blanks dropped."""
    lines: list[str] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append((pending + stripped).strip())
        pending = ""
    if pending.strip():
        lines.append(pending.strip())
    return lines


def _dockerfile_plan(folder: Path, config: TaskToml) -> _Plan | str:
    """What the Dockerfile copies where, or why it needs a container engine."""
    environment = folder / "environment"
    dockerfile = environment / "Dockerfile"
    plan = _Plan()
    if not dockerfile.is_file():  # no image to build: Harbor uploads environment/ as it is
        plan.workdir = config.environment.workdir
        if environment.is_dir():
            plan.copies.append((environment, PurePosixPath(".")))
        return plan
    workdir = "/"
    images = 0
    copies: list[tuple[Path, str, bool]] = []
    for line in _dockerfile_lines(dockerfile):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            images += 1
            if images > 1:
                return "its Dockerfile is a multi-stage build"
        elif keyword == "WORKDIR":
            if "$" in rest:
                return f"its Dockerfile's WORKDIR uses a variable ({rest.strip()})"
            workdir = str(PurePosixPath(workdir) / rest.strip().strip("\"'"))
        elif keyword in ("COPY", "ADD"):
            parsed = _copy_args(keyword, rest)
            if isinstance(parsed, str):
                return parsed
            sources, destination = parsed
            for source in sources:
                target = PurePosixPath(workdir) / destination
                into_folder = destination.endswith("/") or len(sources) > 1
                copies.append((_inside(environment, source), str(target), into_folder))
        elif keyword == "RUN":
            return f"its Dockerfile runs commands (RUN {rest.strip()[:50]})"
        elif keyword not in _IGNORED_INSTRUCTIONS:
            return f"its Dockerfile uses {keyword}"
    plan.workdir = config.environment.workdir or (workdir if workdir != "/" else None)
    return _relative_copies(plan, copies)


def _copy_args(keyword: str, rest: str) -> tuple[list[str], str] | str:
    text = rest.strip()
    if text.startswith("["):
        try:
            words = json.loads(text)
        except ValueError:
            return f"its Dockerfile's {keyword} cannot be read ({text[:40]})"
    else:
        try:
            words = shlex.split(text)
        except ValueError:
            return f"its Dockerfile's {keyword} cannot be read ({text[:40]})"
    words = [str(word) for word in words]
    flags = [word for word in words if word.startswith("--")]
    if any(flag.startswith("--from") for flag in flags):
        return f"its Dockerfile copies from another image ({keyword} {flags[0]})"
    paths = [word for word in words if not word.startswith("--")]
    if len(paths) < 2:
        return f"its Dockerfile's {keyword} names no destination"
    sources = paths[:-1]
    if keyword == "ADD" and any(
        re.match(r"^[a-z]+://|^git@", source) or re.search(r"\.(tar|tgz|gz|bz2|xz|zip)$", source)
        for source in sources
    ):
        return "its Dockerfile ADDs a URL or an archive"
    if any("$" in word or "*" in word or "?" in word for word in paths):
        return f"its Dockerfile's {keyword} uses variables or wildcards"
    return sources, paths[-1]


def _inside(environment: Path, source: str) -> Path:
    """`source` under environment/, refused (`SuiteError`) when it leads out of it."""
    path = (environment / source.lstrip("/")).resolve()
    base = environment.resolve()
    if path != base and base not in path.parents:
        raise SuiteError(f"{environment / 'Dockerfile'}: {source} lies outside environment/")
    if not path.exists():
        raise SuiteError(f"{environment / 'Dockerfile'}: {source} does not exist")
    return path


def _relative_copies(plan: _Plan, copies: list[tuple[Path, str, bool]]) -> _Plan | str:
    for source, target, into_folder in copies:
        if plan.workdir is None:
            return f"its Dockerfile copies {source.name} to {target} and sets no WORKDIR"
        try:
            relative = PurePosixPath(target).relative_to(plan.workdir)
        except ValueError:
            return f"its Dockerfile copies files to {target}, outside its WORKDIR {plan.workdir}"
        if source.is_file() and into_folder:
            relative = relative / source.name
        plan.copies.append((source, relative))
    return plan


def _stage(folder: Path, plan: _Plan, start: Path, hidden: Path) -> None:
    """The agent's starting folder and the grading files, made afresh."""
    for target in (start, hidden):
        if target.exists():
            shutil.rmtree(target)
    start.mkdir(parents=True)
    for source, relative in plan.copies:
        destination = start / relative
        if source.is_dir():
            shutil.copytree(
                source, destination, symlinks=True, dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("Dockerfile", "__pycache__"),
            )  # fmt: skip
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)
    for link in start.rglob("*"):
        if link.is_symlink():
            raise SuiteError(f"{folder}: environment file {link.name} is a symlink; copy it")
    tests = hidden / ".harbor" / "tests"
    shutil.copytree(folder / "tests", tests, symlinks=True)
    for link in tests.rglob("*"):
        if link.is_symlink():
            raise SuiteError(f"{folder}: tests/{link.name} is a symlink; copy it as a file")
    shipped = sorted(p.relative_to(tests).as_posix() for p in tests.rglob("*") if p.is_file())
    (hidden / ".harbor" / MANIFEST).write_text(json.dumps(shipped), encoding="utf-8")
    shutil.copyfile(VERIFY_SCRIPT, hidden / ".harbor" / "verify.py")


def _instruction(folder: Path, workdir: str | None) -> str:
    text = (folder / "instruction.md").read_text(encoding="utf-8", errors="replace").strip()
    if not workdir or workdir == "/":
        return text
    pattern = re.compile(rf"(?<![\w.$}}/-]){re.escape(workdir.rstrip('/'))}(/?)(?![\w.-])")
    text = pattern.sub(lambda match: "./" if match.group(1) else ".", text)
    return (
        f"(This task was written for a container whose working folder is {workdir}; here that "
        "folder is your workspace, the current folder, and paths under it are written "
        "relative to it.)\n\n" + text
    )


def _test_command(config: TaskToml, workdir: str | None) -> str:
    exports = " ".join(
        f"{name}={shlex.quote(value)}" for name, value in sorted(config.verifier.env.items())
    )
    prefix = f"export {exports}; " if exports else ""
    return f"{prefix}{{python}} .harbor/verify.py {shlex.quote(workdir or '')}"
