"""Serving the protocol on stdin/stdout. Stdout belongs to the protocol alone: the process's
own stdout is pointed at stderr before anything runs, so a stray print (ours, a library's, a
child process's) can never corrupt the stream of messages."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import cast

import acp

from journeyman.loop.config_file import session_root
from journeyman.protocols.acp.launch import AgentLauncher, LaunchOptions
from journeyman.protocols.acp.server import JourneymanAcpAgent

STREAM_LIMIT_BYTES = 50 * 1024 * 1024
"""Longest message line read from the client (prompts may embed whole files)."""


def take_stdout() -> int:
    """A private descriptor for the protocol's output; fd 1 (and `sys.stdout`) now write to
    stderr."""
    protocol_fd = os.dup(sys.stdout.fileno())
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return protocol_fd


async def _streams(protocol_fd: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    write_protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())  # gives drain()
    transport, _ = await loop.connect_write_pipe(
        lambda: write_protocol, os.fdopen(protocol_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, write_protocol, None, loop)
    return reader, writer


async def serve(options: LaunchOptions, version: str, protocol_fd: int) -> None:
    """Answer the client on stdin / `protocol_fd` until it closes the connection."""
    agent = JourneymanAcpAgent(AgentLauncher(options), session_root(options.session_dir), version)
    reader, writer = await _streams(protocol_fd)
    try:
        # methods it does not define (list, fork, modes) are answered "method not found"
        await acp.run_agent(cast(acp.Agent, agent), writer, reader)
    finally:
        await agent.close()


def configure_logging() -> None:
    """Warnings and errors on stderr (an editor shows it in its log), never on stdout."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("journeyman acp: %(levelname)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
