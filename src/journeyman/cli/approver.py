"""The command line's answer to a budget extension request: ask on the terminal, or not."""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO

from journeyman.economics.approval import AutoApprover, ExtensionApprover, deny_extensions
from journeyman.economics.budget import ExtensionRequest

PROMPT_TIMEOUT_S = 60.0


class TerminalApprover:
    """Asks y/N on the terminal; no answer within the timeout means no."""

    def __init__(
        self,
        timeout_s: float = PROMPT_TIMEOUT_S,
        stdin: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.stdin = stdin or sys.stdin
        self.stderr = stderr or sys.stderr

    async def __call__(self, request: ExtensionRequest) -> bool:
        extra = []
        if request.additional_tokens:
            extra.append(f"+{request.additional_tokens:,} tokens")
        if request.additional_usd:
            extra.append(f"+${request.additional_usd:.2f}")
        self.stderr.write(
            f"\njourneyman: {request.reason}. Extend the budget by {' and '.join(extra)}? "
            f"(extension {request.extensions_granted + 1} of {request.max_extensions}; "
            f"no answer in {self.timeout_s:.0f} s means no) [y/N] "
        )
        self.stderr.flush()
        answer = await self._read_line()
        granted = answer.strip().lower() in ("y", "yes")
        self.stderr.write("extension granted\n" if granted else "extension denied\n")
        return granted

    async def _read_line(self) -> str:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        fd = self.stdin.fileno()

        def ready() -> None:
            if not future.done():
                future.set_result(self.stdin.readline())

        loop.add_reader(fd, ready)
        try:
            return await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            return ""
        finally:
            loop.remove_reader(fd)


def choose_approver(auto_extend: int, interactive: bool) -> ExtensionApprover:
    """`--auto-extend N` grants N without asking; otherwise ask on a terminal, else deny."""
    if auto_extend > 0:
        return AutoApprover(auto_extend)
    if interactive:
        return TerminalApprover()
    return deny_extensions
