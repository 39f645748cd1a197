"""`journeyman eval` as a user runs it: a subprocess against the fake OpenAI server."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from journeyman.batch.results import TaskResult
from journeyman.batch.suites.micro import micro_root
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, reply
from tests.support.cli import clean_env, journeyman
from tests.support.git import git

FIXES = {
    # task: (file, buggy text, fixed text)
    "url-join": (
        "apiclient/urls.py",
        'return base + "/" + path',
        'return base.rstrip("/") + "/" + path.lstrip("/")',
    ),
    "inventory-reorder": (
        "inventory/items.py",
        "return self.quantity < self.reorder_level",
        "return self.quantity <= self.reorder_level",
    ),
}
SWE_FIX = ("calc.py", "return a - b", "return a + b")
MARKERS = {
    "url-join": "api.example.com",
    "inventory-reorder": "reorder level",
    "square": "square of n",
}
FIXES["square"] = ("square.py", "    pass", "    return n * n")


def _task_of(request: RecordedRequest) -> str:
    messages = request.json.get("messages", [])
    text = json.dumps([m.get("content") for m in messages if m.get("role") == "user"])
    for task, marker in MARKERS.items():
        if marker in text:
            return task
    return "swebench"


class Model:
    """Fixes the tasks in `fixing` with one edit, then finishes; the others it just finishes."""

    def __init__(self, fixing: set[str]) -> None:
        self.fixing = fixing

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        task = _task_of(request)
        tool_results = sum(1 for m in request.json.get("messages", []) if m.get("role") == "tool")
        if task in self.fixing and tool_results == 0:
            path, old, new = FIXES.get(task, SWE_FIX)
            edit = {"path": path, "old_string": old, "new_string": new}
            return reply(tool_calls=[("edit_file", edit)], output_tokens=50)
        return reply(tool_calls=[("finish", {"summary": "done"})], output_tokens=20)


def _suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    for task in ("url-join", "inventory-reorder"):
        shutil.copytree(micro_root() / task, suite / task)
    return suite


def _eval(tmp_path: Path, server: FakeOpenAIServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(OPENAI_API_KEY="sk-test-eval", OPENAI_BASE_URL=server.base_url)
    common = [
        "--session-dir",
        str(tmp_path / "sessions"),
        "--model",
        "gpt-4.1-mini",
        "--price-per-mtok",
        "0,1000",
        "--no-verify",
        "--sandbox",
        "local",
        "--allow-unsandboxed",
        "--max-parallel",
        "2",
    ]
    return journeyman("eval", *args, *common, env=env)


def test_eval_grades_a_two_task_suite_and_compare_tells_the_runs_apart(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    suite = _suite(tmp_path)
    fake_openai.default = Model({"url-join"})
    first = _eval(tmp_path, fake_openai, str(suite), "--out", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    assert "eval: resolved 1/2 (50.0 %" in first.stdout
    rows = {
        row["id"]: row
        for row in map(json.loads, (tmp_path / "a" / "results.jsonl").read_text().splitlines())
    }
    assert rows["url-join"]["grade"]["resolved"] is True
    assert rows["inventory-reorder"]["grade"]["resolved"] is False
    assert rows["inventory-reorder"]["grade"]["fail_to_pass"] == {
        "tests/test_reorder.py::test_item_at_its_level_is_reordered": False,
        "tests/test_reorder.py::test_reorder_list_after_taking_down_to_the_level": False,
    }
    report = (tmp_path / "a" / "eval.md").read_text()
    assert "| Resolved | 1 of 2 (50.0 %) |" in report and "| url-join | yes |" in report
    assert not (tmp_path / "a" / "preds.json").exists()
    # the suite itself is untouched: the agent worked on copies, the hidden tests stayed hidden
    assert 'return base + "/" + path' in (suite / "url-join" / "repo/apiclient/urls.py").read_text()

    fake_openai.default = Model({"url-join", "inventory-reorder"})
    second = _eval(tmp_path, fake_openai, str(suite), "--out", str(tmp_path / "b"))
    assert second.returncode == 0, second.stderr
    assert "eval: resolved 2/2 (100.0 %" in second.stdout

    compared = journeyman(
        "eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"), env=clean_env()
    )
    assert compared.returncode == 0, compared.stderr
    assert "1 won, 0 lost" in compared.stdout
    assert "won by B: inventory-reorder" in compared.stdout
    assert "1/2 resolved (50.0 %" in compared.stdout and "2/2 resolved (100.0 %" in compared.stdout


def test_eval_on_exercise_folders_grades_with_their_tests(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    exercise = tmp_path / "exercises" / "square"
    (exercise / ".docs").mkdir(parents=True)
    (exercise / ".docs" / "instructions.md").write_text("Return the square of n.\n")
    (exercise / "square.py").write_text("def square(n):\n    pass\n")
    (exercise / "square_test.py").write_text(
        "from square import square\n\n\ndef test_square():\n    assert square(4) == 16\n"
    )
    fake_openai.default = Model({"square"})
    done = _eval(tmp_path, fake_openai, str(tmp_path / "exercises"), "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert "eval: resolved 1/1" in done.stdout
    # what the model was shown: the instructions, never the test's text
    shown = json.dumps(fake_openai.requests[0].json["messages"])
    assert "Return the square of n." in shown and "square(4) == 16" not in shown
    staged = tmp_path / "o" / "exercises" / "square"
    assert (staged / "hidden" / "square_test.py").is_file()
    assert not (staged / "start" / "square_test.py").exists()  # the copy the agent starts from


def test_eval_on_a_swebench_file_writes_preds_json(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    repo = tmp_path / "calc"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_base.py").write_text("def test_base():\n    assert True\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    commit = git(repo, "rev-parse", "HEAD")
    patch = (
        "diff --git a/test_add.py b/test_add.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/test_add.py\n@@ -0,0 +1,4 @@\n+from calc import add\n+\n+def test_add():\n"
        "+    assert add(2, 3) == 5\n"
    )
    record = {
        "instance_id": "calc__calc-1",
        "repo": "calc",
        "base_commit": commit,
        "problem_statement": "add() subtracts its arguments",
        "FAIL_TO_PASS": '["test_add.py::test_add"]',
        "PASS_TO_PASS": '["test_base.py::test_base"]',
        "test_patch": patch,
        "test_cmd": "{python} -m pytest -q test_add.py test_base.py",
    }
    suite = tmp_path / "swe.jsonl"
    suite.write_text(json.dumps(record) + "\n")
    fake_openai.default = Model({"swebench"})
    done = _eval(tmp_path, fake_openai, str(suite), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "eval: resolved 1/1" in done.stdout
    preds = json.loads((tmp_path / "out" / "preds.json").read_text())
    assert [set(p) for p in preds] == [{"instance_id", "model_name_or_path", "model_patch"}]
    assert preds[0]["instance_id"] == "calc__calc-1"
    assert preds[0]["model_name_or_path"] == "gpt-4.1-mini"
    assert "+    return a + b" in preds[0]["model_patch"]
    assert "test_add.py" not in preds[0]["model_patch"]
    assert git(repo, "status", "--porcelain") == ""  # the original repository is untouched


def test_bad_suites_and_compare_arguments_exit_2_without_a_traceback(tmp_path: Path) -> None:
    env = clean_env()
    missing = journeyman("eval", str(tmp_path / "nope.jsonl"), env=env)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text(json.dumps({"instance_id": "x", "repo": "/", "base_commit": "a"}) + "\n")
    refused = journeyman("eval", str(hostile), env=env)
    assert refused.returncode == 2 and f"{hostile}:1: missing field(s)" in refused.stderr
    one = journeyman("eval", "compare", str(tmp_path), env=env)
    assert one.returncode == 2 and "two run folders" in one.stderr
    not_runs = journeyman("eval", "compare", str(tmp_path), str(tmp_path), env=env)
    assert not_runs.returncode == 2 and "holds no results.jsonl" in not_runs.stderr
    bad_map = tmp_path / "cmds.json"
    bad_map.write_text('{"repo": 3}')
    refused_map = journeyman("eval", "micro", "--test-cmds", str(bad_map), env=env)
    assert refused_map.returncode == 2 and "expected an object" in refused_map.stderr
    extra = journeyman("eval", "micro", "surplus", env=env)
    assert extra.returncode == 2 and "unexpected argument" in extra.stderr
    for done in (missing, refused, one, not_runs, refused_map, extra):
        assert "Traceback" not in done.stderr


def test_help_explains_suites_and_compare() -> None:
    shown = journeyman("eval", "--help", env=clean_env(COLUMNS="200"))
    assert shown.returncode == 0
    for phrase in ("micro", "SWE-bench", "compare RUN_A RUN_B", "--global-budget-usd", "Wilson"):
        assert phrase in shown.stdout, phrase


def test_eval_refuses_what_is_not_an_eval_before_running_anything(tmp_path: Path) -> None:
    env = clean_env()
    plain = tmp_path / "tasks.jsonl"
    lines = [{"id": f"t{i}", "task": "fix it", "workspace": str(tmp_path)} for i in range(4)]
    plain.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ungraded = journeyman("eval", str(plain), "--out", str(tmp_path / "e"), env=env)
    assert ungraded.returncode == 2, ungraded.stdout
    assert "not an eval suite" in ungraded.stderr and "4 of its 4 tasks" in ungraded.stderr
    assert "journeyman batch" in ungraded.stderr and "grading" in ungraded.stderr
    for run in ("a", "b"):  # two plain batch runs: results, no grading
        (tmp_path / run).mkdir()
        row = TaskResult("t1", "succeeded", "completed", 0.1, 1, 1.0, 1, True, None)
        (tmp_path / run / "results.jsonl").write_text(row.to_json() + "\n")
    compared = journeyman("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"), env=env)
    assert compared.returncode == 2 and "is not an eval run" in compared.stderr
    cmds = tmp_path / "tc.json"
    cmds.write_text('{"some/repo": "pytest"}')
    micro = journeyman(
        "eval", "micro", "--test-cmds", str(cmds), "--out", str(tmp_path / "m"), env=env
    )
    assert micro.returncode == 2 and "SWE-bench suites only" in micro.stderr
    for done in (ungraded, compared, micro):
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "e").exists() and not (tmp_path / "m").exists()
