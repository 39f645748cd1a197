"""One home for the user's settings: personal rules are read from the user's config folder,
and rules left in the old place (~/.journeyman/rules.md) are still read, with a warning on
every run saying where to move them."""

from __future__ import annotations

from pathlib import Path

from tests.fakes import FakeOpenAIServer, reply
from tests.support.cli import clean_env, journeyman


def folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    home, config, workspace = tmp_path / "home", tmp_path / "config", tmp_path / "ws"
    for folder in (home, config, workspace):
        folder.mkdir()
    return home, config, workspace


def test_rules_lists_the_config_folders_rules_and_warns_about_the_old_place(
    tmp_path: Path,
) -> None:
    home, config, workspace = folders(tmp_path)
    (config / "rules.md").write_text("Prefer pathlib.\n")
    env = clean_env(HOME=str(home), JOURNEYMAN_CONFIG_DIR=str(config))
    done = journeyman("rules", "-w", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    assert f"3  loaded     user     {config / 'rules.md'}" in done.stdout
    assert done.stderr == ""
    (home / ".journeyman").mkdir()
    (home / ".journeyman" / "rules.md").write_text("Use tabs.\n")
    both = journeyman("rules", "-w", str(workspace), env=env)
    assert "2 file(s) loaded" in both.stdout
    assert both.stderr == (
        "warning: your rules file ~/.journeyman/rules.md is read from its old place; move it "
        f"to {config / 'rules.md'} (the old place will stop being read in a later release)\n"
    )


def test_a_run_reads_both_and_says_to_move_the_old_file(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    home, config, workspace = folders(tmp_path)
    (config / "rules.md").write_text("Prefer pathlib.\n")
    (home / ".journeyman").mkdir()
    (home / ".journeyman" / "rules.md").write_text("Use tabs.\n")
    fake_openai.enqueue(reply("nothing to do"))
    env = clean_env(
        HOME=str(home),
        JOURNEYMAN_CONFIG_DIR=str(config),
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=fake_openai.base_url,
    )
    done = journeyman(
        "run", "--no-verify", "say hello", "-w", str(workspace), "--model", "gpt-4.1-mini",
        "--session-dir", str(tmp_path / "sessions"), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    system = fake_openai.requests[0].json["messages"][0]["content"]
    assert system.index("Use tabs.") < system.index("Prefer pathlib.")
    assert "~/.journeyman/rules.md is read from its old place; move it to" in done.stderr
