"""A workspace's fingerprint: any change to a file counts, what test runs write does not."""

from __future__ import annotations

import os
from pathlib import Path

from journeyman.tools.fingerprint import fingerprint


def test_a_change_anywhere_changes_it_and_caches_do_not(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.txt").write_text("o\n")
    first = fingerprint(tmp_path)
    for cache in ("__pycache__", ".pytest_cache", ".mypy_cache", ".git"):
        (tmp_path / cache).mkdir(exist_ok=True)
        (tmp_path / cache / "f").write_text("written by a test run\n")
    (tmp_path / "a.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / ".coverage").write_text("")
    assert fingerprint(tmp_path) == first
    (tmp_path / "build" / "out.txt").write_text("changed, though git ignores it\n")
    assert fingerprint(tmp_path) != first


def test_mode_and_links_count_and_a_fifo_does_not_block(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo\n")
    before = fingerprint(tmp_path)
    script.chmod(0o755)
    executable = fingerprint(tmp_path)
    assert executable != before
    (tmp_path / "link").symlink_to("/etc/passwd")
    linked = fingerprint(tmp_path)
    assert linked != executable and linked.files == 2
    os.mkfifo(tmp_path / "pipe")
    assert fingerprint(tmp_path).files == 3


def test_a_virtual_environment_inside_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x\n")
    first = fingerprint(tmp_path)
    venv = tmp_path / ".venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr\n")
    (venv / "lib.py").write_text("synced by uv run\n")
    assert fingerprint(tmp_path) == first
