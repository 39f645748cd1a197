"""Plan-and-solve: one turn in which the model writes a plan without tools, then react turns."""

from __future__ import annotations

from journeyman.core.messages import Message
from journeyman.loop.modes.react import ReactMode
from journeyman.loop.port import TurnPort
from journeyman.loop.state import LoopState, TurnOutcome

PLAN_REQUEST = """\
[journeyman] Before you touch anything, write a short numbered plan for this task: what you \
need to find out, what you expect to change, and how you will check that it works. No tools in \
this turn; you will carry out the plan in the next turns, and may revise it as you learn more."""


class PlanSolveMode:
    """The first turn asks for a plan (tools withheld); every later turn is a react turn.

    Whether the plan was made is read from the history itself, so a resumed session does not
    plan twice.
    """

    def __init__(self) -> None:
        self.react = ReactMode()

    async def iterate(self, state: LoopState, port: TurnPort) -> TurnOutcome:
        if any(m.content == PLAN_REQUEST for m in state.messages):
            return await self.react.iterate(state, port)
        state.messages.append(Message.user(PLAN_REQUEST))
        response = await port.call_model(state, tools_enabled=False)
        plan = response.text.strip() or "(no plan was written)"
        state.messages.append(Message.assistant(plan))
        return TurnOutcome(text=plan)
