"""Rules files: priority order, skipped files, read failures, decoding and lazy loading."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from journeyman.context.rules import (
    SEPARATOR,
    RuleScope,
    RulesLoader,
    RuleStatus,
    describe_sources,
    render_rules_section,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    place = tmp_path / "home"
    place.mkdir()
    return place


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def write_all(workspace: Path, home: Path, user: Path | None = None) -> None:
    write(workspace / ".agent/rules.md", "legacy")
    write(home / ".journeyman/rules.md", "user")
    if user is not None:
        write(user / "rules.md", "user config")
    write(workspace / "CLAUDE.md", "claude")
    write(workspace / "AGENTS.md", "agents")
    write(workspace / ".journeyman/rules.md", "project")


def test_all_files_load_lowest_priority_first(workspace: Path, home: Path, tmp_path: Path) -> None:
    user = tmp_path / "config"
    write_all(workspace, home, user)
    rules = RulesLoader(workspace, home, user_folder=user)
    assert rules.text == SEPARATOR.join(
        ["legacy", "user", "user config", "claude", "agents", "project"]
    )
    assert [s.priority for s in rules.sources] == [1, 2, 3, 4, 5, 6]
    assert [s.scope for s in rules.sources] == [
        RuleScope.LEGACY,
        RuleScope.USER,
        RuleScope.USER,
        RuleScope.PROJECT,
        RuleScope.PROJECT,
        RuleScope.PROJECT,
    ]
    assert rules.sources[-1].path == workspace / ".journeyman/rules.md"
    assert rules.sources[1].path == home / ".journeyman/rules.md"
    assert rules.sources[2].path == user / "rules.md"
    assert all(s.status is RuleStatus.LOADED for s in rules.sources)


def test_the_users_rules_live_in_the_config_folder(workspace: Path, tmp_path: Path) -> None:
    """One home: the user's rules sit beside config.toml, mcp.json and skills/, read from
    JOURNEYMAN_CONFIG_DIR (or the platform's config folder) by default, with no warning."""
    user = tmp_path / "config"
    write(user / "rules.md", "Prefer pathlib.")
    rules = RulesLoader(workspace, tmp_path / "home", user_folder=user)
    assert rules.text == "Prefer pathlib."
    assert rules.warnings == []
    default = RulesLoader(workspace, tmp_path / "home")
    write(Path(os.environ["JOURNEYMAN_CONFIG_DIR"]) / "rules.md", "From the suite's folder.")
    try:
        assert default.text == "From the suite's folder."
    finally:
        (Path(os.environ["JOURNEYMAN_CONFIG_DIR"]) / "rules.md").unlink()


def test_rules_in_the_old_home_place_are_read_with_a_note_to_move_them(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    """Never silently ignore a user's rules: ~/.journeyman/rules.md is still read, and each
    run is told where it belongs now."""
    user = tmp_path / "config"
    write(home / ".journeyman/rules.md", "Use tabs.")
    rules = RulesLoader(workspace, home, user_folder=user)
    assert rules.text == "Use tabs."
    assert rules.warnings == [
        f"your rules file {home / '.journeyman/rules.md'} is read from its old place; move it "
        f"to {user / 'rules.md'} (the old place will stop being read in a later release)"
    ]
    write(user / "rules.md", "Use spaces.")  # both: both read, the new place wins a conflict
    both = RulesLoader(workspace, home, user_folder=user)
    assert both.text == SEPARATOR.join(["Use tabs.", "Use spaces."])
    assert len(both.warnings) == 1


def test_the_home_place_is_shown_from_the_home_folder(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    write(tmp_path / ".journeyman/rules.md", "old habits")
    rules = RulesLoader(workspace, user_folder=tmp_path / ".config/journeyman")
    assert rules.warnings == [
        "your rules file ~/.journeyman/rules.md is read from its old place; move it to "
        "~/.config/journeyman/rules.md (the old place will stop being read in a later release)"
    ]


def test_project_rules_come_after_user_rules_so_they_win(workspace: Path, home: Path) -> None:
    write(home / ".journeyman/rules.md", "Use tabs.")
    write(workspace / ".journeyman/rules.md", "Use four spaces.")
    text = RulesLoader(workspace, home).text
    assert text.index("Use tabs.") < text.index("Use four spaces.")
    section = render_rules_section(RulesLoader(workspace, home))
    assert section.index("Use tabs.") < section.index("Use four spaces.")


def test_missing_files_are_listed_but_contribute_nothing(workspace: Path, home: Path) -> None:
    write(workspace / "AGENTS.md", "only this")
    rules = RulesLoader(workspace, home)
    assert rules.text == "only this"
    statuses = {
        s.path.name if s.scope is not RuleScope.USER else "user": s.status for s in rules.sources
    }
    assert statuses["AGENTS.md"] is RuleStatus.LOADED
    assert statuses["CLAUDE.md"] is RuleStatus.MISSING
    assert [s.display for s in rules.loaded] == ["AGENTS.md"]


def test_nothing_to_load_gives_empty_text_and_no_section(workspace: Path, home: Path) -> None:
    rules = RulesLoader(workspace, home)
    assert rules.text == ""
    assert render_rules_section(rules) == ""
    assert all(s.status is RuleStatus.MISSING for s in rules.sources)


def test_empty_and_blank_files_are_skipped(workspace: Path, home: Path) -> None:
    write(workspace / "CLAUDE.md", "")
    write(workspace / "AGENTS.md", "  \n\n\t\n")
    write(workspace / ".journeyman/rules.md", "\n\nreal rule\n\n")
    rules = RulesLoader(workspace, home)
    assert rules.text == "real rule"
    by_name = {s.display: s for s in rules.sources}
    assert by_name["CLAUDE.md"].status is RuleStatus.EMPTY
    assert by_name["AGENTS.md"].status is RuleStatus.EMPTY
    assert by_name["AGENTS.md"].size == 6
    assert SEPARATOR not in rules.text


def unreadable(path: Path) -> Path:
    """A rules file that cannot be read: mode 000, or a directory where root ignores modes."""
    write(path, "secret rule")
    path.chmod(0)
    try:
        path.read_bytes()
    except PermissionError:
        return path
    # Running as root: permission bits do not stop reads, so use a directory instead.
    path.chmod(0o644)
    path.unlink()
    path.mkdir()
    return path


def test_unreadable_file_is_skipped_and_logged(
    workspace: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(workspace / "AGENTS.md", "agents")
    bad = unreadable(workspace / ".journeyman" / "rules.md")
    try:
        with caplog.at_level(logging.WARNING, logger="journeyman.context.rules"):
            rules = RulesLoader(workspace, home)
            assert rules.text == "agents"
        source = next(s for s in rules.sources if s.path == bad)
        assert source.status in (RuleStatus.ERROR, RuleStatus.SKIPPED)  # a folder, as root
        assert source.error
        if source.status is RuleStatus.ERROR:
            assert str(bad) in caplog.text
        else:  # skipped files are the user's to hear about, through `warnings`
            assert any(".journeyman/rules.md skipped" in line for line in rules.warnings)
        assert any(source.error in line for line in describe_sources(rules.sources))
    finally:
        if bad.is_file():
            bad.chmod(0o644)


def test_directory_named_like_a_rules_file_is_skipped_not_a_crash(
    workspace: Path, home: Path
) -> None:
    (workspace / "CLAUDE.md").mkdir()
    write(workspace / "AGENTS.md", "fine")
    rules = RulesLoader(workspace, home)
    assert rules.text == "fine"
    skipped = next(s for s in rules.sources if s.display == "CLAUDE.md")
    assert skipped.status is RuleStatus.SKIPPED
    assert rules.warnings == ["rules file CLAUDE.md skipped: it is not a regular file (a folder)"]


def test_malformed_utf8_is_replaced(workspace: Path, home: Path) -> None:
    write(workspace / "AGENTS.md", b"caf\xe9 \xff\xfe rules \xe2\x82")
    rules = RulesLoader(workspace, home)
    assert rules.text == "caf\ufffd \ufffd\ufffd rules \ufffd"
    assert rules.loaded[0].size == 16


def test_nothing_is_read_before_first_access(
    workspace: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_read = Path.read_bytes
    real_realpath = os.path.realpath

    def spy_read(self: Path) -> bytes:
        calls.append(f"read {self}")
        return real_read(self)

    def spy_realpath(path: object, *args: object, **kwargs: object) -> str:
        calls.append(f"realpath {path}")
        return real_realpath(path)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(Path, "read_bytes", spy_read)
    monkeypatch.setattr(os.path, "realpath", spy_realpath)
    rules = RulesLoader(workspace, home)
    assert calls == []
    # Files written after construction are still seen: loading happens on first access.
    write(workspace / "AGENTS.md", "late")
    assert rules.text == "late"
    assert calls
    count = len(calls)
    assert rules.text == "late"
    _ = rules.sources
    assert len(calls) == count  # loaded once, then cached


def test_reload_reads_again(workspace: Path, home: Path) -> None:
    write(workspace / "AGENTS.md", "first")
    rules = RulesLoader(workspace, home)
    assert rules.text == "first"
    write(workspace / "AGENTS.md", "second")
    assert rules.text == "first"
    rules.reload()
    assert rules.text == "second"


def test_symlinked_claude_md_is_read_once(workspace: Path, home: Path) -> None:
    write(workspace / "AGENTS.md", "shared instructions")
    (workspace / "CLAUDE.md").symlink_to("AGENTS.md")
    rules = RulesLoader(workspace, home)
    assert rules.text == "shared instructions"
    claude = next(s for s in rules.sources if s.display == "CLAUDE.md")
    assert claude.status is RuleStatus.DUPLICATE


def test_workspace_that_is_home_reads_its_rules_once_at_project_priority(home: Path) -> None:
    write(home / ".journeyman/rules.md", "mine")
    rules = RulesLoader(home, home)
    assert rules.text == "mine"
    assert [s.scope for s in rules.loaded] == [RuleScope.PROJECT]


def test_rendered_section_names_each_file(workspace: Path, home: Path) -> None:
    write(home / ".journeyman/rules.md", "Be brief.")
    write(workspace / "AGENTS.md", "Run `make test`.")
    section = render_rules_section(RulesLoader(workspace, home))
    assert section.startswith("# Rules and instructions for this project")
    assert "(user):\n\nBe brief." in section
    assert "From AGENTS.md (project):\n\nRun `make test`." in section
    assert SEPARATOR in section
    assert render_rules_section(RulesLoader(workspace, home).sources) == section


def test_describe_lists_highest_priority_first(workspace: Path, home: Path) -> None:
    write(workspace / "AGENTS.md", "x")
    lines = describe_sources(RulesLoader(workspace, home).sources)
    assert len(lines) == 6
    assert lines[0].startswith("6  missing")
    assert any(line.startswith("5  loaded") and "(1 byte)" in line for line in lines)
