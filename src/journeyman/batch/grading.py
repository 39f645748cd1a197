"""Grading: run a task's hidden tests after the agent has stopped, and judge their outcome.

The hidden tests (a folder of files laid over the tree, and/or a unified diff such as a
SWE-bench `test_patch`) never exist in the workspace while the agent runs. An eval grades a
fresh copy of the task with the agent's changes applied, test infrastructure left out
(`batch.pristine`); there `install_hidden_tests` puts them in place, the test command runs, and
`judge` reads the outcome of every test id from pytest's `-rA` summary ("PASSED
tests/test_x.py::test_y"). `grade` does all of it in place, for a tree whose code is trusted.

A task is resolved when every FAIL_TO_PASS test passes and every PASS_TO_PASS test still
passes. A test that does not appear in the output (not collected, collection error, the run
timed out) counts as failed. When a spec lists no test ids at all (exercise folders: "the tests
are the grader"), every test the command reports must pass, at least one must, and the command
must exit 0.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, Field

from journeyman.batch.harbor_reward import RESOLVED_AT as REWARD_RESOLVED_AT
from journeyman.batch.harbor_reward import harbor_reward
from journeyman.core.safe_git import safe_git_command, safe_git_env
from journeyman.tools.sandbox.git_scan import repository_config_names
from journeyman.tools.shell import scrub_env

GradingKind = Literal["swebench", "exercise", "micro", "harbor"]

DEFAULT_GRADE_TIMEOUT = 900.0
"""Seconds the test command may run before its process group is killed."""
KILL_GRACE = 3.0
"""Seconds between SIGTERM and SIGKILL when the test command overruns."""
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
"""Bytes read back from the end of the test output (a runaway test may print gigabytes)."""
TAIL_CHARS = 4_000
"""Characters of test output kept in a `GradeResult`."""

_PASSING = frozenset({"PASSED", "XFAIL", "XPASS"})
_STATUS_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS)\s+(\S.*?)\s*$")


class GradingError(Exception):
    """A grading spec or its hidden tests cannot be used (bad path, patch that does not apply)."""


class GradingSpec(BaseModel):
    """How to decide whether a task was resolved, once the agent has stopped."""

    kind: GradingKind = "micro"
    """Where the task came from: a SWE-bench instance, an exercise folder, the micro-suite, a
    Harbor task (judged by the reward its tests wrote: `batch.harbor_reward`)."""
    test_cmd: str
    """Shell command run in the workspace; `{python}` stands for journeyman's own interpreter."""
    hidden_tests_dir: str | None = None
    """Folder whose files are copied over the workspace before the tests run (absolute path)."""
    test_patch: str | None = None
    """Unified diff applied to the workspace before the tests run (SWE-bench `test_patch`)."""
    fail_to_pass: list[str] = Field(default_factory=list)
    """pytest node ids that fail before the fix and must pass after it."""
    pass_to_pass: list[str] = Field(default_factory=list)
    """pytest node ids that pass before the fix and must still pass after it."""
    timeout_s: float = DEFAULT_GRADE_TIMEOUT
    """Seconds the test command may run before it is killed (counted as failed tests)."""
    base_commit: str | None = None
    """With a git workspace: the agent's diff against this commit is kept as `model_patch`."""


@dataclass
class GradeResult:
    """The outcome of grading one task."""

    resolved: bool
    fail_to_pass: dict[str, bool]
    pass_to_pass: dict[str, bool]
    output_tail: str
    exit_code: int | None = None
    timed_out: bool = False
    error: str | None = None
    tests_seen: dict[str, bool] = field(default_factory=dict)
    model_patch: str | None = None
    """The agent's changes against `base_commit` as graded: test infrastructure left out."""
    tampering: list[dict[str, str]] = field(default_factory=list)
    """The agent's changes to test infrastructure left out of the graded tree: `path`, `why`
    (`batch.tampering`)."""
    reward: float | None = None
    """A Harbor task's reward, as its tests wrote it (None for other suites)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (for results.jsonl)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradeResult:
        """The result a `to_dict` wrote (unknown keys ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


def grade(spec: GradingSpec, workspace: Path) -> GradeResult:
    """Install the hidden tests in `workspace` itself, run `spec.test_cmd` there on the host and
    judge the outcome: for a workspace whose code is trusted (a suite's reference fixes). An
    eval grades the agent's changes in a fresh copy of the task instead, through the agent's
    own check runner and sandbox (`batch.pristine`)."""
    workspace = workspace.resolve()
    if not workspace.is_dir():
        return unresolved(spec, f"workspace {workspace} does not exist")
    model_patch = None
    if spec.base_commit:
        try:
            model_patch = workspace_diff(workspace, spec.base_commit)
        except GradingError as error:
            return unresolved(spec, str(error))
    problem = install_hidden_tests(spec, workspace)
    if problem is not None:
        return unresolved(spec, problem)
    command, root = test_command(spec), workspace
    output, exit_code, timed_out = run_tests(command, root, spec.timeout_s)
    return judge(spec, output, exit_code, timed_out, model_patch)


def install_hidden_tests(spec: GradingSpec, workspace: Path) -> str | None:
    """Lay the hidden tests over `workspace` (the test patch, then the hidden folder); why
    they could not be, or None."""
    try:
        if spec.test_patch:
            apply_test_patch(spec.test_patch, workspace, spec.base_commit)
        if spec.hidden_tests_dir:
            copy_hidden_tests(Path(spec.hidden_tests_dir), workspace)
    except (GradingError, OSError) as error:
        return f"hidden tests not installed: {error}"
    return None


def hidden_test_paths(spec: GradingSpec) -> list[str]:
    """Every file the hidden tests put in place, relative to the task's root."""
    paths = set(patch_paths(spec.test_patch)) if spec.test_patch else set()
    folder = Path(spec.hidden_tests_dir) if spec.hidden_tests_dir else None
    if folder is not None and folder.is_dir():
        for file in folder.rglob("*"):
            if not file.is_dir() and "__pycache__" not in file.parts:
                paths.add(file.relative_to(folder).as_posix())
    return sorted(paths)


GRADING_ENVIRONMENT = (
    'export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:+$PYTEST_ADDOPTS }-rA -p no:cacheprovider" '
    "PYTHONDONTWRITEBYTECODE=1; unset PYTHONPATH; "
)
"""What the test command runs with: pytest's one line per test (`-rA`) and no cache folder
left in the workspace, no bytecode written, no inherited Python path."""


def test_command(spec: GradingSpec) -> str:
    """The shell command that runs the hidden tests (`{python}`: journeyman's interpreter)."""
    return spec.test_cmd.replace("{python}", _quote(sys.executable))


def judge(
    spec: GradingSpec,
    output: str,
    exit_code: int | None,
    timed_out: bool,
    model_patch: str | None,
) -> GradeResult:
    """Whether the tests' output resolves the task (see the module docstring)."""
    if spec.kind == "harbor":
        return _judge_reward(spec, output, exit_code, timed_out, model_patch)
    seen = parse_pytest_results(output)
    fail_to_pass = {test: _passed(test, seen) for test in spec.fail_to_pass}
    pass_to_pass = {test: _passed(test, seen) for test in spec.pass_to_pass}
    if spec.fail_to_pass or spec.pass_to_pass:
        resolved = all(fail_to_pass.values()) and all(pass_to_pass.values())
    else:
        resolved = exit_code == 0 and bool(seen) and all(seen.values())
    return GradeResult(
        resolved=resolved and not timed_out,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        output_tail=output[-TAIL_CHARS:],
        exit_code=exit_code,
        timed_out=timed_out,
        error=f"the tests ran past {spec.timeout_s:g} s and were stopped" if timed_out else None,
        # Every test's outcome is kept only when it is what decided (no ids given): a big
        # repository's full list would bloat each results row.
        tests_seen={} if spec.fail_to_pass or spec.pass_to_pass else seen,
        model_patch=model_patch,
    )


def _judge_reward(
    spec: GradingSpec, output: str, exit_code: int | None, timed_out: bool, patch: str | None
) -> GradeResult:
    reward, problem = harbor_reward(output)
    return GradeResult(
        resolved=not timed_out and reward is not None and reward >= REWARD_RESOLVED_AT,
        fail_to_pass={},
        pass_to_pass={},
        output_tail=output[-TAIL_CHARS:],
        exit_code=exit_code,
        timed_out=timed_out,
        error=f"the tests ran past {spec.timeout_s:g} s and were stopped" if timed_out else problem,
        model_patch=patch,
        reward=reward,
    )


def unresolved(spec: GradingSpec, error: str) -> GradeResult:
    """A task not resolved because it could not be graded, saying why."""
    return GradeResult(
        resolved=False,
        fail_to_pass=dict.fromkeys(spec.fail_to_pass, False),
        pass_to_pass=dict.fromkeys(spec.pass_to_pass, False),
        output_tail="",
        error=error,
    )


def _passed(test: str, seen: dict[str, bool]) -> bool:
    if test in seen:
        return seen[test]
    # A FAILED line may carry " - message" that the plain split could not tell from the id.
    matches = [ok for reported, ok in seen.items() if reported.startswith(test + " - ")]
    return bool(matches) and all(matches)


def parse_pytest_results(output: str) -> dict[str, bool]:
    """Each test id in pytest's `-rA` summary mapped to whether it passed.

    A test reported several times (several pytest runs, a setup error after a pass) counts as
    passed only when every report says so.
    """
    seen: dict[str, bool] = {}
    for line in output.splitlines():
        match = _STATUS_LINE.match(line.strip())
        if match is None:
            continue
        status, rest = match.groups()
        test = rest if status == "PASSED" else rest.split(" - ", 1)[0]
        if "::" not in test and status != "ERROR":
            continue
        ok = status in _PASSING
        seen[test] = seen.get(test, True) and ok
    return seen


def run_tests(command: str, workspace: Path, timeout_s: float) -> tuple[str, int | None, bool]:
    """Run `command` in `workspace` in a new process group: (output, exit code, timed out)."""
    env = scrub_env(os.environ)
    with tempfile.TemporaryFile() as sink:
        process = subprocess.Popen(
            ["/bin/sh", "-c", GRADING_ENVIRONMENT + command],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _stop_group(process)
        size = sink.seek(0, os.SEEK_END)
        sink.seek(max(0, size - MAX_OUTPUT_BYTES))  # the -rA summary is at the end
        output = sink.read().decode("utf-8", errors="replace")
    return output, (None if timed_out else process.returncode), timed_out


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """End the command's whole process group: SIGTERM, then SIGKILL after a grace period.

    Run after the command exits too, so that background processes it left behind go with it.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=KILL_GRACE)
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def safe_relative(path: str) -> PurePosixPath:
    """`path` as a relative path that stays inside its root, or a `GradingError`."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or path.startswith("\\"):
        raise GradingError(f"path {path!r} leaves the workspace")
    return pure


_PATCH_PATH = re.compile(r"^(?:diff --git a/(\S+) b/(\S+)|(?:---|\+\+\+) (\S+))")


def patch_paths(patch: str) -> list[str]:
    """Every file path a unified diff names (without its a/ or b/ prefix, /dev/null skipped)."""
    paths: list[str] = []
    for line in patch.splitlines():
        match = _PATCH_PATH.match(line)
        if match is None:
            continue
        for raw in match.groups():
            if raw is None or raw == "/dev/null":
                continue
            name = raw[2:] if raw[:2] in ("a/", "b/") else raw
            paths.append(name)
    return paths


def check_patch_paths(patch: str) -> None:
    """Raise `GradingError` when a patch names a path outside the workspace."""
    for path in patch_paths(patch):
        safe_relative(path)


def apply_test_patch(patch: str, workspace: Path, base_commit: str | None = None) -> None:
    """Apply a unified diff of hidden tests to `workspace` with `git apply`.

    When it does not apply as is (the agent changed a file it touches), those files are first
    put back as they were at `base_commit` (else HEAD), or removed if they did not exist."""
    check_patch_paths(patch)
    for path in patch_paths(patch):
        refuse_symlinked_parents(workspace, safe_relative(path))
    first = _git_apply(patch, workspace)
    if first.returncode == 0:
        return
    # The agent may have written to the same test files; the hidden version wins.
    _restore_patch_targets(patch, workspace, base_commit or "HEAD")
    retry = _git_apply(patch, workspace)
    if retry.returncode != 0:
        message = (retry.stderr or first.stderr).strip().splitlines()
        raise GradingError(f"the test patch does not apply: {' '.join(message[:3])}")


def _safe_git(workspace: Path, *args: str) -> list[str]:
    """git with the safe overrides and the filters of the workspace's repository emptied: what
    the agent's commands left in its configuration runs nothing here."""
    return safe_git_command(*args, config_names=repository_config_names(workspace))


def _git_apply(patch: str, workspace: Path) -> subprocess.CompletedProcess[str]:
    # Without a ceiling, a workspace without .git inside another repository would make git
    # apply the patch relative to that outer repository (and silently skip paths).
    env = {**safe_git_env(os.environ), "GIT_CEILING_DIRECTORIES": str(workspace.parent)}
    return subprocess.run(
        _safe_git(workspace, "apply", "--whitespace=nowarn", "-"),
        input=patch if patch.endswith("\n") else patch + "\n",
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _restore_patch_targets(patch: str, workspace: Path, revision: str) -> None:
    """Put the files a test patch touches back as they were at `revision` (one at a time: a
    file the patch creates is not in `revision` and is simply removed)."""
    env = {**safe_git_env(os.environ), "GIT_CEILING_DIRECTORIES": str(workspace.parent)}
    names = repository_config_names(workspace)
    for path in sorted(set(patch_paths(patch))):
        target = workspace / path
        if target.is_symlink() or target.is_file():
            target.unlink()
        subprocess.run(
            safe_git_command("checkout", revision, "--", path, config_names=names),
            cwd=workspace,
            env=env,
            capture_output=True,
            check=False,
        )


def refuse_symlinked_parents(workspace: Path, relative: PurePosixPath) -> None:
    """Refuse a destination whose parent folders lead out of the workspace through a symlink."""
    parent = (workspace / relative).parent
    try:
        resolved = parent.resolve()
    except OSError as error:
        raise GradingError(f"cannot resolve {relative}: {error}") from error
    if resolved != workspace and workspace not in resolved.parents:
        raise GradingError(f"{relative} would be written outside the workspace (symlinked folder)")


def copy_hidden_tests(source: Path, workspace: Path) -> None:
    """Lay every file under `source` over `workspace`, replacing what the agent left there."""
    if not source.is_dir():
        raise GradingError(f"hidden tests folder {source} does not exist")
    for file in sorted(source.rglob("*")):
        if file.is_dir() or "__pycache__" in file.parts:
            continue
        if file.is_symlink():
            raise GradingError(f"hidden test {file} is a symlink; only plain files are copied")
        relative = safe_relative(file.relative_to(source).as_posix())
        refuse_symlinked_parents(workspace, relative)
        target = workspace / relative
        if target.is_symlink() or (target.exists() and not target.is_file()):
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)


NOT_CHANGES = (
    ":(exclude,glob)**/__pycache__/**",
    ":(exclude,glob)**/*.pyc",
    ":(exclude,glob)**/.pytest_cache/**",
)
"""Byproducts of running the code, never part of the agent's patch (even without .gitignore)."""


def workspace_diff(workspace: Path, base_commit: str) -> str:
    """Every change in `workspace` against `base_commit` as a git diff, new files included.

    Uses a throwaway index, so the workspace's own index and history are left alone and
    commits the agent made are part of the diff.
    """
    with tempfile.TemporaryDirectory() as scratch:
        env = {
            **safe_git_env(os.environ),
            "GIT_INDEX_FILE": str(Path(scratch) / "index"),
            "GIT_CEILING_DIRECTORIES": str(workspace.parent),
        }
        steps = (
            _safe_git(workspace, "read-tree", base_commit),
            _safe_git(workspace, "add", "--all", "--", ".", *NOT_CHANGES),
            _safe_git(
                workspace,
                *("diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv"),
                base_commit,
            ),
        )
        output = ""
        for step in steps:
            result = subprocess.run(
                step, cwd=workspace, env=env, capture_output=True, text=True, check=False
            )
            if result.returncode != 0:
                detail = result.stderr.strip().splitlines()[:1]
                raise GradingError(
                    f"cannot diff {workspace} against {base_commit}: {' '.join(detail)}"
                )
            output = result.stdout
    return output
