"""Sorting the agent's changes: test infrastructure is left out and flagged, the rest kept."""

from __future__ import annotations

import tomllib

import pytest

from journeyman.batch.tampering import Change, Sorted, sort_changes

NULL = "0" * 40


def _sort(
    files: dict[str, str | None],
    base: dict[str, str] | None = None,
    *,
    hidden: tuple[str, ...] = (),
    modes: dict[str, str] | None = None,
) -> Sorted:
    """Sort `files` (path -> new text, None: deleted) against `base` (path -> old text)."""
    base = base or {}
    blobs: dict[str, bytes] = {}
    changes = []
    for number, (path, text) in enumerate(files.items()):
        old_id = new_id = NULL
        if path in base:
            old_id = f"old{number}"
            blobs[old_id] = base[path].encode()
        if text is not None:
            new_id = f"new{number}"
            blobs[new_id] = text.encode()
        mode = (modes or {}).get(path, "100644")
        status = "D" if text is None else ("M" if path in base else "A")
        changes.append(Change(path, status, "100644", mode, old_id, new_id))
    settings = [(path, text.encode()) for path, text in base.items() if path not in files]
    return sort_changes(changes, lambda blob: blobs.get(blob, b""), hidden, settings)


def _flagged(result: Sorted) -> dict[str, str]:
    return {flag.path: flag.why for flag in result.flags}


def test_the_pytest_ini_trick_is_left_out_plugin_and_all() -> None:
    result = _sort(
        {
            "pytest.ini": "[pytest]\naddopts = -q -p passall\n",
            "passall.py": "def pytest_runtest_makereport(item, call): ...\n",
            "pkg/code.py": "x = 1\n",
        }
    )
    assert result.kept == ["pkg/code.py"]
    flags = _flagged(result)
    assert "pytest settings" in flags["pytest.ini"]
    assert flags["passall.py"] == "named as a pytest plugin by pytest.ini"


@pytest.mark.parametrize(
    "path",
    [
        "conftest.py",
        "pkg/tests/conftest.py",
        "tox.ini",
        "sub/.pytest.ini",
        "sitecustomize.py",
        "lib/usercustomize.py",
        ".venv/lib/python3.12/site-packages/evil.pth",
        "pytest.py",
        "src/pluggy.cpython-312-x86_64-linux-gnu.so",
        "src/_pytest/runner.py",
        "tests/pluggy/__init__.py",
    ],
)
def test_start_up_code_and_settings_are_left_out(path: str) -> None:
    result = _sort({path: "import os\n"})
    assert result.kept == [] and [flag.path for flag in result.flags] == [path]


def test_the_tests_themselves_and_what_replaces_their_folder_are_left_out() -> None:
    hidden = ("tests/test_x.py", "tests/conftest.py")
    result = _sort(
        {
            "tests/test_x.py": "def test_x(): pass\n",
            "tests": "../elsewhere",
            "tests/test_new.py": "",
        },
        hidden=hidden,
        modes={"tests": "120000"},
    )
    assert result.kept == ["tests/test_new.py"]  # a new test of the agent's own is kept
    flags = _flagged(result)
    assert "hidden test" in flags["tests/test_x.py"]
    assert "where the hidden tests go" in flags["tests"]


def test_plugins_named_anywhere_are_left_out() -> None:
    result = _sort(
        {
            "pyproject.toml": '[tool.pytest.ini_options]\naddopts = ["-p", "helpers.rig"]\n',
            "helpers/rig.py": "",
            "conftest.py": 'pytest_plugins = ("src.boot",)\n',
            "src/boot.py": "",
            "setup.cfg": "[options.entry_points]\npytest11 =\n    rigged = entry.mod:plugin\n",
            "entry/mod.py": "",
            "tests/test_loader.py": "pytest_plugins = ['other']\n",
            "helpers/__init__.py": "",
        }
    )
    assert result.kept == ["helpers/__init__.py"]
    flags = _flagged(result)
    assert flags["helpers/rig.py"] == "named as a pytest plugin by pyproject.toml"
    assert flags["src/boot.py"] == "named as a pytest plugin by conftest.py"
    assert flags["entry/mod.py"] == "named as a pytest plugin by setup.cfg"
    assert flags["tests/test_loader.py"] == "loads pytest plugins (pytest_plugins)"


def test_a_plugin_the_task_already_names_is_left_out_when_the_agent_edits_it() -> None:
    result = _sort(
        {"proj/plug.py": "rigged = True\n"}, {"setup.cfg": "[tool:pytest]\naddopts = -pproj.plug\n"}
    )
    assert _flagged(result) == {"proj/plug.py": "named as a pytest plugin by setup.cfg"}


def test_pyproject_keeps_the_agents_other_changes_with_its_test_tables_as_they_were() -> None:
    base = (
        '[project]\nname = "calc"\nversion = "1.0"\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n\n[tool.ruff]\nline-length = 99\n'
    )
    agent = (
        '[project]\nname = "calc"\nversion = "1.1"\ndependencies = ["attrs"]\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-p rig"\n\n'
        "[tool.ruff]\nline-length = 100\n"
    )
    result = _sort({"pyproject.toml": agent}, {"pyproject.toml": base})
    assert result.kept == []
    graded = tomllib.loads(result.rewritten["pyproject.toml"].decode())
    assert graded["project"]["version"] == "1.1" and graded["project"]["dependencies"] == ["attrs"]
    assert graded["tool"]["ruff"] == {"line-length": 100}
    assert graded["tool"]["pytest"] == {"ini_options": {"testpaths": ["tests"]}}
    assert "pytest tables changed" in _flagged(result)["pyproject.toml"]


def test_pyproject_changed_outside_its_test_tables_is_kept_unflagged() -> None:
    base = '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
    agent = base.replace('"calc"', '"calc"\nversion = "2"')
    result = _sort({"pyproject.toml": agent}, {"pyproject.toml": base})
    assert result.kept == ["pyproject.toml"] and result.flags == [] and not result.rewritten


def test_pytest_settings_the_splice_cannot_separate_leave_the_file_as_it_was() -> None:
    agent = '[project]\nname = "x"\n\n[tool]\npytest.ini_options.addopts = "-p rig"\n'
    result = _sort({"pyproject.toml": agent})
    assert result.kept == [] and not result.rewritten
    assert "the whole file" in _flagged(result)["pyproject.toml"]


def test_setup_cfg_keeps_other_sections_and_restores_tool_pytest() -> None:
    base = "[metadata]\nname = calc\n\n[tool:pytest]\ntestpaths = tests\n"
    agent = "[metadata]\nname = calc\nversion = 3\n\n[tool:pytest]\naddopts = -p rig\n"
    result = _sort({"setup.cfg": agent}, {"setup.cfg": base})
    graded = result.rewritten["setup.cfg"].decode()
    assert "version = 3" in graded and "testpaths = tests" in graded and "rig" not in graded


def test_symlinks_out_of_the_task_are_refused_and_inside_ones_kept() -> None:
    result = _sort(
        {"data/outside": "/etc/passwd", "data/up": "../../x", "data/inside": "../pkg/code.py"},
        modes={"data/outside": "120000", "data/up": "120000", "data/inside": "120000"},
    )
    assert result.kept == ["data/inside"]
    flags = _flagged(result)
    assert "symlink pointing out of the task (/etc/passwd)" in flags["data/outside"]
    assert "refused" in flags["data/up"]


def test_a_nested_repository_and_a_deleted_conftest_are_flagged() -> None:
    result = _sort(
        {"vendor/lib": "", "conftest.py": None},
        {"conftest.py": "import sys\n"},
        modes={"vendor/lib": "160000"},
    )
    assert result.kept == []
    assert set(_flagged(result)) == {"vendor/lib", "conftest.py"}


def test_ordinary_code_and_data_are_kept() -> None:
    files: dict[str, str | None] = {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "docs/notes.md": "pytest_plugins are documented here\n",
        "pkg/testing_utils.py": "",
        "old.py": None,
    }
    result = _sort(files, {"old.py": "x = 1\n"})
    assert result.kept == list(files) and result.flags == []


def test_code_that_newly_reaches_into_pytest_is_kept_but_flagged_for_review() -> None:
    patcher = "import _pytest.runner\n_pytest.runner.call_and_report = lambda *a, **k: None\n"
    result = _sort(
        {"pkg/__init__.py": patcher, "src/_pytest_compat.py": "import _pytest.runner\nx = 2\n"},
        {"src/_pytest_compat.py": "import _pytest.runner\nx = 1\n"},
    )
    assert result.kept == ["pkg/__init__.py", "src/_pytest_compat.py"]
    flags = _flagged(result)
    assert list(flags) == ["pkg/__init__.py"]  # the other named pytest's internals already
    assert flags["pkg/__init__.py"].startswith("kept, but it now names pytest's internals")
