"""Suite loaders: the micro-suite, SWE-bench JSONL, exercise folders, and hostile input."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from journeyman.batch.grading import GradingSpec, grade
from journeyman.batch.suites import SuiteError, load_suite, suite_kind
from journeyman.batch.suites.micro import micro_root
from tests.support.git import git


def _buggy_repo(root: Path) -> tuple[Path, str]:
    repo = root / "calc-repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(
        "def add(a, b):\n    return a - b\n\n\ndef one():\n    return 1\n"
    )
    (repo / "conftest.py").write_text("")
    (repo / "tests" / "test_one.py").write_text(
        "from calc import one\n\n\ndef test_one():\n    assert one() == 1\n"
    )
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    return repo, git(repo, "rev-parse", "HEAD")


TEST_PATCH = (
    "diff --git a/tests/test_add.py b/tests/test_add.py\n"
    "new file mode 100644\n"
    "--- /dev/null\n"
    "+++ b/tests/test_add.py\n"
    "@@ -0,0 +1,5 @@\n"
    "+from calc import add\n"
    "+\n"
    "+\n"
    "+def test_add():\n"
    "+    assert add(2, 3) == 5\n"
)


def _instance(repo: Path, commit: str, **overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "instance_id": "calc__calc-1",
        "repo": str(repo),
        "base_commit": commit,
        "problem_statement": "add() subtracts instead of adding.",
        "FAIL_TO_PASS": json.dumps(["tests/test_add.py::test_add"]),
        "PASS_TO_PASS": json.dumps(["tests/test_one.py::test_one"]),
        "test_patch": TEST_PATCH,
        "test_cmd": "{python} -m pytest -q tests",
    }
    record.update(overrides)
    return record


def _jsonl(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


# micro ---------------------------------------------------------------------------------------


def test_micro_loads_as_graded_tasks_whose_workspace_has_no_hidden_tests() -> None:
    tasks = load_suite("micro")
    assert len(tasks) >= 12
    for task in tasks:
        assert task.grading is not None
        spec = GradingSpec.model_validate(task.grading)
        assert spec.kind == "micro" and spec.fail_to_pass and spec.hidden_tests_dir
        workspace = Path(task.workspace)
        assert workspace.is_dir() and workspace.parent == Path(spec.hidden_tests_dir).parent
        hidden = Path(spec.hidden_tests_dir)
        assert not hidden.is_relative_to(workspace)
        for test in spec.fail_to_pass:
            assert test.split("::")[0].startswith("tests/")


def test_micro_suite_is_package_data() -> None:
    assert micro_root().is_dir()
    assert (micro_root() / "url-join" / "task.json").is_file()


def test_a_micro_format_folder_of_ones_own(tmp_path: Path) -> None:
    shutil.copytree(micro_root() / "url-join", tmp_path / "suite" / "url-join")
    tasks = load_suite(tmp_path / "suite")
    assert [task.id for task in tasks] == ["url-join"]
    assert suite_kind(tmp_path / "suite") == "micro-folder"


def test_a_micro_format_task_with_a_symlink_leaving_it_is_refused(tmp_path: Path) -> None:
    task = tmp_path / "suite" / "url-join"
    shutil.copytree(micro_root() / "url-join", task)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the agent\n")
    (task / "repo" / "notes.txt").symlink_to(secret)
    with pytest.raises(SuiteError, match="is a symlink"):
        load_suite(tmp_path / "suite")


def test_a_micro_format_task_missing_its_hidden_tests_is_refused(tmp_path: Path) -> None:
    task = tmp_path / "suite" / "url-join"
    shutil.copytree(micro_root() / "url-join", task)
    shutil.rmtree(task / "hidden")
    with pytest.raises(SuiteError, match="missing the hidden/ folder"):
        load_suite(tmp_path / "suite")
    (task / "task.json").write_text('{"problem": "x"}')
    with pytest.raises(SuiteError, match="missing field 'fail_to_pass'"):
        load_suite(tmp_path / "suite")


# SWE-bench -------------------------------------------------------------------------------------


def test_swebench_jsonl_loads_with_encoded_lists(tmp_path: Path) -> None:
    repo, commit = _buggy_repo(tmp_path)
    suite = _jsonl(tmp_path / "suite.jsonl", _instance(repo, commit))
    [task] = load_suite(suite)
    assert task.id == "calc__calc-1"
    assert task.workspace == str(repo) and task.base_commit == commit
    assert task.task.startswith("add() subtracts")
    spec = GradingSpec.model_validate(task.grading)
    assert spec.kind == "swebench" and spec.base_commit == commit
    assert spec.fail_to_pass == ["tests/test_add.py::test_add"]
    assert spec.pass_to_pass == ["tests/test_one.py::test_one"]
    assert spec.test_patch == TEST_PATCH
    assert "test_add" not in task.task


def test_swebench_grading_end_to_end_keeps_the_test_patch_out_of_model_patch(
    tmp_path: Path,
) -> None:
    repo, commit = _buggy_repo(tmp_path)
    [task] = load_suite(_jsonl(tmp_path / "suite.jsonl", _instance(repo, commit)))
    spec = GradingSpec.model_validate(task.grading)
    workspace = tmp_path / "work"
    git(repo, "worktree", "add", "-q", "--detach", str(workspace), commit)
    assert not (workspace / "tests" / "test_add.py").exists()

    unfixed = grade(spec, workspace)
    assert not unfixed.resolved and unfixed.model_patch == ""
    git(workspace, "checkout", "-q", "--", ".")
    (workspace / "tests" / "test_add.py").unlink()

    (workspace / "calc.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef one():\n    return 1\n"
    )
    (workspace / "NOTES.md").write_text("fixed add\n")
    (workspace / "__pycache__").mkdir(exist_ok=True)
    (workspace / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\x00compiled")
    git(workspace, "add", "calc.py")
    git(workspace, "commit", "-qm", "the agent commits its fix")
    fixed = grade(spec, workspace)
    assert fixed.resolved, fixed.output_tail
    assert fixed.model_patch is not None
    assert "+    return a + b" in fixed.model_patch and "NOTES.md" in fixed.model_patch
    assert "test_add.py" not in fixed.model_patch and "__pycache__" not in fixed.model_patch
    check = subprocess.run(
        ["git", "apply", "--check", "-"],
        input=fixed.model_patch,
        text=True,
        cwd=repo,
        capture_output=True,
    )
    assert check.returncode == 0, check.stderr


def test_swebench_test_command_map_by_version(tmp_path: Path) -> None:
    repo, commit = _buggy_repo(tmp_path)
    records = [
        _instance(repo, commit, version="1.0", test_cmd={"1.0": "pytest -x", "default": "pytest"}),
        _instance(repo, commit, instance_id="calc__calc-2", version="2.0", test_cmd=None),
    ]
    suite = _jsonl(tmp_path / "suite.jsonl", *records)
    first, second = load_suite(suite, test_cmds={str(repo): {"2.0": "make test"}})
    assert GradingSpec.model_validate(first.grading).test_cmd == "pytest -x"
    assert GradingSpec.model_validate(second.grading).test_cmd == "make test"


def test_swebench_default_command_runs_the_named_test_files(tmp_path: Path) -> None:
    repo, commit = _buggy_repo(tmp_path)
    suite = _jsonl(tmp_path / "s.jsonl", _instance(repo, commit, test_cmd=None))
    [task] = load_suite(suite)
    command = GradingSpec.model_validate(task.grading).test_cmd
    assert command == "python -m pytest tests/test_add.py tests/test_one.py"


def test_swebench_relative_repo_is_read_from_the_suite_folder(tmp_path: Path) -> None:
    repo, commit = _buggy_repo(tmp_path)
    record = _instance(repo, commit)
    record["repo"] = repo.name
    [task] = load_suite(_jsonl(tmp_path / "s.jsonl", record))
    assert task.workspace == str(repo)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"problem_statement": None}, "missing field(s) problem_statement"),
        ({"FAIL_TO_PASS": "not json"}, "FAIL_TO_PASS is neither a list"),
        ({"FAIL_TO_PASS": "[]"}, "FAIL_TO_PASS is empty"),
        ({"PASS_TO_PASS": [1, 2]}, "PASS_TO_PASS must be a list of test ids"),
        ({"repo": "/nonexistent/repo"}, "is not a local git repository"),
        ({"instance_id": "../escape"}, "cannot name a task folder"),
        ({"test_cmd": {"9.9": "pytest"}}, "no entry for version"),
        (
            {"test_patch": TEST_PATCH.replace("tests/test_add.py", "../outside.py")},
            "leaves the workspace",
        ),
        (
            {"test_patch": TEST_PATCH.replace("b/tests/test_add.py", "/etc/cron.d/x")},
            "leaves the workspace",
        ),
    ],
    ids=[
        "missing",
        "bad-list",
        "empty-f2p",
        "non-string-ids",
        "no-repo",
        "bad-id",
        "no-version",
        "patch-dotdot",
        "patch-absolute",
    ],
)
def test_swebench_hostile_or_broken_lines_are_refused_with_the_line(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    repo, commit = _buggy_repo(tmp_path)
    second = _instance(repo, commit, instance_id="calc__calc-2")
    second.update(overrides)
    suite = _jsonl(tmp_path / "s.jsonl", _instance(repo, commit), second)
    with pytest.raises(SuiteError) as raised:
        load_suite(suite)
    assert f"{suite}:2:" in raised.value.message
    assert message in raised.value.message


def test_swebench_duplicate_ids_and_bad_json_are_refused(tmp_path: Path) -> None:
    repo, commit = _buggy_repo(tmp_path)
    twice = _jsonl(tmp_path / "twice.jsonl", _instance(repo, commit), _instance(repo, commit))
    with pytest.raises(SuiteError, match="already appears on line 1"):
        load_suite(twice)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(_instance(repo, commit)) + "\n{not json\n")
    with pytest.raises(SuiteError, match=r"broken\.jsonl:2: not valid JSON"):
        load_suite(broken)


def test_unknown_suite_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="does not exist: give `micro`"):
        load_suite(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(SuiteError, match="is empty"):
        load_suite(tmp_path / "empty.jsonl")


# exercises -------------------------------------------------------------------------------------


def _exercise(root: Path, name: str, *, solved: bool = False) -> Path:
    folder = root / name
    (folder / ".docs").mkdir(parents=True)
    (folder / ".docs" / "instructions.md").write_text(f"# {name}\n\nReturn the square of n.\n")
    body = "return n * n" if solved else "pass"
    (folder / f"{name}.py").write_text(f"def square(n):\n    {body}\n")
    (folder / f"{name}_test.py").write_text(
        f"from {name} import square\n\n\ndef test_square():\n    assert square(3) == 9\n"
    )
    return folder


def test_exercise_folders_hide_their_tests_until_grading(tmp_path: Path) -> None:
    _exercise(tmp_path / "suite", "square")
    _exercise(tmp_path / "suite", "cube")
    tasks = load_suite(tmp_path / "suite", staging=tmp_path / "staging")
    assert [task.id for task in tasks] == ["cube", "square"]
    task = tasks[1]
    workspace = Path(task.workspace)
    assert (workspace / "square.py").is_file()
    assert not (workspace / "square_test.py").exists()
    assert "Return the square of n." in task.task and "square_test.py" in task.task
    spec = GradingSpec.model_validate(task.grading)
    assert spec.kind == "exercise" and not spec.fail_to_pass
    copy = tmp_path / "attempt"
    shutil.copytree(workspace, copy)
    assert not grade(spec, copy).resolved
    (copy / "square.py").write_text("def square(n):\n    return n * n\n")
    assert grade(spec, copy).resolved


def test_exercise_config_naming_a_test_outside_is_refused(tmp_path: Path) -> None:
    folder = _exercise(tmp_path / "suite", "square")
    (folder / ".meta").mkdir()
    (folder / ".meta" / "config.json").write_text(
        json.dumps({"files": {"test": ["../../secrets_test.py"]}})
    )
    with pytest.raises(SuiteError, match="leaves the exercise folder"):
        load_suite(tmp_path / "suite", staging=tmp_path / "staging")


def test_exercise_test_symlinked_outside_is_refused(tmp_path: Path) -> None:
    folder = _exercise(tmp_path / "suite", "square")
    outside = tmp_path / "elsewhere_test.py"
    outside.write_text("def test_x():\n    pass\n")
    (folder / "extra_test.py").symlink_to(outside)
    with pytest.raises(SuiteError, match="outside the exercise folder"):
        load_suite(tmp_path / "suite", staging=tmp_path / "staging")


def test_a_folder_without_exercises_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "suite" / "nothing").mkdir(parents=True)
    with pytest.raises(SuiteError, match="holds no exercise"):
        load_suite(tmp_path / "suite", staging=tmp_path / "staging")


def test_swebench_base_commit_missing_from_its_repository_is_refused_with_the_line(
    tmp_path: Path,
) -> None:
    repo, commit = _buggy_repo(tmp_path)
    suite = _jsonl(
        tmp_path / "s.jsonl",
        _instance(repo, commit),
        _instance(repo, "1" * 40, instance_id="lost-1"),
    )
    with pytest.raises(SuiteError) as refused:
        load_suite(suite)
    message = refused.value.message
    assert message.startswith(f"{suite}:2: task lost-1: its base_commit {'1' * 40} is not there")
