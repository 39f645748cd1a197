"""The manifest of a workspace's test infrastructure, and what a run changed in it."""

from __future__ import annotations

import os
from pathlib import Path

from journeyman.context.test_infra import TestInfra, blocking, take_manifest


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def roles(root: Path) -> dict[str, str]:
    return {path: role for path, (role, _) in take_manifest(root).entries.items()}


def test_what_counts_as_test_infrastructure(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "calc.py": "x = 1\n",
            "src/pkg/core.py": "y = 2\n",
            "src/pkg/coverage.py": "",  # a submodule: not importable as `coverage`
            "tests/test_calc.py": "def test(): pass\n",
            "tests/data/expected.json": "{}\n",
            "pkg_test.py": "",
            "conftest.py": "",
            "pytest.ini": "[pytest]\n",
            "Makefile": "test:\n\tpytest\n",
            "pytest.py": "",
            "src/unittest/__init__.py": "",
            "README.md": "hi\n",
        },
    )
    assert roles(root) == {
        "tests/test_calc.py": "test",
        "tests/data/expected.json": "test",
        "pkg_test.py": "test",
        "conftest.py": "settings",
        "pytest.ini": "settings",
        "Makefile": "settings",
        "pytest.py": "startup",
        "src/unittest/__init__.py": "startup",
    }


def test_changes_since_the_start(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {"tests/test_a.py": "def test(): assert 1\n", "tests/test_b.py": "", "tox.ini": ""},
    )
    start = take_manifest(root)
    (root / "tests/test_a.py").write_text("def test(): assert 0\n")
    (root / "tests/test_b.py").unlink()
    (root / "tests/test_new.py").write_text("def test(): pass\n")
    (root / "tests/conftest.py").write_text("")
    changes = {c.path: (c.change, c.allowed) for c in take_manifest(root).changes_since(start)}
    assert changes == {
        "tests/test_a.py": ("modified", False),
        "tests/test_b.py": ("deleted", False),
        "tests/test_new.py": ("added", True),
        "tests/conftest.py": ("added", False),
    }
    assert [c.path for c in blocking(take_manifest(root).changes_since(start))] == [
        "tests/conftest.py",
        "tests/test_a.py",
        "tests/test_b.py",
    ]


def test_only_the_test_tables_of_pyproject_and_setup_cfg_count(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "pyproject.toml": "[project]\nname='x'\nversion='1'\n[tool.pytest.ini_options]\n",
            "setup.cfg": "[metadata]\nname = x\n[tool:pytest]\naddopts = -q\n",
        },
    )
    start = take_manifest(root)
    (root / "pyproject.toml").write_text(
        "[project]\nname='x'\nversion='2'\ndependencies=['a']\n[tool.pytest.ini_options]\n"
    )
    (root / "setup.cfg").write_text("[metadata]\nname = y\n[tool:pytest]\naddopts = -q\n")
    assert take_manifest(root).changes_since(start) == []
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts='-k none'\n")
    (root / "setup.cfg").write_text("[tool:pytest]\naddopts = --collect-only\n")
    assert {c.path for c in take_manifest(root).changes_since(start)} == {
        "pyproject.toml",
        "setup.cfg",
    }


def test_pth_files_in_a_workspace_venv_and_nothing_else_of_it(tmp_path: Path) -> None:
    site = tmp_path / ".venv/lib/python3.11/site-packages"
    tree(tmp_path, {".venv/pyvenv.cfg": "", ".venv/lib/python3.11/site-packages/x/test_y.py": ""})
    start = take_manifest(tmp_path)
    assert start.entries == {}
    (site / "evil.pth").write_text("import os\n")
    (site / "sitecustomize.py").write_text("")
    changes = take_manifest(tmp_path).changes_since(start)
    assert {(c.path, c.role) for c in changes} == {
        (".venv/lib/python3.11/site-packages/evil.pth", "startup"),
        (".venv/lib/python3.11/site-packages/sitecustomize.py", "startup"),
    }


def test_links_are_not_followed_and_a_fifo_does_not_block(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    tree(outside, {"secret.txt": "s\n"})
    root = tree(tmp_path / "ws", {"tests/test_a.py": ""})
    (root / "tests/linked").symlink_to(outside)
    os.mkfifo(root / "tests/test_fifo.py")
    entries = take_manifest(root).entries
    assert "tests/linked/secret.txt" not in entries
    assert entries["tests/linked"][1].startswith("link:")
    assert "tests/test_fifo.py" not in entries  # a FIFO is not read, and nothing hangs


def test_a_manifest_round_trips_and_a_damaged_one_is_empty(tmp_path: Path) -> None:
    root = tree(tmp_path, {"tests/test_a.py": "x\n"})
    manifest = take_manifest(root)
    assert TestInfra.from_dict(manifest.to_dict()) == manifest
    assert TestInfra.from_dict({"entries": {"a": [1, 2]}}).entries == {}
    assert TestInfra.from_dict("junk").complete is False
