"""The default mode: ask the model, run the tools it calls, repeat until it finishes."""

from __future__ import annotations

from journeyman.core.messages import Message, ToolCall, ToolResult, pair_tool_results
from journeyman.core.result import FinishReason
from journeyman.loop import prompts
from journeyman.loop.budget_gate import capacity_reason
from journeyman.loop.port import TurnPort
from journeyman.loop.state import LoopState, TurnOutcome
from journeyman.policy.permissions import PERMISSION_ERROR_KIND


def offers(port: TurnPort, tool: str) -> bool:
    """Whether the run's request offers `tool` (by name)."""
    return port.tool_kind(ToolCall("", tool, {})) is not None


class ReactMode:
    async def iterate(self, state: LoopState, port: TurnPort) -> TurnOutcome:
        text_only = state.budget is not None and state.budget.text_only
        response = await port.call_model(state, tools_enabled=not text_only)
        state.messages.append(Message.assistant(response.text, response.tool_calls))

        if response.format_error is not None:
            return reject_malformed_reply(state, response.text, response.format_error)

        if not response.tool_calls:
            if not response.text.strip():
                reminder = prompts.empty_reply(offers(port, prompts.FINISH))
                state.messages.append(Message.user(reminder))
                return TurnOutcome(mistake=True)
            # a wrap-up forced by the budget ends for lack of budget, not as a success
            reason = capacity_reason(state.budget) if text_only else FinishReason.ANSWERED
            return TurnOutcome(text=response.text, finish_reason=reason, final_text=response.text)

        results = await port.run_tools(state, response.tool_calls)
        state.messages.extend(Message.tool(r) for r in results)
        finished = next((r for r in results if r.terminate and not r.is_error), None)
        return TurnOutcome(
            text=response.text,
            calls=response.tool_calls,
            results=tuple(results),
            mistake=all(counts_as_mistake(r) for r in results),
            finish_reason=FinishReason.COMPLETED if finished else None,
            final_text=finished.content if finished else "",
        )


def reject_malformed_reply(state: LoopState, text: str, error: str) -> TurnOutcome:
    """The model's last reply (already in the history) could not be used: none of its calls
    runs, each gets an error result (an API refuses a history with an unanswered call), and
    the model is told what was wrong."""
    assistant = state.messages[-1]
    state.messages.extend(Message.tool(r) for r in pair_tool_results(assistant, ()))
    state.messages.append(Message.user(prompts.FORMAT_ERROR.format(error=error)))
    return TurnOutcome(text=text, mistake=True)


def counts_as_mistake(result: ToolResult) -> bool:
    """A failed call is a mistake, except a first refusal by the permission gate: the model
    could not know the rule; asking again for the same refused call is a mistake."""
    if not result.is_error:
        return False
    if result.metadata.get("error") == PERMISSION_ERROR_KIND:
        return int(result.metadata.get("denials", 1)) > 1
    return True
