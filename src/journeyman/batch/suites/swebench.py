"""SWE-bench-format suites: one JSON object per line, repositories available locally.

A line holds `instance_id`, `repo` (a local git repository: absolute, or relative to the
JSONL file), `base_commit`, `problem_statement`, `FAIL_TO_PASS` and `PASS_TO_PASS` (lists, or
JSON-encoded lists as the published datasets store them), optionally `test_patch` (the hidden
tests, applied only after the agent stops), `setup`, `version`, and `test_cmd`: a string, or a
map from `version` to a string (a `"default"` key is used for versions it does not name). A
suite-wide map can be given instead (`test_cmds`: `repo` -> command, or `repo` -> version ->
command). Without any test command, the tests run with `python -m pytest` on the files the
test ids name.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from journeyman.batch.grading import GradingError, GradingSpec, check_patch_paths
from journeyman.batch.suites.errors import SuiteError, suite_image
from journeyman.batch.task_file import TASK_ID, BatchTask, TaskFileError, check_workspaces

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "FAIL_TO_PASS")

TestCommands = dict[str, str | dict[str, str]]
"""A suite-wide test command map: repo -> command, or repo -> version -> command."""


def looks_like_swebench(first_record: dict[str, Any]) -> bool:
    """True when a JSONL record has SWE-bench's shape rather than a plain batch task's."""
    return "instance_id" in first_record


def load_swebench(path: Path, test_cmds: TestCommands | None = None) -> list[BatchTask]:
    """The instances of a SWE-bench JSONL file as batch tasks graded by their tests."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"cannot read SWE-bench file {path}: {error}") from None
    tasks: list[BatchTask] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            message = f"{where}: not valid JSON ({error.msg}, column {error.colno})"
            raise SuiteError(message) from None
        if not isinstance(record, dict):
            raise SuiteError(f"{where}: expected a JSON object per line")
        task = _instance(record, where, path.parent, test_cmds or {})
        if task.id in seen:
            earlier = seen[task.id]
            raise SuiteError(f"{where}: instance {task.id!r} already appears on line {earlier}")
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise SuiteError(f"SWE-bench file {path} holds no instance")
    try:  # every base_commit must be in its repository: say so now, not when the task starts
        check_workspaces([(f"{path}:{seen[task.id]}", task) for task in tasks])
    except TaskFileError as error:
        raise SuiteError(error.message) from None
    return tasks


def _instance(record: dict[str, Any], where: str, base: Path, test_cmds: TestCommands) -> BatchTask:
    missing = [key for key in REQUIRED if record.get(key) in (None, "")]
    if missing:
        raise SuiteError(f"{where}: missing field(s) {', '.join(missing)}")
    instance_id = str(record["instance_id"])
    if not TASK_ID.match(instance_id):
        raise SuiteError(f"{where}: instance_id {instance_id!r} cannot name a task folder")
    repo = Path(str(record["repo"])).expanduser()
    repo = (base / repo if not repo.is_absolute() else repo).resolve()
    if not (repo / ".git").exists():
        raise SuiteError(
            f"{where}: repo {record['repo']!r} is not a local git repository ({repo}); "
            "clone it and give its path"
        )
    fail_to_pass = _test_list(record["FAIL_TO_PASS"], "FAIL_TO_PASS", where)
    pass_to_pass = _test_list(record.get("PASS_TO_PASS", []), "PASS_TO_PASS", where)
    if not fail_to_pass:
        raise SuiteError(f"{where}: FAIL_TO_PASS is empty; nothing would say the issue is fixed")
    test_patch = record.get("test_patch") or None
    if test_patch is not None:
        if not isinstance(test_patch, str):
            raise SuiteError(f"{where}: test_patch must be a unified diff (a string)")
        try:
            check_patch_paths(test_patch)
        except GradingError as error:
            raise SuiteError(f"{where}: test_patch: {error}") from None
    command = _test_command(record, where, test_cmds, fail_to_pass + pass_to_pass)
    grading = GradingSpec(
        kind="swebench",
        test_cmd=command,
        test_patch=test_patch,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        base_commit=str(record["base_commit"]),
    )
    setup = record.get("setup")
    return BatchTask(
        id=instance_id,
        task=str(record["problem_statement"]),
        workspace=str(repo),
        base_commit=str(record["base_commit"]),
        setup=str(setup) if setup else None,
        grading=grading,
        image=suite_image(record.get("image"), where),
    )


def _test_list(value: Any, name: str, where: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise SuiteError(f"{where}: {name} is neither a list nor a JSON-encoded list") from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SuiteError(f"{where}: {name} must be a list of test ids (strings)")
    return list(value)


def _test_command(
    record: dict[str, Any], where: str, test_cmds: TestCommands, tests: list[str]
) -> str:
    version = str(record.get("version", ""))
    own = record.get("test_cmd")
    if own is None:
        own = test_cmds.get(str(record["repo"]))
    if isinstance(own, dict):
        chosen = own.get(version, own.get("default"))
        if not isinstance(chosen, str):
            raise SuiteError(
                f"{where}: the test command map has no entry for version {version!r} "
                '(and no "default")'
            )
        return chosen
    if isinstance(own, str) and own.strip():
        return own
    if own is not None:
        raise SuiteError(f"{where}: test_cmd must be a command (string) or a version map")
    files = sorted({test.split("::", 1)[0] for test in tests})
    return " ".join(["python -m pytest", *(shlex.quote(file) for file in files)])
