"""Who decides on a budget extension: a pluggable async approver."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from journeyman.economics.budget import ExtensionRequest

ExtensionApprover = Callable[[ExtensionRequest], Awaitable[bool]]
"""Returns True to grant the request. Must not raise; a slow approver should time out to deny."""


async def deny_extensions(_request: ExtensionRequest) -> bool:
    """The default for non-interactive runs."""
    return False


class AutoApprover:
    """Grants the first `remaining` requests without asking (`--auto-extend N`), then denies."""

    def __init__(self, remaining: int) -> None:
        self.remaining = remaining

    async def __call__(self, _request: ExtensionRequest) -> bool:
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True
