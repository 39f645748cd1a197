"""The server registry, detection, the choice of server per file, and `.journeyman/lsp.toml`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journeyman.core.errors import ConfigurationError
from journeyman.integrations.lsp import (
    BUILTIN_SERVERS,
    CONFIG_FILE,
    ServerConfig,
    load_lsp_config,
)
from journeyman.integrations.lsp.results import Converter
from journeyman.integrations.lsp.servers import Candidate, choose, merge_servers, survey


def candidate(name: str, *, installed: bool, fallback_for: str | None = None) -> Candidate:
    config = ServerConfig(
        name=name,
        language="python",
        command=[name],
        extensions=[".py"],
        fallback_for=fallback_for,
    )
    return Candidate(config, f"/bin/{name}" if installed else None, ())


def test_the_builtin_set_follows_the_seed() -> None:
    by_name = {s.name: s for s in BUILTIN_SERVERS}
    assert by_name["typescript"].command == ["typescript-language-server", "--stdio"]
    assert by_name["pyright"].command == ["pyright-langserver", "--stdio"]
    assert by_name["rust-analyzer"].command == ["rust-analyzer"]
    assert by_name["gopls"].command == ["gopls"]
    assert by_name["json"].command == ["vscode-json-language-server", "--stdio"]
    assert by_name["pylsp"].fallback_for == "pyright"
    assert set(by_name["typescript"].extensions) == {".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs"}
    assert by_name["typescript"].language_id(Path("a.tsx")) == "typescriptreact"
    assert by_name["json"].language_id(Path("a.jsonc")) == "jsonc"
    assert set(by_name["pyright"].detect) == {"pyproject.toml", "requirements.txt"}
    assert set(by_name["typescript"].detect) == {"package.json", "tsconfig.json"}
    assert by_name["rust-analyzer"].detect == ["Cargo.toml"] and by_name["gopls"].detect == [
        "go.mod"
    ]


def test_detection_from_marker_files(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module x\n")
    (tmp_path / "requirements.txt").write_text("")
    found = {c.config.name: c.markers for c in survey(BUILTIN_SERVERS, tmp_path)}
    assert found["gopls"] == ("go.mod",) and found["pyright"] == ("requirements.txt",)
    assert found["typescript"] == () and found["rust-analyzer"] == ()


def test_the_fallback_answers_only_while_the_primary_is_missing() -> None:
    primary, fallback = "pyright", "pylsp"
    both = [
        candidate(primary, installed=True),
        candidate(fallback, installed=True, fallback_for=primary),
    ]
    chosen = choose(both, Path("a.py"))
    assert chosen is not None and chosen.config.name == primary
    only_fallback = [
        candidate(primary, installed=False),
        candidate(fallback, installed=True, fallback_for=primary),
    ]
    chosen = choose(only_fallback, Path("a.py"))
    assert chosen is not None and chosen.config.name == fallback
    neither = [candidate(primary, installed=False), candidate(fallback, installed=False)]
    chosen = choose(neither, Path("a.py"))
    assert chosen is not None and not chosen.installed  # the caller says what to install
    assert choose(both, Path("a.rs")) is None


def test_user_servers_come_first_replace_and_disable_builtins() -> None:
    mine = ServerConfig(name="pyright", language="python", command=["basedpyright-langserver"])
    off = ServerConfig(name="gopls", language="go", command=["gopls"], enabled=False)
    merged = merge_servers([mine, off], disabled=["json"])
    names = [s.name for s in merged]
    assert names[0] == "pyright" and merged[0].command == ["basedpyright-langserver"]
    assert names.count("pyright") == 1 and "gopls" not in names and "json" not in names


def test_config_files_and_switch(tmp_path: Path) -> None:
    assert load_lsp_config(tmp_path, environ={}).config.enabled
    user = tmp_path / "user.toml"
    user.write_text(
        'disabled = ["gopls"]\nrequest_timeout = 5\n'
        '[[servers]]\nname = "ruff"\nlanguage = "python"\ncommand = ["ruff", "server"]\n'
        'extensions = [".py"]\n'
    )
    path = tmp_path / CONFIG_FILE
    path.parent.mkdir()
    path.write_text('disabled = ["pyright"]\n')
    loaded = load_lsp_config(tmp_path, user_file=user, environ={})
    assert loaded.files == [user, path] and loaded.warnings == []
    config = loaded.config
    assert config.disabled == ["gopls", "pyright"] and config.request_timeout == 5
    assert [s.command for s in config.servers] == [["ruff", "server"]]
    off = load_lsp_config(tmp_path, environ={"JOURNEYMAN_LSP": "off"})
    assert not off.config.enabled
    path.write_text("enabled = false\n")
    assert load_lsp_config(tmp_path, environ={"JOURNEYMAN_LSP": "1"}).config.enabled

    with pytest.raises(ConfigurationError, match="neither on"):
        load_lsp_config(tmp_path, environ={"JOURNEYMAN_LSP": "maybe"})
    path.write_text("request_timeout = -1\n")
    with pytest.raises(ConfigurationError, match="request_timeout"):
        load_lsp_config(tmp_path, environ={})
    user.write_text("[[servers]]\nname = 'x'\n")
    with pytest.raises(ConfigurationError, match=r"user\.toml: servers\.0\.language"):
        load_lsp_config(tmp_path, user_file=user, environ={})
    path.write_text("nonsense = [")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_lsp_config(tmp_path, environ={})


def test_a_workspace_cannot_add_servers(tmp_path: Path) -> None:
    path = tmp_path / CONFIG_FILE
    path.parent.mkdir()
    path.write_text(
        'diagnostics_wait = 1\n[[servers]]\nname = "evil"\nlanguage = "python"\n'
        'command = ["sh", "-c", "touch pwned"]\nextensions = [".py"]\n'
    )
    loaded = load_lsp_config(tmp_path, user_file=tmp_path / "user.toml", environ={})
    assert loaded.config.servers == [] and loaded.config.diagnostics_wait == 1
    [warning] = loaded.warnings
    assert "ignored the workspace's language servers (evil)" in warning
    assert "user.toml" in warning


def test_protocol_results_become_workspace_relative_and_one_based(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("x = '🐍'; name = 1\n")
    converter = Converter(tmp_path, lambda p: p.read_text().splitlines())
    uri = source.as_uri()
    span = {"start": {"line": 0, "character": 11}, "end": {"line": 0, "character": 15}}
    link = {"targetUri": uri, "targetRange": span, "targetSelectionRange": span}
    [where] = converter.locations([link, {"uri": uri, "range": span}])  # duplicates dropped
    assert (where.path, where.line, where.column, where.end_column) == ("m.py", 1, 11, 15)
    outside = converter.location("file:///usr/lib/python3/os.py", None)
    assert outside is not None and outside.path == os.path.normpath("/usr/lib/python3/os.py")

    [diag] = converter.diagnostics(
        uri, [{"range": span, "severity": 2, "message": "unused ", "source": "x", "code": 7}]
    )
    assert diag.render() == "1:11 warning: unused [x 7]"
    hover = converter.hover({"contents": [{"language": "python", "value": "x: int"}, "doc"]}, uri)
    assert hover is not None and hover.text == "```python\nx: int\n```\n\ndoc"
