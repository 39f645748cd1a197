"""Drive `journeyman acp` as an editor does: the protocol package's own client side over the
subprocess's stdin/stdout, with the model played by the fake OpenAI server."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp", reason="the agent-client-protocol package is not installed")
from acp import schema  # noqa: E402

from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.support.cli import clean_env  # noqa: E402

Answer = Callable[[schema.ToolCallUpdate, list[schema.PermissionOption]], str | None]
"""Picks the option id to answer a permission question with (None: the question is cancelled)."""


def allow_once(tool_call: schema.ToolCallUpdate, options: list[schema.PermissionOption]) -> str:
    return "allow_once"


@dataclass
class EditorClient:
    """The client side: records every session update and permission question it gets."""

    answer: Answer = allow_once
    updates: list[Any] = field(default_factory=list)
    questions: list[tuple[schema.ToolCallUpdate, list[schema.PermissionOption]]] = field(
        default_factory=list
    )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self,
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
        **kwargs: Any,
    ) -> schema.RequestPermissionResponse:
        self.questions.append((tool_call, options))
        chosen = self.answer(tool_call, options)
        if chosen is None:
            return schema.RequestPermissionResponse(
                outcome=schema.DeniedOutcome(outcome="cancelled")
            )
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen)
        )

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def agent_text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))

    def take(self) -> list[Any]:
        taken, self.updates = self.updates, []
        return taken


@dataclass
class Editor:
    """A running `journeyman acp` and the client connected to it."""

    conn: Any
    process: Any
    client: EditorClient
    workspace: Path

    async def new_session(self) -> str:
        response = await self.conn.new_session(cwd=str(self.workspace), mcp_servers=[])
        return str(response.session_id)

    async def prompt(self, session_id: str, text: str) -> str:
        response = await self.conn.prompt(
            session_id=session_id, prompt=[schema.TextContentBlock(type="text", text=text)]
        )
        return str(response.stop_reason)


@dataclass
class EditorLauncher:
    """Starts `journeyman acp` processes on one workspace, sessions and fake model server."""

    tmp_path: Path
    server: FakeOpenAIServer
    workspace: Path

    @asynccontextmanager
    async def start(
        self, *flags: str, client: EditorClient | None = None, env: dict[str, str] | None = None
    ) -> AsyncIterator[Editor]:
        client = client or EditorClient()
        env = clean_env(
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=self.server.base_url,
            JOURNEYMAN_SESSION_DIR=str(self.tmp_path / "sessions"),
            JOURNEYMAN_CONFIG_DIR=str(self.tmp_path / "user-config"),
            **(env or {}),
        )
        with (self.tmp_path / "acp-stderr.txt").open("ab") as stderr:
            async with acp.spawn_agent_process(
                client,
                sys.executable,
                "-m",
                "journeyman",
                "acp",
                "--no-lsp",
                "--sandbox",
                "local",
                *flags,
                env=env,
                transport_kwargs={"stderr": stderr.fileno()},
            ) as (conn, process):
                init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                assert init.agent_capabilities.load_session is True
                yield Editor(conn, process, client, self.workspace)

    def stderr(self) -> str:
        path = self.tmp_path / "acp-stderr.txt"
        return path.read_text() if path.exists() else ""


@pytest.fixture
def editor(fake_openai: FakeOpenAIServer, tmp_path: Path) -> EditorLauncher:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return EditorLauncher(tmp_path, fake_openai, workspace)
