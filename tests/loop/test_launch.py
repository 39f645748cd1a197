"""The launcher: settings under the trust rules, for a new run and for a stored session, and
the agent it builds with the surface's handlers, notices and tracing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from journeyman.core.errors import ConfigurationError
from journeyman.core.lifecycle import AgentState
from journeyman.core.messages import Usage
from journeyman.loop.launch import LaunchRequest, ProviderChoice, Surface, launch, settle
from journeyman.policy.permissions import PermissionMode
from journeyman.providers.base import ModelResponse
from journeyman.providers.scripted import ScriptedProvider
from journeyman.session.redact import MASK
from journeyman.session.store import SessionRecord
from journeyman.tools.choices import SandboxKind


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "user"
    folder.mkdir()
    monkeypatch.setenv("JOURNEYMAN_CONFIG_DIR", str(folder))
    for name in ("JOURNEYMAN_MAX_ITERATIONS", "JOURNEYMAN_SANDBOX"):
        monkeypatch.delenv(name, raising=False)
    return folder


def workspace(tmp_path: Path, config: str = "") -> Path:
    folder = tmp_path / "ws"
    folder.mkdir(exist_ok=True)
    if config:
        (folder / "journeyman.toml").write_text(config)
    return folder


def test_a_workspace_file_may_tighten_but_its_loosening_is_left_out_and_said(
    tmp_path: Path, user_dir: Path
) -> None:
    (user_dir / "config.toml").write_text('max_iterations = 20\npass_env = ["LANG"]\n')
    ws = workspace(tmp_path, 'max_iterations = 10\n[permissions]\nmode = "trusted"\n')
    settled = settle(
        LaunchRequest(ws, flags={"pass_env": ["TZ"], "max_budget_usd": None}, assume_yes=None)
    )
    assert settled.config.max_iterations == 10  # lower: kept
    assert settled.config.permissions is not None
    assert settled.config.permissions.mode is not PermissionMode.TRUSTED
    assert [item.key for item in settled.ignored] == ["permissions.mode"]
    assert settled.options.ignored_settings[0]["key"] == "permissions.mode"
    assert settled.config.pass_env == ["LANG", "TZ"]  # a flag adds to the configured names
    assert settled.assume_yes is False


def test_flags_go_on_top_and_the_permission_mode_flag_sets_the_mode(
    tmp_path: Path, user_dir: Path
) -> None:
    ws = workspace(tmp_path, "max_iterations = 10\n")
    settled = settle(
        LaunchRequest(ws, flags={"max_iterations": 3, "permission_mode": "plan"}, stream=True)
    )
    assert settled.config.max_iterations == 3 and settled.config.stream is True
    assert settled.config.permissions is not None
    assert settled.config.permissions.mode is PermissionMode.PLAN


def test_streaming_by_default_yields_to_the_settings(tmp_path: Path, user_dir: Path) -> None:
    ws = workspace(tmp_path)
    assert settle(LaunchRequest(ws, stream_by_default=True)).config.stream is True
    (user_dir / "config.toml").write_text("stream = false\n")
    assert settle(LaunchRequest(ws, stream_by_default=True)).config.stream is False


def record(ws: Path, **settings: Any) -> SessionRecord:
    return SessionRecord("s1", "task", str(ws), settings, "")


def test_a_stored_session_keeps_its_settings_with_the_flags_on_top(
    tmp_path: Path, user_dir: Path
) -> None:
    ws = workspace(tmp_path, "max_iterations = 2\n")  # the file is not read for a stored run
    stored = record(
        ws,
        provider="openai",
        model="m1",
        config={"max_iterations": 40, "mode": "plan-solve"},
        assume_yes=True,
        mcp=True,
    )
    request = LaunchRequest(
        ws, ProviderChoice(model="m2"), flags={"permission_mode": "plan"}, record=stored
    )
    settled = settle(request)
    assert settled.config.max_iterations == 40 and settled.config.mode.value == "plan-solve"
    assert settled.config.permissions is not None  # stored before permissions: filled in
    assert settled.config.permissions.mode is PermissionMode.PLAN
    assert (settled.provider, settled.model) == ("openai", "m2")
    assert settled.assume_yes is True and settled.options.mcp is True


def test_an_imported_session_brings_back_only_what_data_may_choose(
    tmp_path: Path, user_dir: Path
) -> None:
    ws = workspace(tmp_path)
    stored = record(
        ws,
        imported_from="trajectory.json",
        assume_yes=True,
        config={"max_iterations": 7, "sandbox": "local", "hooks": [{"event": "Stop"}]},
    )
    settled = settle(LaunchRequest(ws, record=stored))
    assert settled.assume_yes is False
    assert settled.config.hooks == []
    assert {item.key for item in settled.ignored} >= {"assume_yes", "config.sandbox"}


def test_a_stored_endpoint_that_held_credentials_must_be_given_again(
    tmp_path: Path, user_dir: Path
) -> None:
    ws = workspace(tmp_path)
    stored = record(ws, base_url=f"http://user:{MASK}@127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="--base-url"):
        settle(LaunchRequest(ws, record=stored))
    given = LaunchRequest(ws, ProviderChoice(base_url="http://127.0.0.1:9/v1"), record=stored)
    assert settle(given).options.base_url == "http://127.0.0.1:9/v1"


def test_an_unknown_tool_format_is_a_configuration_error(tmp_path: Path, user_dir: Path) -> None:
    with pytest.raises(ConfigurationError, match="--tool-format"):
        settle(LaunchRequest(workspace(tmp_path), ProviderChoice(tool_format="smoke")))


class Tracing:
    def __init__(self) -> None:
        self.attached: list[Any] = []

    def attach(self, agent: Any) -> None:
        self.attached.append(agent)


async def test_the_agent_gets_the_surface_and_its_notices_go_to_the_surface(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path)
    (ws / ".journeyman").mkdir()
    (ws / ".journeyman" / "mcp.json").write_text('{"mcpServers": {}}')
    notices: list[str] = []
    events: list[Any] = []
    tracing = Tracing()
    settled = settle(
        LaunchRequest(ws, flags={"sandbox": SandboxKind.LOCAL, "verify": False}, lsp=False)
    )
    surface = Surface(on_event=events.append, notice=notices.append, tracing=tracing)  # type: ignore[arg-type]
    provider = ScriptedProvider([ModelResponse(text="done", usage=Usage(1, 1))])
    agent = launch(settled, surface, provider=provider)
    assert tracing.attached == [agent]
    assert any("pass --mcp" in line for line in notices)  # the workspace's MCP servers
    assert capsys.readouterr().err == ""  # an app owns the terminal: nothing written there
    result = await agent.run("x")
    assert result.success and events
    agent.close()
    assert agent.lifecycle.state is AgentState.DISPOSED
