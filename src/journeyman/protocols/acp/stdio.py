"""Serving the protocol on stdin/stdout. Stdout belongs to the protocol alone: the process's
own stdout is pointed at stderr before anything runs, so a stray print (ours, a library's, a
child process's) can never corrupt the stream of messages."""

from __future__ import annotations

import logging
import os
import sys
from typing import cast

import acp

from journeyman.loop.config_file import session_root
from journeyman.protocols.acp.launch import AgentLauncher, LaunchOptions
from journeyman.protocols.acp.server import JourneymanAcpAgent
from journeyman.protocols.acp.transport import LineTransport

STREAM_LIMIT_BYTES = 50 * 1024 * 1024
"""Longest message line read from the client (prompts may embed whole files)."""


def take_stdout() -> int:
    """A private descriptor for the protocol's output; fd 1 (and `sys.stdout`) now write to
    stderr."""
    protocol_fd = os.dup(sys.stdout.fileno())
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return protocol_fd


async def serve(options: LaunchOptions, version: str, protocol_fd: int) -> None:
    """Answer the client on stdin / `protocol_fd` until it closes the connection."""
    agent = JourneymanAcpAgent(AgentLauncher(options), session_root(options.session_dir), version)
    transport = LineTransport(sys.stdin.fileno(), protocol_fd, max_line_bytes=STREAM_LIMIT_BYTES)
    try:
        # methods it does not define (list, fork, modes) are answered "method not found"
        await acp.run_agent(cast(acp.Agent, agent), transport)
    finally:
        await agent.close()


def configure_logging() -> None:
    """Warnings and errors on stderr (an editor shows it in its log), never on stdout."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("journeyman acp: %(levelname)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
