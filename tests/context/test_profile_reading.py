"""How the profile reads test and source files: what tells pytest from unittest, what it reads
at most, and what a hostile tree cannot make it do."""

from __future__ import annotations

import os
import shlex
import threading
from pathlib import Path

import pytest

from journeyman.context.profile import ProfileConfig, detect_profile, runnable_test
from journeyman.context.python_tests import (
    classify_tests,
    read_bounded,
    unittest_misses,
    unittest_start,
)
from tests.support.sdists import write

TESTCASE = "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n"


def styles_of(tmp_path: Path, text: str) -> tuple[str | None, int]:
    write(tmp_path, {"test_x.py": text})
    styles = classify_tests(tmp_path, ["test_x.py"], max_files=10, max_bytes=4096)
    return styles.pytest_reason, styles.unittest_files


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        ("import pytest\n", "import pytest"),
        ("from pytest import raises\n", "import pytest"),
        ("def test_a():\n    assert 1\n", "module-level test functions"),
        ("async def test_a():\n    assert 1\n", "module-level test functions"),
        ("class TestA:\n    def test_a(self):\n        assert 1\n", "a plain Test class"),
        ("class TestA(object):\n    pass\n", "a plain Test class"),
        (TESTCASE + "\ndef test_b():\n    assert 1\n", "module-level test functions"),
        ("def helper():\n    import pytest\n", "import pytest"),
        ("print 'python 2'\ndef test_a():\n    assert 1\n", "module-level test functions"),
    ],
)
def test_pytest_constructs(tmp_path: Path, text: str, construct: str) -> None:
    reason, _ = styles_of(tmp_path, text)
    assert reason == f"{construct} in test_x.py"


@pytest.mark.parametrize(
    "text",
    [
        TESTCASE,
        "from unittest import TestCase\n\nclass TestA(TestCase):\n    def test_a(self):\n"
        "        assert True\n",
        "import unittest\n\nclass A(unittest.IsolatedAsyncioTestCase):\n"
        "    async def test_a(self):\n        pass\n",
        'import unittest\n"""\ndef test_in_a_docstring():\n"""\n',
    ],
)
def test_unittest_suites_are_not_taken_for_pytest(tmp_path: Path, text: str) -> None:
    assert styles_of(tmp_path, text) == (None, 1)


def test_a_hostile_test_file_is_classified_without_crashing(tmp_path: Path) -> None:
    nested = "x = " + "[" * 1_000 + "]" * 1_000 + "\n"
    assert styles_of(tmp_path, nested + "def test_a():\n    pass\n")[0] is not None
    assert styles_of(tmp_path, "\0" * 100) == (None, 0)


def test_only_the_bounded_number_of_files_is_read(tmp_path: Path) -> None:
    files = {f"tests/test_{i}.py": TESTCASE for i in range(3)}
    files["tests/test_z.py"] = "def test_z():\n    assert True\n"
    write(tmp_path, files)
    bounded = detect_profile(tmp_path, config=ProfileConfig(read_test_files=3))
    assert bounded.test_frameworks == ("unittest",)  # the pytest-style file was never read
    assert detect_profile(tmp_path).test_frameworks == ("pytest",)
    styles = classify_tests(tmp_path, sorted(files), max_files=3, max_bytes=100)
    assert (styles.read, styles.unread) == (3, 1)


def test_a_pytest_construct_past_the_byte_bound_is_not_seen(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_a.py": "# filler\n" * 100 + "import pytest\n"})
    assert detect_profile(tmp_path, config=ProfileConfig(read_bytes=500)).test_frameworks == (
        "unittest",
    )
    assert detect_profile(tmp_path).test_frameworks == ("pytest",)


def test_unittest_start_folder(tmp_path: Path) -> None:
    write(tmp_path, {"checks/test_a.py": "", "pkg/__init__.py": "", "pkg/test_b.py": ""})
    assert unittest_start(tmp_path, ["checks/test_a.py"], []) == "-s checks"
    assert unittest_start(tmp_path, ["pkg/test_b.py"], []) == ""  # found from the root
    assert unittest_start(tmp_path, ["checks/test_a.py", "pkg/test_b.py"], []) == ""
    assert unittest_start(tmp_path, ["test_c.py", "checks/test_a.py"], []) == ""
    write(tmp_path, {"tests/__init__.py": "", "tests/test_d.py": ""})
    paths = ["checks/test_a.py", "tests/test_d.py"]
    assert unittest_start(tmp_path, paths, ["tests"]) == "-s tests -t ."


def test_a_start_folder_name_stays_one_word(tmp_path: Path) -> None:
    write(tmp_path, {"a b;$(touch x)/test_a.py": TESTCASE, "-x/test_b.py": TESTCASE})
    assert unittest_start(tmp_path, ["a b;$(touch x)/test_a.py"], []) == "-s 'a b;$(touch x)'"
    assert unittest_misses(tmp_path, ["a b;$(touch x)/test_a.py"], "-s 'a b;$(touch x)'") == []
    assert unittest_start(tmp_path, ["-x/test_b.py"], []) == ""


def test_test_files_unittest_discovery_cannot_reach(tmp_path: Path) -> None:
    write(tmp_path, {"tests/__init__.py": "", "tests/a/__init__.py": "", "tests/b/x.py": ""})
    paths = ["tests/test_1.py", "tests/a/test_2.py", "tests/b/test_3.py", "other/test_4.py"]
    assert unittest_misses(tmp_path, paths, "-s tests -t .") == paths[2:]
    assert unittest_misses(tmp_path, paths, "") == ["tests/b/test_3.py", "other/test_4.py"]
    write(tmp_path, {"tests/b/test_3.py": TESTCASE})
    profile = detect_profile(tmp_path)
    assert [(c.command, c.runner, c.requires) for c in profile.test_commands] == [
        ("python -m pytest", "pytest", ("pytest",)),
        ("python -m unittest discover -s tests -t .", "unittest", ()),
    ]
    assert "leave out tests/b/test_3.py" in profile.test_commands[0].source
    unittest_only = runnable_test(
        profile, which=lambda p: "/usr/bin/python" if p == "python" else None
    )
    assert unittest_only is not None and unittest_only.runner == "unittest"


def test_src_layout_under_a_wrapper_or_with_pythonpath_set_gets_no_prefix(tmp_path: Path) -> None:
    files = {"src/calc/__init__.py": "", "tests/test_a.py": "def test_a():\n    pass\n"}
    write(tmp_path / "pip", files)
    assert detect_profile(tmp_path / "pip").test_command == "PYTHONPATH=src python -m pytest"
    write(tmp_path / "uv", files | {"uv.lock": ""})
    assert detect_profile(tmp_path / "uv").test_command == "uv run pytest"
    pythonpath = '[tool.pytest.ini_options]\npythonpath = ["src"]\n'
    write(tmp_path / "set", files | {"pyproject.toml": pythonpath})
    assert detect_profile(tmp_path / "set").test_command == "python -m pytest"


def test_doctests_when_pytest_is_configured_but_there_are_no_test_files(tmp_path: Path) -> None:
    write(tmp_path, {
        "requirements-dev.txt": "pytest\n",
        "calc.py": "def f():\n    '''\n    >>> f()\n    1\n    '''\n    return 1\n",
        "tools/__init__.py": "",
        "tools/util.py": "X = 1\n",
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    assert profile.test_command == "python -m pytest --doctest-modules calc.py"
    assert profile.test_frameworks == ("pytest",)


def test_doctest_targets_are_quoted_and_never_read_as_options(tmp_path: Path) -> None:
    doc = "'''\n>>> 1 + 1\n2\n'''\n"
    write(tmp_path, {
        "we ird;$(touch x)/__init__.py": doc,
        "-p/__init__.py": doc,
        "setup.py": doc,
        "plain_dir/mod.py": doc,
    })  # fmt: skip
    profile = detect_profile(tmp_path)
    test = profile.test_commands[0]
    assert test.runner == "pytest" and test.requires == ("pytest",)
    assert profile.test_frameworks == ("doctest",)
    words = shlex.split(test.command)
    assert words == ["python", "-m", "pytest", "--doctest-modules", "we ird;$(touch x)"]


def test_doctests_need_pytest_installed(tmp_path: Path) -> None:
    write(tmp_path, {"calc/__init__.py": "'''\n>>> 1\n1\n'''\n"})
    profile = detect_profile(tmp_path)
    assert profile.test_command == "python -m pytest --doctest-modules calc"
    found = runnable_test(profile, which=lambda p: f"/usr/bin/{p}" if p == "python" else None)
    assert found is None
    found = runnable_test(profile, which=lambda p: f"/usr/bin/{p}")
    assert found is not None and found.command == profile.test_command


def test_hatch_scripts_name_their_runner_and_env_names_are_checked(tmp_path: Path) -> None:
    write(tmp_path / "ut", {
        "hatch.toml": "[envs.default.scripts]\ntest = 'python -m unittest discover'\n",
        "tests/test_a.py": TESTCASE,
        "requirements-dev.txt": "pytest\n",
    })  # fmt: skip
    test = detect_profile(tmp_path / "ut").test_commands[0]
    assert (test.command, test.runner) == ("hatch run test", "unittest")
    write(tmp_path / "bad", {
        "hatch.toml": "[envs.'x;rm -rf ~'.scripts]\ntest = 'pytest'\n"
        "[envs.ci.scripts]\ntest = ['nox -s tests']\n",
        "conftest.py": "",
    })  # fmt: skip
    test = detect_profile(tmp_path / "bad").test_commands[0]
    assert (test.command, test.runner) == ("hatch run ci:test", "hatch")


def _detect_within(root: Path, seconds: float) -> bool:
    done = threading.Event()

    def detect() -> None:
        detect_profile(root)
        done.set()

    threading.Thread(target=detect, daemon=True).start()
    return done.wait(seconds)


def test_fifos_and_devices_under_marker_names_are_not_read(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_a.py": "def test_a():\n    pass\n"})
    os.mkfifo(tmp_path / "Makefile")
    os.mkfifo(tmp_path / "pyproject.toml")
    os.mkfifo(tmp_path / "tests" / "test_fifo.py")
    (tmp_path / "setup.cfg").symlink_to("/dev/zero")
    (tmp_path / "tests" / "conftest.py").symlink_to("/dev/urandom")
    assert _detect_within(tmp_path, 10), "detection blocked on a FIFO or a device"
    assert read_bounded(tmp_path / "Makefile", 10) is None
    assert read_bounded(tmp_path / "setup.cfg", 10) is None
    assert read_bounded(tmp_path / "tests" / "test_a.py", 5) == "def t"
    assert detect_profile(tmp_path).test_command == "python -m pytest"
