"""Exit 0 only with a receipt: `journeyman run` as a user runs it, against the fake server, on
small repositories of the commonest shapes, with a model that fixes the bug, one that only
talks, and one that tampers with the check instead of fixing the code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, jm

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
PYTEST_TESTS = (
    "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
)
UNITTEST_TESTS = (
    "import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n"
)
FIX = ("write_file", {"path": "calc.py", "content": FIXED})
FINISH = ("finish", {"summary": "fixed add()"})
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


def project(root: Path, *, tests: str = PYTEST_TESTS, package: bool = False) -> Path:
    """calc.py with a subtracting add(), and its tests in tests/ (a package or not)."""
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(tests)
    if package:
        (root / "tests" / "__init__.py").write_text("")
    return root


def run(
    server: FakeOpenAIServer, root: Path, *flags: str, task: str = "make add() add"
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url)
    done = jm(
        "run", task, "-w", str(root), "--session-dir", str(root.parent / "sessions"),
        "--sandbox", "local", "--yes", "-o", "json", *flags, env=env, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done, json.loads(done.stdout)


def test_a_fix_exits_0_with_a_receipt_showing_before_and_after(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = project(tmp_path / "repo")
    fake_openai.enqueue(reply(tool_calls=[FIX]), reply(tool_calls=[FINISH]))
    done, result = run(fake_openai, root, "--verify", PYTEST)

    assert done.returncode == 0, done.stderr
    receipt = result["verification"]
    assert receipt["passed"] and receipt["problem"] is None and receipt["exit_code"] == 0
    assert receipt["runner"] == "pytest" and receipt["source"] == "--verify"
    assert receipt["before"]["exit_code"] == 1
    assert receipt["before"]["tests"]["failed"] == 1 and receipt["before"]["tests"]["passed"] == 1
    assert receipt["tests"]["passed"] == 2 and receipt["tests"]["failed"] == 0
    assert receipt["fingerprint"] == receipt["final_fingerprint"] and receipt["after_last_change"]
    assert receipt["sandbox"].startswith("local")
    assert receipt["test_changes"] == [] and receipt["tests_removed"] is False


@pytest.mark.parametrize("package", [False, True], ids=["tests-folder", "tests-package"])
def test_a_prose_answer_never_exits_0(
    fake_openai: FakeOpenAIServer, tmp_path: Path, package: bool
) -> None:
    root = project(tmp_path / "repo", package=package)
    fake_openai.enqueue(*[reply("Change `a - b` to `a + b` in calc.py.") for _ in range(3)])
    done, result = run(fake_openai, root)

    assert done.returncode != 0
    assert not result["success"]
    assert (root / "calc.py").read_text() == BUGGY


def write(path: str, content: str) -> tuple[str, dict[str, Any]]:
    return ("write_file", {"path": path, "content": content})


def shell(command: str) -> tuple[str, dict[str, Any]]:
    return ("run_command", {"command": command})


TAMPERING: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "delete-the-failing-test": [
        write("tests/test_calc.py", "from calc import add\n\n\ndef test_zero():\n"
              "    assert add(0, 0) == 0\n"),
    ],
    "delete-the-test-file": [shell("rm tests/test_calc.py")],
    "edit-the-expected-value": [
        write("tests/test_calc.py", PYTEST_TESTS.replace("== 5", "== -1")),
    ],
    "shadow-pytest": [write("pytest.py", "import sys\nprint('1 passed in 0.01s')\nsys.exit(0)\n")],
    "conftest-exits-early": [write("conftest.py", "import os\nos._exit(0)\n")],
    "collect-only": [write("pytest.ini", "[pytest]\naddopts = --collect-only\n")],
    "skip-everything": [
        write("tests/conftest.py", "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
              "    for item in items:\n        item.add_marker(pytest.mark.skip)\n"),
    ],
    "new-test-file-exits-early": [
        write("tests/test_aaa.py", "import os\nos._exit(0)\n"),
    ],
    "sitecustomize": [write("sitecustomize.py", "import os\nos._exit(0)\n")],
    "pyproject-addopts": [
        write("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-k nothing_matches'\n"),
    ],
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_tampering_with_the_check_never_exits_0(
    fake_openai: FakeOpenAIServer, tmp_path: Path, name: str
) -> None:
    root = project(tmp_path / "repo")
    steps = TAMPERING[name]
    # the model tampers, then claims it is done every time it is told it is not
    fake_openai.enqueue(reply(tool_calls=steps), *[reply(tool_calls=[FINISH]) for _ in range(3)])
    done, result = run(fake_openai, root, "--verify", PYTEST)

    assert done.returncode == 1, (name, result["verification"])
    assert result["finish_reason"] == "verification_failed"
    assert result["verification"]["passed"] is False
    assert (root / "calc.py").read_text() == BUGGY


def test_a_new_makefile_does_not_change_the_check(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = project(tmp_path / "repo")
    (root / "pytest.ini").write_text("[pytest]\n")  # the profile finds pytest
    makefile = "test:\n\t@echo '3 passed in 0.01s'\n"
    fake_openai.enqueue(
        reply(tool_calls=[write("Makefile", makefile)]),
        *[reply(tool_calls=[FINISH]) for _ in range(3)],
    )
    done, result = run(fake_openai, root)

    assert done.returncode == 1
    assert "make" not in result["verification"]["command"]


def test_unittest_without_a_package_deleting_the_only_module_fails(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = project(tmp_path / "repo", tests=UNITTEST_TESTS, package=True)
    fake_openai.enqueue(
        reply(tool_calls=[shell("rm tests/test_calc.py")]),
        *[reply(tool_calls=[FINISH]) for _ in range(3)],
    )
    done, result = run(fake_openai, root)

    assert done.returncode == 1
    receipt = result["verification"]
    assert receipt["problem"] in ("no_tests", "tests_removed", "test_changes")


def test_changed_tests_pass_only_when_the_user_allows_them(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = project(tmp_path / "repo")
    stronger = PYTEST_TESTS + "\n\ndef test_negative():\n    assert add(-1, 1) == 0\n"
    fake_openai.enqueue(
        reply(tool_calls=[FIX, write("tests/test_calc.py", stronger)]), reply(tool_calls=[FINISH])
    )
    done, result = run(fake_openai, root, "--verify", PYTEST, "--allow-test-edits")

    assert done.returncode == 0, result["verification"]
    changes = result["verification"]["test_changes"]
    assert changes == [
        {"path": "tests/test_calc.py", "change": "modified", "role": "test", "allowed": False}
    ]
    assert result["verification"]["tests"]["passed"] == 3


def test_new_tests_run_with_the_old_ones(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    new = "from calc import add\n\n\ndef test_more():\n    assert add(1, 1) == 2\n"
    fake_openai.enqueue(
        reply(tool_calls=[FIX, write("tests/test_more.py", new)]), reply(tool_calls=[FINISH])
    )
    done, result = run(fake_openai, root, "--verify", PYTEST)

    assert done.returncode == 0, result["verification"]
    assert result["verification"]["tests"]["passed"] == 3
    assert result["verification"]["test_changes"][0]["allowed"] is True


def test_without_a_check_the_run_is_unverified_and_says_how_to_give_one(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "notes.txt").write_text("hello\n")
    fake_openai.enqueue(reply(tool_calls=[write("notes.txt", "hello world\n")]), reply("done"))
    done, result = run(fake_openai, root)

    assert done.returncode == 1
    assert result["finish_reason"] == "unverified"
    assert "--verify" in result["error"] and "--no-verify" in result["error"]

    fake_openai.enqueue(reply("done"))
    waived, result = run(fake_openai, root, "--no-verify")
    assert waived.returncode == 0 and result["finish_reason"] == "answered"


def test_the_text_summary_shows_the_receipt(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    fake_openai.enqueue(reply(tool_calls=[FIX]), reply(tool_calls=[FINISH]))
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url, COLUMNS="200")
    done = jm(
        "run", "make add() add", "-w", str(root), "--session-dir", str(tmp_path / "sessions"),
        "--sandbox", "local", "--yes", "--verify", PYTEST, env=env, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "before the run: exit 1, 1 failed, 1 passed" in done.stdout
    assert "exit 1, 1 failed, 1 passed before → exit 0, 2 passed" in done.stdout
    assert "on the final tree" in done.stdout


def test_verify_reruns_a_sessions_check_on_the_current_tree(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = project(tmp_path / "repo")
    fake_openai.enqueue(reply(tool_calls=[FIX]), reply(tool_calls=[FINISH]))
    done, result = run(fake_openai, root, "--verify", PYTEST)
    assert done.returncode == 0
    env = clean_env()
    where = ("--session-dir", str(tmp_path / "sessions"), "--sandbox", "local")

    holds = jm("verify", result["session_id"], *where, env=env, timeout=120)
    assert holds.returncode == 0, holds.stderr
    assert "the receipt still holds" in holds.stdout and "2 passed" in holds.stdout

    (root / "calc.py").write_text(BUGGY)
    broken = jm("verify", result["session_id"][:8], *where, "-o", "json", env=env, timeout=120)
    assert broken.returncode == 1
    report = json.loads(broken.stdout)
    assert report["passed"] is False and report["same_tree_as_receipt"] is False
    assert report["tests"]["failed"] == 1

    (root / "calc.py").write_text(FIXED)
    (root / "tests" / "test_calc.py").write_text("def test_nothing():\n    assert True\n")
    tampered = jm("verify", result["session_id"], *where, env=env, timeout=120)
    assert tampered.returncode == 1
    assert "tests/test_calc.py" in tampered.stdout and "--allow-test-edits" in tampered.stdout

    missing = jm("verify", "nosuchsession", *where, env=env, timeout=60)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_a_new_test_file_that_patches_the_code_does_not_pass_the_check(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = project(tmp_path / "repo")
    patcher = "import calc\n\ncalc.add = lambda a, b: a + b\n\n\ndef test_ok():\n    pass\n"
    fake_openai.enqueue(
        reply(tool_calls=[write("tests/test_aaa.py", patcher)]),
        *[reply(tool_calls=[FINISH]) for _ in range(3)],
    )
    done, result = run(fake_openai, root, "--verify", PYTEST)

    assert done.returncode == 1
    assert result["verification"]["problem"] == "new_tests_interfere"
    assert "tests/test_aaa.py" in result["error"]
