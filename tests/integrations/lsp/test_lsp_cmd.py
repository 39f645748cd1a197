"""`journeyman lsp`, and an agent run with the LSP tools wired in as the CLI does it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from journeyman import Agent, AgentConfig, FinishReason
from journeyman.cli.app import app
from journeyman.cli.lsp_cmd import EXIT_CONFIG, EXIT_OK, EXIT_SERVER_FAILED, lsp_report
from journeyman.core.messages import ToolCall
from journeyman.integrations.lsp import CONFIG_FILE
from journeyman.loop.servers import lsp_for_run
from journeyman.providers.scripted import ScriptedProvider
from tests.fakes.agents import turn

from .conftest import FAKE_SERVER, needs_pylsp


def configure(workspace: Path, text: str) -> None:
    path = workspace / CONFIG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def configure_user(text: str) -> None:
    """The user's lsp.toml (the conftest points JOURNEYMAN_CONFIG_DIR at a fresh directory)."""
    (Path(os.environ["JOURNEYMAN_CONFIG_DIR"]) / "lsp.toml").write_text(text)


def report(workspace: Path, **options: Any) -> tuple[int, str]:
    console = Console(record=True, width=250, force_terminal=False)
    code = lsp_report(workspace, console=console, **options)
    return code, console.export_text()


def fake_entry(mode: str) -> str:
    return (
        f'[[servers]]\nname = "fake"\nlanguage = "python"\nextensions = [".py"]\n'
        f'detect = ["pyproject.toml"]\ncommand = [{sys.executable!r}, {str(FAKE_SERVER)!r}, '
        f'"{mode}"]\n'
    )


@needs_pylsp
@pytest.mark.slow
def test_report_starts_detected_servers_and_shows_capabilities(project: Path) -> None:
    configure(project, 'disabled = ["pyright"]\n')
    code, text = report(project)
    assert code == EXIT_OK, text
    assert "pylsp" in text and "running (pid" in text and "pyproject.toml" in text
    assert "pylsp offers: diagnostics, definition, references, hover" in text
    assert "stopped again" in text
    assert "pyright" not in text  # disabled servers are not configured at all
    assert "gopls" in text  # installed or not, every configured server is listed

    code, text = report(project, start=False)
    assert code == EXIT_OK and "running" not in text and "offers" not in text


def test_report_failures_and_bad_config(project: Path) -> None:
    configure_user(fake_entry("mute"))
    configure(project, 'disabled = ["pyright", "pylsp"]\nstartup_timeout = 0.5\n')
    code, text = report(project)
    assert code == EXIT_SERVER_FAILED, text
    assert "crashed" in text and "did not answer initialize" in text

    configure(project, "startup_timeout = 'soon'\n")
    code, text = report(project)
    assert code == EXIT_CONFIG and "startup_timeout" in text

    configure(project, fake_entry("crash"))
    code, text = report(project, start=False)
    assert "warning" in text and "ignored the workspace's language servers (fake)" in text

    empty = project / "empty"
    empty.mkdir()
    code, text = report(empty, start=False)
    assert code == EXIT_OK and "No language server is detected" in text


def test_cli_help_and_exit_code(project: Path) -> None:
    runner = CliRunner()
    helped = runner.invoke(app, ["lsp", "--help"])
    assert helped.exit_code == 0 and "crashes or hangs is restarted once" in helped.output
    configure(project, "nonsense = [")
    failed = runner.invoke(app, ["lsp", "--workspace", str(project), "--no-start"])
    assert failed.exit_code == EXIT_CONFIG
    assert "--no-lsp" in runner.invoke(app, ["run", "--help"]).output


@needs_pylsp
@pytest.mark.slow
async def test_an_agent_run_uses_the_tools_and_sees_diagnostics_after_edits(
    project: Path, tmp_path: Path
) -> None:
    configure(project, 'disabled = ["pyright"]\n')
    script = [
        turn(
            ToolCall("c1", "lsp_definition", {"path": "pkg/main.py", "line": 5, "symbol": "area"})
        ),
        turn(
            ToolCall(
                "c2",
                "edit_file",
                {"path": "pkg/main.py", "old_string": "area(2, 3)", "new_string": "aera(2, 3)"},
            )
        ),
        turn(ToolCall("c3", "finish", {"summary": "done"})),
    ]
    provider = ScriptedProvider(script)
    manager = lsp_for_run(project)
    assert manager is not None
    agent = Agent(
        provider,
        workspace=project,
        config=AgentConfig(session_dir=tmp_path / "s", verify=False),
        lsp=manager,
    )
    result = await agent.run("find area and break it")
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    assert manager.running_for(project / "pkg/main.py") is None  # shut down when the run ended

    offered = {spec.name for spec in provider.requests[0].tools}
    lsp_names = {"lsp_definition", "lsp_references", "lsp_hover", "lsp_diagnostics", "lsp_symbols"}
    assert lsp_names <= offered
    seen = provider.requests[-1].messages
    results = {m.tool_result.call_id: m.tool_result for m in seen if m.tool_result is not None}
    assert "pkg/shapes.py:4:5" in results["c1"].content
    assert "5:12 error: undefined name 'aera' [pyflakes]" in results["c2"].content


async def test_a_hanging_server_does_not_fail_the_run(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure_user('disabled = ["pyright", "pylsp"]\nrequest_timeout = 0.5\n' + fake_entry("hang"))
    configure(project, fake_entry("crash"))  # ignored: a workspace cannot add servers
    ask = {"path": "pkg/main.py", "line": 5, "symbol": "area"}
    script = [
        turn(ToolCall("c1", "lsp_hover", ask)),
        turn(ToolCall("c2", "lsp_hover", ask)),
        turn(ToolCall("c3", "finish", {"summary": "went on without it"})),
    ]
    provider = ScriptedProvider(script)
    agent = Agent(
        provider,
        workspace=project,
        config=AgentConfig(session_dir=tmp_path / "s", verify=False),
        lsp=lsp_for_run(project),
    )
    result = await agent.run("look at area")
    assert result.finish_reason is FinishReason.COMPLETED, result.error
    seen = provider.requests[-1].messages
    results = {m.tool_result.call_id: m.tool_result for m in seen if m.tool_result is not None}
    assert results["c1"].is_error and "did not answer textDocument/hover" in results["c1"].content
    assert "stays off" in results["c2"].content

    # switched off: no language servers for the run
    assert lsp_for_run(project, enabled=False) is None
    monkeypatch.setenv("JOURNEYMAN_LSP", "off")
    assert lsp_for_run(project) is None


def test_the_help_names_the_lsp_switch_and_file_the_integration_reads() -> None:
    from journeyman.cli.lsp_cmd import LSP_ENV_SWITCH, LSP_SETTINGS_FILE
    from journeyman.integrations.lsp import CONFIG_FILE, ENV_SWITCH

    assert LSP_ENV_SWITCH == ENV_SWITCH
    assert CONFIG_FILE.as_posix() == LSP_SETTINGS_FILE
