"""Bad config or command-line input ends with exit 2 and one clear message, never a traceback;
a closed stdout ends the run quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env, journeyman


def env_for(tmp_path: Path, base_url: str = "http://127.0.0.1:9/v1") -> dict[str, str]:
    """The default base URL is never reached: those cases fail before any request."""
    return clean_env(
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=base_url,
        JOURNEYMAN_CONFIG_DIR=str(tmp_path / "user-config"),
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"max_iterations = 3\n# caf\xe9\n", "is not UTF-8 text"),
        (b"hooks = 5\n", "hooks: Input should be a valid list"),
        (b"[permissions]\ndeny = 5\n", "permissions.deny: Input should be a valid list"),
        (b'[[hooks]]\nevent = "Nope"\ncommand = "x"\n', "hooks.0.event"),
        (b"max_iterations = [\n", "is not valid TOML"),
        (b"max_iterations = " + b"[" * 10_000 + b"]" * 10_000 + b"\n", "nested too deeply"),
        (b"x = " + b"{a=" * 3_000 + b"1" + b"}" * 3_000 + b"\n", "nested too deeply"),
        (b"max_budget_usd = inf\n", "max_budget_usd: Input should be a finite number"),
        (b"price_per_mtok = [nan, 1.0]\n", "Input should be a finite number"),
    ],
)
def test_a_broken_project_config_exits_2_naming_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "journeyman.toml").write_bytes(content)
    done = journeyman("run", "x", "-w", str(ws), env=env_for(tmp_path))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "journeyman.toml" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_broken_user_config_exits_2(tmp_path: Path) -> None:
    user = tmp_path / "user-config"
    user.mkdir()
    (user / "config.toml").write_bytes(b"hooks = 5\n")
    done = journeyman("run", "x", "-w", str(tmp_path), env=env_for(tmp_path))
    assert done.returncode == 2 and "config.toml" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("run", "x"),
        ("sessions", "list"),
        ("diff",),
        ("resume", "--last"),
    ],
)
def test_a_session_dir_that_is_a_file_exits_2(tmp_path: Path, command: tuple[str, ...]) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    for where in (a_file, a_file / "below"):
        done = journeyman(
            *command, "--session-dir", str(where), cwd=tmp_path, env=env_for(tmp_path)
        )
        assert done.returncode == 2, done.stderr
        assert "cannot be used" in done.stderr and "Traceback" not in done.stderr


def test_a_closed_stdout_ends_the_run_quietly(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """`journeyman run ... -o stream-json | head -1`: no BrokenPipe traceback per event, and the
    run stops instead of going on unseen."""
    ws = tmp_path / "ws"
    ws.mkdir()
    later = tmp_path / "ran-after-the-reader-left"
    fake_openai.enqueue(
        reply(tool_calls=[("run_command", {"command": "sleep 1"})]),
        reply(tool_calls=[("run_command", {"command": f"touch {later}"})]),
        reply(tool_calls=[("finish", {"summary": "done"})]),
    )
    env = env_for(tmp_path, fake_openai.base_url)
    stream = ["-o", "stream-json", "--session-dir", str(tmp_path / "s")]
    process = subprocess.Popen(
        [sys.executable, "-m", "journeyman", "run", "x", "-w", str(ws), "--yes", *stream],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    assert first.startswith(b"{")
    process.stdout.close()  # the reader (`head -1`) is gone
    stderr = process.stderr.read().decode()
    code = process.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert code == 141
    assert not later.exists()
