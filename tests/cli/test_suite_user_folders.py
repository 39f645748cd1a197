"""The suite never reads the user's own config or data folder: tests/conftest.py points both at
temporary folders for the whole session, and `journeyman` subprocesses inherit them."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from journeyman.loop.config_file import user_config_file, user_mcp_file
from journeyman.session.store import default_session_root
from tests.support.cli import clean_env, journeyman


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def test_the_suite_config_and_data_folders_are_temporary_and_empty() -> None:
    config_dir = Path(os.environ["JOURNEYMAN_CONFIG_DIR"])
    real_home = Path(os.path.expanduser("~")).resolve()
    assert not _inside(config_dir, real_home / ".config")
    assert _inside(user_config_file(), config_dir)
    assert _inside(user_mcp_file(), config_dir)
    assert not user_mcp_file().exists()
    data_dir = Path(os.environ["XDG_DATA_HOME"])
    assert _inside(Path(platformdirs.user_data_dir("journeyman")), data_dir)
    assert _inside(default_session_root(), data_dir)
    assert not any(name.startswith("JOURNEYMAN_SESSION") for name in os.environ)


def test_a_journeyman_subprocess_reads_the_suite_config_folder(tmp_path: Path) -> None:
    config_dir = Path(os.environ["JOURNEYMAN_CONFIG_DIR"])
    done = journeyman("mcp", "list", env=clean_env(COLUMNS="500"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = " ".join(done.stdout.split())
    assert f"{config_dir / 'mcp.json'}" in shown
    assert str(Path.home() / ".config" / "journeyman") not in shown
