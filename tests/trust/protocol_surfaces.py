"""`journeyman acp` and `journeyman mcp serve` in subprocesses, spoken to by the protocols' own
client packages (the editor's side and an MCP client's side)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.trust.surfaces import MODEL, SUBPROCESS_LIMIT_S, Scene

acp = pytest.importorskip("acp", reason="the agent-client-protocol package is not installed")
from acp import schema  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from tests.protocols.acp.conftest import EditorClient  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _stderr(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


async def acp_once(scene: Scene) -> tuple[int | None, str, str]:
    """initialize, session/new on the workspace, one prompt; every update the editor got and
    the agent's stderr are what it showed."""
    client = EditorClient()
    stderr_path = scene.root / "acp-stderr.txt"
    errors: list[str] = []
    code: int | None = None
    args = ("-m", "journeyman", "acp", "--no-lsp", "--model", MODEL, "--yes")
    args += ("--session-dir", str(scene.sessions), *scene.flags)
    with stderr_path.open("ab") as stderr:
        async with acp.spawn_agent_process(
            client,
            sys.executable,
            *args,
            env=scene.environment(),
            cwd=str(scene.root),
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, process):
            try:
                async with asyncio.timeout(SUBPROCESS_LIMIT_S):
                    await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                    session = await conn.new_session(cwd=str(scene.ws), mcp_servers=[])
                    stop = await conn.prompt(
                        session_id=session.session_id,
                        prompt=[schema.TextContentBlock(type="text", text=scene.task)],
                    )
                    errors.append(f"stop reason: {stop.stop_reason}")
            except acp.RequestError as refused:
                errors.append(f"error {refused.code}: {refused}")
                errors.append(json.dumps(getattr(refused, "data", None), default=str))
            code = process.returncode
    shown = [u.model_dump_json() for u in client.updates]
    error = "\n".join(errors)  # the editor's answers only: a log line is not an answer
    return code, "\n".join(shown) + "\n" + error + "\n" + _stderr(stderr_path), error


async def mcp_once(scene: Scene) -> tuple[int | None, str, str]:
    """`start_run` with the task on the server's workspace; the tool result (its text and
    structured content) and the server's stderr are what it showed."""
    stderr_path = scene.root / "mcp-stderr.txt"
    serve = [sys.executable, "-m", "journeyman", "mcp", "serve", "-w", str(scene.ws)]
    serve += ["--provider", "openai", "--model", MODEL, "--base-url", scene.server.base_url]
    serve += ["--no-lsp", "--yes", "--session-dir", str(scene.sessions), *scene.flags]
    # the SDK's stdio client hands the server our stderr; the shell sends it to a file instead
    wrapper = 'exec "$@" 2>>"$JM_STDERR"'
    params = StdioServerParameters(
        command="sh",
        args=["-c", wrapper, "sh", *serve],
        env={**scene.environment(), "JM_STDERR": str(stderr_path)},
        cwd=str(REPO),
    )
    shown: list[str] = []
    errors: list[str] = []
    async with asyncio.timeout(SUBPROCESS_LIMIT_S), Client(params) as client:
        result: Any = await client.call_tool("start_run", {"task": scene.task})
        for block in result.content:
            shown.append(getattr(block, "text", ""))
        shown.append(json.dumps(result.structured_content, default=str))
        if result.is_error:
            errors.extend(shown)
        listed = await client.call_tool("list_sessions", {})
        shown.append(json.dumps(listed.structured_content, default=str))
        shown.extend(getattr(block, "text", "") for block in listed.content)
    error = "\n".join(errors)  # the client's error results only: a log line is not an answer
    return None, "\n".join(shown) + "\n" + _stderr(stderr_path), error
