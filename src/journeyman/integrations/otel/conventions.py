"""The names spans and attributes get: the OpenTelemetry GenAI semantic conventions (agent,
inference and tool-execution spans), plus journeyman's own `journeyman.*` attributes.

Plain strings only, so that nothing here needs the OpenTelemetry packages.
"""

from __future__ import annotations

AGENT_NAME = "journeyman"
"""`gen_ai.agent.name` of every run (a subagent's run too; `journeyman.parent_session_id`
tells them apart)."""

# operation names (`gen_ai.operation.name`)
INVOKE_AGENT = "invoke_agent"
CHAT = "chat"
EXECUTE_TOOL = "execute_tool"

# the GenAI attributes
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
"""All prompt tokens, cache reads and writes included (as the conventions ask)."""
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
"""Opt-in content: only with content capture, and redacted."""
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
"""Opt-in content: only with content capture, and redacted."""
OUTPUT_MESSAGES = "gen_ai.output.messages"
"""Opt-in content: only with content capture, and redacted."""
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

# journeyman's own
COST_USD = "journeyman.cost_usd"
"""US dollars of the call or run; left out when the model's price is unknown (never 0)."""
ITERATION = "journeyman.iteration"
MESSAGE_COUNT = "journeyman.request.message_count"
TOOL_COUNT = "journeyman.request.tool_count"
PARENT_SESSION_ID = "journeyman.parent_session_id"
RESUMED_AT_STEP = "journeyman.resumed_at_step"
FINISH_REASON = "journeyman.finish_reason"
FINISH_CATEGORY = "journeyman.finish_category"
ITERATIONS = "journeyman.iterations"
TOOL_CALLS = "journeyman.tool_calls"
HARNESS_CHECK = "journeyman.tool.harness_check"
"""The call is the harness's own check command (`--verify`), not one the model made."""
TERMINATES = "journeyman.tool.terminates"
LATENCY_S = "journeyman.latency_s"
COMPACTION_SUMMARY = "journeyman.compaction_summary"
"""The chat span is the compaction's summary call, not a turn of the run."""

# span events on the run span
BUDGET_EVENT = "journeyman.budget_level"
COMPACTION_EVENT = "journeyman.compaction"
NUDGE_EVENT = "journeyman.nudge"
APPROVAL_EVENT = "journeyman.approval"
"""A call that needed approval was granted or refused (by the user, a rule, --yes, the mode)."""
ERROR_EVENT = "journeyman.error"

_PROVIDERS = {"anthropic": "anthropic", "openai": "openai"}
"""journeyman's provider ids that are well-known values of `gen_ai.provider.name`; others
(`local`, `scripted`, a custom provider's name) are passed as they are."""


def provider_name(journeyman_provider: str) -> str:
    """The `gen_ai.provider.name` of one of journeyman's provider ids."""
    return _PROVIDERS.get(journeyman_provider, journeyman_provider or "unknown")


def chat_span_name(model: str) -> str:
    return f"{CHAT} {model}" if model else CHAT


def tool_span_name(tool: str) -> str:
    return f"{EXECUTE_TOOL} {tool}"


def agent_span_name() -> str:
    return f"{INVOKE_AGENT} {AGENT_NAME}"
