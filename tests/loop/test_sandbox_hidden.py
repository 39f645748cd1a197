"""`sandbox_hidden`: host paths the user hides from commands, from every source that may set
it, and what a command under bubblewrap then sees (a real `bwrap`)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from journeyman.loop.agent import sandbox_for
from journeyman.loop.launch import LaunchRequest, settle
from tests.tools.sandboxes import needs_bwrap


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "user"
    folder.mkdir()
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", str(folder))
    monkeypatch.delenv("JOURNEYMAN_SANDBOX_HIDDEN", raising=False)
    return folder


def test_user_config_environment_and_flags_add_up_and_a_workspace_cannot_set_it(
    tmp_path: Path, user_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (user_dir / "config.toml").write_text('sandbox_hidden = ["/srv/answers"]\n')
    monkeypatch.setenv("JOURNEYMAN_SANDBOX_HIDDEN", "/srv/a:/srv/b")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "journeyman.toml").write_text('sandbox_hidden = ["/usr"]\n')
    settled = settle(LaunchRequest(ws, flags={"sandbox_hidden": ["/srv/c"]}))
    # the environment replaces the file's value, as for every setting; the flag adds to it
    assert [str(p) for p in settled.config.sandbox_hidden] == ["/srv/a", "/srv/b", "/srv/c"]
    assert [item.key for item in settled.ignored] == ["sandbox_hidden"]


@needs_bwrap
def test_bubblewrap_hides_the_paths_and_shows_the_workspace_inside_one(
    tmp_path: Path, user_dir: Path
) -> None:
    root = Path(tempfile.mkdtemp(prefix="journeyman-test-", dir="/var/tmp"))  # not in /tmp,
    # which bubblewrap makes private anyway
    try:
        answers = root / "answers.txt"
        answers.write_text("the answer\n")
        others = root / "others"
        (others / "mine").mkdir(parents=True)
        (others / "theirs").mkdir()
        (others / "theirs" / "notes.txt").write_text("theirs\n")
        ws = others / "mine"
        config = settle(
            LaunchRequest(
                ws,
                flags={"sandbox": "bubblewrap", "sandbox_hidden": [str(answers), str(others)]},
                session_dir=tmp_path / "sessions",
            )
        ).config
        box = sandbox_for(config, ws)
        script = f"cat {answers}; ls {others}; cat {others}/theirs/notes.txt; echo ok > ours.txt"
        argv = box.argv(script, ws)  # type: ignore[attr-defined]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert "the answer" not in done.stdout and "theirs" not in done.stdout
        assert done.stdout.split() == ["mine"]  # only the mount point of the workspace
        assert (ws / "ours.txt").read_text() == "ok\n"  # the workspace stays writable
        asyncio.run(box.close())
    finally:
        shutil.rmtree(root, ignore_errors=True)
