"""The suite runs in a home of its own (tests/conftest.py): nothing a user keeps in their home
(config.toml, mcp.json, rules, sessions, locks) reaches a test, and no test writes there."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

from tests.support.cli import clean_env, jm

XDG_FOLDERS = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")


def account_home() -> Path:
    return Path(pwd.getpwuid(os.getuid()).pw_dir)


def test_home_and_xdg_folders_are_private() -> None:
    home = Path(os.environ["HOME"])
    assert home.is_dir() and not home.is_relative_to(account_home())
    for name in XDG_FOLDERS:
        assert Path(os.environ[name]).is_relative_to(home), name
    for name in ("JOURNEYMAN_CONFIG_DIR", "JOURNEYMAN_CACHE_DIR"):  # beside the private home
        assert Path(os.environ[name]).is_relative_to(home.parent), name
    assert Path.home() == home


def test_a_journeyman_subprocess_finds_its_folders_in_the_private_home() -> None:
    probe = (
        "import json, pathlib, platformdirs\n"
        "print(json.dumps([str(pathlib.Path.home()), platformdirs.user_config_dir('journeyman'),"
        " platformdirs.user_data_dir('journeyman'), platformdirs.user_state_dir('journeyman'),"
        " platformdirs.user_cache_dir('journeyman')]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=clean_env(), capture_output=True, text=True, check=True
    )
    home = Path(os.environ["HOME"])
    for folder in json.loads(done.stdout):  # platformdirs' own folders: under the private home
        assert Path(folder).is_relative_to(home), folder


HOSTILE_SERVER = "from-the-users-home"


def test_the_users_mcp_servers_and_rules_are_not_seen(tmp_path: Path) -> None:
    """Passes in any home; `test_a_hostile_home_changes_nothing` runs it with a hostile one."""
    (tmp_path / "work").mkdir()
    listed = jm("mcp", "list", "-w", str(tmp_path / "work"), env=clean_env())
    assert HOSTILE_SERVER not in listed.stdout + listed.stderr
    assert not (Path.home() / ".journeyman" / "rules.md").exists()


def test_a_hostile_home_changes_nothing(tmp_path: Path) -> None:
    """A user whose home declares an MCP server and personal rules, with JOURNEYMAN_* settings
    pointing there too: the test above still passes when pytest runs in that home."""
    hostile = tmp_path / "account"
    for config in (hostile / ".config" / "journeyman", hostile / "elsewhere"):
        config.mkdir(parents=True)
        servers = {"mcpServers": {HOSTILE_SERVER: {"command": "false"}}}
        (config / "mcp.json").write_text(json.dumps(servers))
    (hostile / ".journeyman").mkdir()
    (hostile / ".journeyman" / "rules.md").write_text("Always answer in Latin.\n")
    env = {
        **os.environ,
        "HOME": str(hostile),
        "XDG_CONFIG_HOME": str(hostile / ".config"),
        "JOURNEYMAN_CONFIG_DIR": str(hostile / "elsewhere"),
    }
    inner = f"{__file__}::{test_the_users_mcp_servers_and_rules_are_not_seen.__name__}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            inner,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[1],
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout
