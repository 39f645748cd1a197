"""The command line's answers to budget extension and permission requests: ask on the
terminal, or not."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TextIO

from rich.cells import cell_len, chop_cells

from journeyman.core.display import printable, printable_name
from journeyman.economics.approval import AutoApprover, ExtensionApprover, deny_extensions
from journeyman.economics.budget import ExtensionRequest
from journeyman.policy.call_description import describe_call
from journeyman.policy.permissions import ApprovalAnswer, ApprovalRequest

PROMPT_TIMEOUT_S = 60.0
PERMISSION_TIMEOUT_S = 600.0
"""No answer to a permission question within this many seconds refuses the call."""


class TerminalApprover:
    """Asks y/N on the terminal; no answer within the timeout means no."""

    def __init__(
        self,
        timeout_s: float = PROMPT_TIMEOUT_S,
        stdin: TextIO | None = None,
        stderr: TextIO | None = None,
        lines: TerminalLines | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.lines = lines or TerminalLines(stdin or sys.stdin)
        self.stderr = stderr or sys.stderr

    async def __call__(self, request: ExtensionRequest) -> bool:
        extra = []
        if request.additional_tokens:
            extra.append(f"+{request.additional_tokens:,} tokens")
        if request.additional_usd:
            extra.append(f"+${request.additional_usd:.2f}")
        by = f" by {' and '.join(extra)}" if extra else ""
        self.stderr.write(
            f"\njourneyman: {request.reason}. Extend the budget{by}? "
            f"(extension {request.extensions_granted + 1} of {request.max_extensions}; "
            f"no answer in {self.timeout_s:.0f} s means no) [y/N] "
        )
        self.stderr.flush()
        answer = await self._read_line()
        granted = answer.strip().lower() in ("y", "yes")
        self.stderr.write("extension granted\n" if granted else "extension denied\n")
        return granted

    async def _read_line(self) -> str:
        return await self.lines.read_line(self.timeout_s)


class TerminalLines:
    """Reads answers from a terminal line by line without a buffered reader in between.

    Reading the file descriptor directly keeps typed-ahead answers: a buffered `readline()`
    would pull every pending line into its own buffer, where a later wait on the descriptor
    never sees them. One instance per input stream, shared by every prompt that reads it.
    """

    def __init__(self, stdin: TextIO) -> None:
        self.stdin = stdin
        self._pending = bytearray()
        self._eof = False

    def _take_line(self) -> str | None:
        end = self._pending.find(b"\n")
        if end < 0:
            if self._eof and self._pending:
                end = len(self._pending) - 1
            else:
                return None
        line = bytes(self._pending[: end + 1])
        del self._pending[: end + 1]
        return line.decode("utf-8", errors="replace")

    async def read_line(self, timeout_s: float) -> str:
        """The next line, or "" when none arrives within `timeout_s` or the input has ended."""
        line = self._take_line()
        if line is not None:
            return line
        if self._eof:
            return ""
        loop = asyncio.get_running_loop()
        arrived: asyncio.Future[str] = loop.create_future()
        fd = self.stdin.fileno()

        def readable() -> None:
            if arrived.done():
                return
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._pending.extend(chunk)
            found = self._take_line()
            if found is not None or self._eof:
                arrived.set_result(found or "")

        loop.add_reader(fd, readable)
        try:
            return await asyncio.wait_for(arrived, timeout_s)
        except TimeoutError:
            return ""
        finally:
            loop.remove_reader(fd)


PAGE_ROWS_WITHOUT_TERMINAL = 40
"""Rows of a change shown at a time when stderr is not a terminal whose size can be read."""


class TerminalPermissionApprover:
    """Asks yes / no / always about a tool call that needs the user's approval, after showing
    the whole call. A change taller than the terminal is shown a page at a time (Enter: the
    next page; q, or any other answer: stop reading and answer); whatever was not shown is
    counted in the question, whose default stays no. No answer to a page or to the question
    within the timeout refuses the call."""

    def __init__(
        self,
        lines: TerminalLines,
        timeout_s: float = PERMISSION_TIMEOUT_S,
        stderr: TextIO | None = None,
        page_rows: int | None = None,
    ) -> None:
        self.lines = lines
        self.timeout_s = timeout_s
        self.stderr = stderr or sys.stderr
        self.page_rows = page_rows
        """Rows a page may fill (None: the terminal's height, less the prompt)."""

    async def __call__(self, request: ApprovalRequest) -> ApprovalAnswer:
        always = (
            f", [a]lways (remembers {', '.join(printable_name(r) for r in request.remember_as)} "
            "for this project)"
            if request.remember_as
            else ""
        )
        described = describe_call(request.tool_name, request.args, request.project).split("\n")
        self.stderr.write(
            f"\njourneyman: {printable_name(request.tool_name)} needs your approval: "
            f"{printable(request.reason)}.\n"
        )
        unread = await self._show(described)
        if unread is None:
            self.stderr.write("\n  no answer: refused\n")
            return ApprovalAnswer.DENY
        if unread:
            self.stderr.write(
                f"  {unread:,} of {len(described):,} lines of this call were not shown. "
                "Answer y only if you accept what you did not read.\n"
            )
        self.stderr.write(f"  Allow it? [y]es, [N]o{always} ")
        self.stderr.flush()
        answer = (await self.lines.read_line(self.timeout_s)).strip().lower()
        # every answer ends with a line of its own: what follows starts on a fresh row even
        # when the answer was typed ahead (and so echoed before the question)
        if answer in ("y", "yes"):
            self.stderr.write("allowed\n")
            return ApprovalAnswer.ALLOW
        if answer in ("a", "always") and request.remember_as:
            self.stderr.write("allowed, and from now on for this project\n")
            return ApprovalAnswer.ALWAYS
        self.stderr.write("refused\n")
        return ApprovalAnswer.DENY

    async def _show(self, lines: list[str]) -> int | None:
        """Write `lines` a page at a time; the number of lines left unread when the reader
        stopped (0: all shown), or None when a page got no answer (timeout or end of input)."""
        rows, width = self._page_size()
        pages = _pages(lines, rows, width)
        if len(pages) > 1:
            self.stderr.write(
                f"  (the call takes {len(lines):,} lines, shown in {len(pages)} pages: "
                "Enter shows the next page, q stops reading and goes to the question)\n"
            )
        shown = 0
        for number, page in enumerate(pages, 1):
            self.stderr.write("".join(line + "\n" for line in page))
            shown += len(page)
            if number == len(pages):
                break
            self.stderr.write(
                f"  -- page {number} of {len(pages)}, lines 1-{shown:,} of {len(lines):,}; "
                "Enter: next page, q: stop reading and answer -- "
            )
            self.stderr.flush()
            typed = await self.lines.read_line(self.timeout_s)
            if not typed:
                return None
            if typed.strip():
                return len(lines) - shown
        return 0

    def _page_size(self) -> tuple[int, int]:
        """(rows, columns) a page may fill: the terminal's size on stderr, less three rows for
        the header and the page's prompt."""
        try:
            size = os.get_terminal_size(self.stderr.fileno())
            rows, width = size.lines - 3, size.columns
        except (OSError, ValueError):  # not a terminal (a file, a pipe, a test's buffer)
            rows, width = PAGE_ROWS_WITHOUT_TERMINAL, 0
        return (self.page_rows or max(rows, 5)), width


def _pages(lines: list[str], rows: int, width: int) -> list[list[str]]:
    """`lines` cut into pages of at most `rows` terminal rows, a line wider than the terminal
    (`width` columns, 0: unknown) counting as the rows it wraps to; a line taller than a page
    is cut at the terminal's width into pieces of a page each, so nothing scrolls off before
    it was on screen."""
    pages: list[list[str]] = [[]]
    used = 0
    for whole in lines:
        for line in _pieces(whole, rows, width):
            height = max(1, -(-cell_len(line) // width)) if width > 0 else 1
            if pages[-1] and used + height > rows:
                pages.append([])
                used = 0
            pages[-1].append(line)
            used += height
    return pages


def _pieces(line: str, rows: int, width: int) -> list[str]:
    line = line.expandtabs()
    if width <= 0 or cell_len(line) <= rows * width:
        return [line]
    wrapped = chop_cells(line, width)
    return ["".join(wrapped[at : at + rows]) for at in range(0, len(wrapped), rows)]


def choose_approver(
    auto_extend: int, interactive: bool, lines: TerminalLines | None = None
) -> ExtensionApprover:
    """`--auto-extend N` grants N without asking; otherwise ask on a terminal, else deny."""
    if auto_extend > 0:
        return AutoApprover(auto_extend)
    if interactive:
        return TerminalApprover(lines=lines)
    return deny_extensions
