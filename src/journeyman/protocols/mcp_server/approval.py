"""Asking the client's user about a call that needs approval, through MCP elicitation.

A run started by a tool call that waits (wait=true) can ask while that call is open: the
question goes to the client as a form with one choice (allow once, allow always, deny). Any
other answer, no answer within the server's timeout, or a question asked after the tool call
returned, refuses the call; the run goes on either way. Only calls the permission policy would
ask about get here: deny rules, plan mode, the sandbox and the limits are settled before.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from mcp.server.mcpserver import Context
from mcp_types import ClientCapabilities, ElicitationCapability
from pydantic import BaseModel, Field

from journeyman.core.display import printable, printable_name
from journeyman.policy.call_description import describe_call
from journeyman.policy.permissions import ApprovalAnswer, ApprovalRequest

DEFAULT_APPROVAL_TIMEOUT_S = 60.0
"""How long a question waits for the client's answer before the call is refused."""

log = logging.getLogger(__name__)


class OnceOrDeny(BaseModel):
    """The answer when the call cannot be remembered as a rule."""

    decision: Literal["allow_once", "deny"] = Field(
        description="allow_once: run this call; deny: refuse it."
    )


class OnceAlwaysOrDeny(BaseModel):
    """The answer when "always" can be remembered for this tool and pattern."""

    decision: Literal["allow_once", "allow_always", "deny"] = Field(
        description="allow_once: run this call; allow_always: run it and every call like it "
        "in this project without asking; deny: refuse it."
    )


def client_can_elicit(ctx: Context) -> bool:
    """Whether the client declared the elicitation capability when it connected, and this
    request's channel can carry a question from the server (the SDK offers none to clients on
    the stateless 2026-07-28 protocol, nor to an in-process client that skips the handshake)."""
    try:
        session = ctx.request_context.session
        wanted = ClientCapabilities(elicitation=ElicitationCapability())
        return bool(session.check_client_capability(wanted)) and bool(session.can_send_request)
    except Exception:  # no request, or a transport that records no capabilities
        return False


class ElicitingApprover:
    """An `Approver` that asks through the tool call that started the run, while it is open."""

    def __init__(self, ctx: Context, workspace: str, timeout_s: float) -> None:
        self.ctx = ctx
        self.workspace = workspace
        self.timeout_s = timeout_s
        self.open = True
        """False once the tool call returned: there is no request left to ask through."""

    def close(self) -> None:
        self.open = False

    async def __call__(self, request: ApprovalRequest) -> ApprovalAnswer:
        if not self.open:
            log.warning(
                "%s needs approval but the tool call that started the run has returned: refused",
                request.tool_name,
            )
            return ApprovalAnswer.DENY
        always = bool(request.remember_as)
        schema: type[OnceOrDeny] | type[OnceAlwaysOrDeny] = (
            OnceAlwaysOrDeny if always else OnceOrDeny
        )
        try:
            result = await asyncio.wait_for(
                self.ctx.elicit(question(request, self.workspace), schema), self.timeout_s
            )
        except TimeoutError:
            log.warning("no answer about %s within %gs: refused", request.tool_name, self.timeout_s)
            return ApprovalAnswer.DENY
        except Exception as error:  # the client failed or went away: refuse, the run goes on
            log.warning("asking about %s failed (%s): refused", request.tool_name, error)
            return ApprovalAnswer.DENY
        if result.action != "accept":
            return ApprovalAnswer.DENY
        decision = result.data.decision
        if decision == "allow_once":
            return ApprovalAnswer.ALLOW
        if decision == "allow_always" and always:
            return ApprovalAnswer.ALWAYS
        return ApprovalAnswer.DENY


def question(request: ApprovalRequest, workspace: str) -> str:
    """The text the client's user reads: the tool, why it needs approval, what it would do
    (the whole call, never cut, escaped as on the terminal)."""
    lines = [
        f"journeyman wants to run {printable_name(request.tool_name)} "
        f"({printable(request.reason)}):",
        describe_call(request.tool_name, request.args, workspace),
    ]
    if request.remember_as:
        lines.append(
            "allow_always also allows from now on, in this project: "
            + printable_name(", ".join(request.remember_as))
        )
    lines.append(
        "Choose allow_once, allow_always or deny."
        if request.remember_as
        else "Choose allow_once or deny."
    )
    return "\n".join(lines)
