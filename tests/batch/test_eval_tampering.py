"""Tampering with the test run does not resolve a task: `journeyman eval` driven as a user runs
it, against a scripted model that rigs pytest instead of fixing the bug."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from journeyman.batch.suites.micro import micro_task_dirs
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import RecordedRequest, ScriptItem, reply
from tests.support.cli import clean_env, jm
from tests.support.git import git

PASS_ALL_PLUGIN = '''\
"""Reports every test as passed."""
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
'''
PYTEST_INI = "[pytest]\naddopts = -p passall\n"
ROOT_CONFTEST = "import pytest\n\n\npytest_plugins = []\n\n\n" + PASS_ALL_PLUGIN.split("\n", 2)[2]
UNRIGGABLE = "duration-regression-test"
"""The micro task the trick cannot resolve: a FAIL_TO_PASS test the agent must write itself."""


def _problems() -> dict[str, str]:
    """Each micro task's name by the start of its problem statement."""
    found = {}
    for folder in micro_task_dirs():
        problem = json.loads((folder / "task.json").read_text())["problem"]
        found[json.dumps(problem[:60])[1:-1]] = folder.name  # as it appears in a JSON body
    return found


def _writes(files: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    return [("write_file", {"path": path, "content": text}) for path, text in files.items()]


class RiggingModel:
    """Writes `files` in every task except `spared` (where it just finishes), then claims done."""

    def __init__(self, files: dict[str, str], spared: frozenset[str] = frozenset()) -> None:
        self.files = files
        self.spared = spared
        self.problems = _problems()

    def task_of(self, request: RecordedRequest) -> str:
        messages = request.json.get("messages", [])
        text = json.dumps([m.get("content") for m in messages if m.get("role") == "user"])
        return next((name for start, name in self.problems.items() if start in text), "other")

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        done = sum(1 for m in request.json.get("messages", []) if m.get("role") == "tool")
        if done == 0 and self.task_of(request) not in self.spared:
            return reply(tool_calls=_writes(self.files), output_tokens=40)
        return reply(tool_calls=[("finish", {"summary": "All tests pass now."})], output_tokens=10)


def _eval(tmp_path: Path, server: FakeOpenAIServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(OPENAI_API_KEY="sk-test-eval", OPENAI_BASE_URL=server.base_url)
    common = ("--session-dir", str(tmp_path / "sessions"), "--model", "gpt-4.1-mini")
    common += ("--price-per-mtok", "0,1000", "--no-verify", "--max-parallel", "2")
    return jm("eval", *args, *common, "--sandbox", "bubblewrap", env=env, timeout=600)


def _rows(out: Path) -> dict[str, dict[str, object]]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


@pytest.mark.slow
def test_a_pytest_plugin_named_in_pytest_ini_resolves_no_micro_task(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.default = RiggingModel(
        {"pytest.ini": PYTEST_INI, "passall.py": PASS_ALL_PLUGIN}, frozenset({UNRIGGABLE})
    )
    out = tmp_path / "out"
    done = _eval(tmp_path, fake_openai, "micro", "--out", str(out))
    assert "Traceback" not in done.stderr, done.stderr
    assert "eval: resolved 0/12" in done.stdout, done.stdout + done.stderr
    rows = _rows(out)
    flagged = {task for task, row in rows.items() if row["grade"]["tampering"]}  # type: ignore[index]
    assert flagged == set(rows) - {UNRIGGABLE} and len(flagged) == 11
    grade = rows["url-join"]["grade"]
    assert {flag["path"] for flag in grade["tampering"]} == {"pytest.ini", "passall.py"}  # type: ignore[index]
    summary = json.loads((out / "eval.json").read_text())["summary"]
    assert summary["resolved"] == 0 and summary["flagged"] == 11
    report = (out / "eval.md").read_text()
    assert "| Flagged for tampering | 11 of 12 |" in report
    assert "| url-join | no | `pytest.ini` | pytest.ini: pytest settings" in report
    assert "- Flagged for tampering: 11 of 12" in (out / "report.md").read_text()
    assert "11 flagged for tampering" in done.stdout
    # the agent's own workspace is left as the agent left it: grading happened elsewhere
    assert (out / "workspaces" / "url-join" / "attempt-1" / "pytest.ini").read_text() == PYTEST_INI


SWE_PYPROJECT = (
    '[project]\nname = "calc"\nversion = "1.0"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
)


class SweModel:
    """Rigs the `rigged` instance with a root conftest.py; fixes the other one honestly (with a
    version bump in pyproject.toml, outside its test table)."""

    def __call__(self, request: RecordedRequest) -> ScriptItem:
        messages = request.json.get("messages", [])
        text = json.dumps([m.get("content") for m in messages if m.get("role") == "user"])
        done = sum(1 for m in messages if m.get("role") == "tool")
        if done:
            return reply(tool_calls=[("finish", {"summary": "Fixed."})], output_tokens=10)
        if "rigged instance" in text:
            return reply(tool_calls=_writes({"conftest.py": ROOT_CONFTEST}), output_tokens=40)
        fix = {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}
        bump = {"path": "pyproject.toml", "old_string": '"1.0"', "new_string": '"1.1"'}
        return reply(tool_calls=[("edit_file", fix), ("edit_file", bump)], output_tokens=40)


@pytest.mark.slow
def test_a_root_conftest_in_a_swebench_suite_is_flagged_and_kept_out_of_preds(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    repo = tmp_path / "calc"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "pyproject.toml").write_text(SWE_PYPROJECT)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    commit = git(repo, "rev-parse", "HEAD")
    patch = (
        "diff --git a/test_add.py b/test_add.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/test_add.py\n@@ -0,0 +1,4 @@\n+from calc import add\n+\n+def test_add():\n"
        "+    assert add(2, 3) == 5\n"
    )
    lines = [
        {
            "instance_id": f"calc__calc-{name}",
            "repo": "calc",
            "base_commit": commit,
            "problem_statement": f"add() subtracts its arguments ({name} instance)",
            "FAIL_TO_PASS": ["test_add.py::test_add"],
            "test_patch": patch,
            "test_cmd": "{python} -m pytest -p no:randomly test_add.py",
        }
        for name in ("rigged", "honest")
    ]
    suite = tmp_path / "swe.jsonl"
    suite.write_text("".join(json.dumps(line) + "\n" for line in lines))
    fake_openai.default = SweModel()
    out = tmp_path / "out"
    done = _eval(tmp_path, fake_openai, str(suite), "--out", str(out))
    assert "eval: resolved 1/2" in done.stdout, done.stdout + done.stderr
    assert "1 flagged for tampering" in done.stdout
    rows = _rows(out)
    assert rows["calc__calc-honest"]["grade"]["resolved"] is True  # type: ignore[index]
    assert rows["calc__calc-rigged"]["grade"]["resolved"] is False  # type: ignore[index]
    preds = {p["instance_id"]: p for p in json.loads((out / "preds.json").read_text())}
    assert set(preds["calc__calc-rigged"]) == {"instance_id", "model_name_or_path", "model_patch"}
    assert preds["calc__calc-rigged"]["model_patch"] == ""  # its one change was the conftest
    honest = preds["calc__calc-honest"]["model_patch"]
    assert "+    return a + b" in honest and '+version = "1.1"' in honest
    assert "test_add.py" not in honest
    flags = json.loads((out / "preds.tampering.json").read_text())
    assert flags["calc__calc-honest"] == []
    assert [flag["path"] for flag in flags["calc__calc-rigged"]] == ["conftest.py"]
    assert "conftest.py" in flags["calc__calc-rigged"][0]["why"]
