"""`journeyman inspect` as a user runs it: where the page goes, and the errors (exit 2, one
clear line, never a traceback)."""

from __future__ import annotations

import os
import webbrowser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from journeyman.cli.app import app
from tests.inspector.conftest import Built
from tests.support.cli import clean_env, jm


def env_for(built: Built) -> dict[str, str]:
    return clean_env(JOURNEYMAN_SESSION_DIR=str(built.sessions))


def test_the_page_goes_to_the_current_folder_by_default(fixed: Built, tmp_path: Path) -> None:
    done = jm("inspect", fixed.session_id[:15], env=env_for(fixed), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = tmp_path / f"journeyman-{fixed.session_id}.html"
    assert page.is_file()
    assert f"wrote journeyman-{fixed.session_id}.html (" in done.stdout
    assert f"{fixed.stored_steps} steps)" in done.stdout
    assert "<!DOCTYPE html>" in page.read_text(encoding="utf-8")


def test_last_takes_the_newest_session_of_the_workspace(fixed: Built, tmp_path: Path) -> None:
    out = tmp_path / "out.html"
    done = jm(
        "inspect", "--last", "-w", str(fixed.sessions.parent / "ws"), "-o", str(out),
        env=env_for(fixed),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert fixed.session_id in out.read_text(encoding="utf-8")


def test_an_output_folder_gets_the_default_name(fixed: Built, tmp_path: Path) -> None:
    done = jm("inspect", fixed.session_id, "-o", str(tmp_path), env=env_for(fixed))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / f"journeyman-{fixed.session_id}.html").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no session 'nope'"),
        (["--last"], "no session for workspace"),
        ([], "name a session id, or pass --last"),
        (["x", "--last"], "give a session id or --last, not both"),
    ],
)
def test_a_session_that_cannot_be_found_exits_2(
    fixed: Built, tmp_path: Path, args: list[str], message: str
) -> None:
    done = jm("inspect", *args, env=env_for(fixed), cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*.html"))


@pytest.mark.parametrize("exists", [True, False])
def test_a_folder_without_sessions_is_refused_and_left_as_it_was(
    tmp_path: Path, exists: bool
) -> None:
    empty = tmp_path / "x" / "empty"
    if exists:
        empty.mkdir(parents=True)
    done = jm("inspect", "--session-dir", str(empty), "abc", env=clean_env(), cwd=tmp_path)
    assert done.returncode == 2
    assert f"no sessions in {empty}" in done.stderr and done.stderr.count("\n") == 1
    assert (list(empty.iterdir()) == []) if exists else not (tmp_path / "x").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_read_only_folder_exits_2(fixed: Built, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    done = jm("inspect", fixed.session_id, "-o", str(locked / "r.html"), env=env_for(fixed))
    assert done.returncode == 2
    assert "cannot write the report to" in done.stderr and "Traceback" not in done.stderr


def test_an_output_that_cannot_be_written_exits_2(fixed: Built, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    for target in (tmp_path / "missing" / "r.html", tmp_path / "file" / "r.html"):
        done = jm("inspect", fixed.session_id, "-o", str(target), env=env_for(fixed))
        assert done.returncode == 2, done.stdout
        assert f"cannot write the report to {target}" in done.stderr
        assert "Traceback" not in done.stderr
        assert not target.exists()


def test_open_hands_the_page_to_the_web_browser(
    fixed: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    monkeypatch.setenv("JOURNEYMAN_SESSION_DIR", str(fixed.sessions))
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["inspect", fixed.session_id, "-o", str(out), "--open"])
    assert result.exit_code == 0, result.output
    assert opened == [out.resolve().as_uri()]
