"""Scripted runs traced into the SDK's in-memory exporter: the span tree, names, GenAI
attributes and statuses, subagents under their spawn call, and no secret on any span."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from journeyman import tool
from journeyman.core.errors import LLMError
from journeyman.core.events import ToolResultReceived
from journeyman.core.messages import ToolCall, Usage
from journeyman.integrations.otel import trace_agent
from journeyman.providers.base import ModelResponse
from journeyman.swarm.spawn import with_subagents
from journeyman.tools.builtin import default_tools
from tests.fakes.agents import NO_RETRY, TextArgs, call, echo, make_agent, turn

PRICE = (10.0, 10.0)
"""USD per million input and output tokens."""
FINISH_TOOL = next(t for t in default_tools() if t.name == "finish")


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    yield memory
    memory.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def exported_text(spans: tuple[ReadableSpan, ...]) -> str:
    """Everything the exporter would send: names, attributes, events, statuses."""
    return "\n".join(span.to_json() for span in spans)


async def test_a_run_is_one_agent_span_with_its_model_and_tool_calls_under_it(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script = [
        ModelResponse(
            text="",
            tool_calls=(call("echo", "c1", text="hi"),),
            usage=Usage(100, 20, cache_read_tokens=50, cache_write_tokens=5),
            stop_reason="tool_use",
        ),
        ModelResponse(
            text="",
            tool_calls=(ToolCall("fin", "finish", {"summary": "done"}),),
            usage=Usage(30, 10),
            stop_reason="tool_use",
        ),
    ]
    agent, _ = make_agent(
        tmp_path,
        script,
        tools=[echo, FINISH_TOOL],
        provider_options={"name": "anthropic", "model": "claude-test"},
        price_per_mtok=PRICE,
        verify=False,
        max_output_tokens=777,
        temperature=0.25,
    )
    with trace_agent(agent, tracer_provider=provider):
        result = await agent.run("say hi")
    assert result.success

    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == sorted(
        [
            "invoke_agent journeyman",
            "chat claude-test",
            "chat claude-test",
            "execute_tool echo",
            "execute_tool finish",
        ]
    )
    (run,) = by_name(spans, "invoke_agent journeyman")
    assert run.parent is None and run.kind is SpanKind.INTERNAL
    assert {s.context.trace_id for s in spans if s.context} == {run.context.trace_id}  # type: ignore[union-attr]
    assert all(parent_of(s) == span_id(run) for s in spans if s is not run)
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "journeyman"
    assert run.attributes["gen_ai.provider.name"] == "anthropic"
    assert run.attributes["gen_ai.request.model"] == "claude-test"
    assert run.attributes["gen_ai.conversation.id"] == result.session_id
    assert run.attributes["journeyman.finish_reason"] == "completed"
    assert run.attributes["journeyman.finish_category"] == "success"
    assert run.attributes["journeyman.iterations"] == 2
    assert run.attributes["journeyman.tool_calls"] == 2
    assert run.attributes["gen_ai.usage.input_tokens"] == 185  # cache reads and writes count
    assert run.attributes["gen_ai.usage.output_tokens"] == 30
    assert run.attributes["gen_ai.usage.cache_read.input_tokens"] == 50
    assert run.attributes["journeyman.cost_usd"] == pytest.approx(result.cost_usd)
    assert run.status.status_code is StatusCode.UNSET

    first, second = sorted(by_name(spans, "chat claude-test"), key=lambda s: s.start_time or 0)
    assert first.kind is SpanKind.CLIENT
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "anthropic"
    assert first.attributes["gen_ai.request.model"] == "claude-test"
    assert first.attributes["gen_ai.request.max_tokens"] == 777
    assert first.attributes["gen_ai.request.temperature"] == 0.25
    assert first.attributes["gen_ai.usage.input_tokens"] == 155
    assert first.attributes["gen_ai.usage.output_tokens"] == 20
    assert first.attributes["gen_ai.usage.cache_read.input_tokens"] == 50
    assert first.attributes["gen_ai.usage.cache_creation.input_tokens"] == 5
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert first.attributes["gen_ai.response.model"] == "claude-test"
    assert first.attributes["journeyman.iteration"] == 1
    assert second.attributes["journeyman.iteration"] == 2
    costs = [first.attributes["journeyman.cost_usd"], second.attributes["journeyman.cost_usd"]]
    assert sum(costs) == pytest.approx(result.cost_usd)  # type: ignore[arg-type]

    (echo_span,) = by_name(spans, "execute_tool echo")
    assert echo_span.attributes is not None
    assert echo_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert echo_span.attributes["gen_ai.tool.name"] == "echo"
    assert echo_span.attributes["gen_ai.tool.call.id"] == "c1"
    assert echo_span.attributes["gen_ai.conversation.id"] == result.session_id
    assert echo_span.status.status_code is StatusCode.UNSET
    # the tool ran between the two model calls
    assert first.end_time is not None and echo_span.start_time is not None
    assert first.end_time <= echo_span.start_time
    assert echo_span.end_time is not None and second.start_time is not None
    assert echo_span.end_time <= second.start_time
    (finish_span,) = by_name(spans, "execute_tool finish")
    assert finish_span.attributes is not None
    assert finish_span.attributes["journeyman.tool.terminates"] is True


async def test_failures_set_error_status_on_the_tool_model_and_run_spans(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script: list[Any] = [
        turn(call("no_such_tool", "bad", text="x")),
        LLMError("the model service is down"),
    ]
    agent, _ = make_agent(
        tmp_path, script, tools=[echo, FINISH_TOOL], retry_policy=NO_RETRY, verify=False
    )
    with trace_agent(agent, tracer_provider=provider):
        result = await agent.run("do it")
    assert not result.success

    spans = exporter.get_finished_spans()
    (run,) = by_name(spans, "invoke_agent journeyman")
    (bad_tool,) = by_name(spans, "execute_tool no_such_tool")
    assert bad_tool.status.status_code is StatusCode.ERROR
    assert bad_tool.attributes is not None and bad_tool.attributes["error.type"]
    calls = sorted(by_name(spans, "chat scripted"), key=lambda s: s.start_time or 0)
    assert [c.status.status_code for c in calls] == [StatusCode.UNSET, StatusCode.ERROR]
    assert calls[1].attributes is not None and calls[1].attributes["error.type"]
    assert "the model service is down" in (calls[1].status.description or "")
    assert all(parent_of(s) == span_id(run) for s in spans if s is not run)
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes is not None
    assert run.attributes["journeyman.finish_reason"] == result.finish_reason.value
    assert run.attributes["error.type"] == result.finish_reason.value
    assert (run.status.description or "").startswith(result.finish_reason.value)


SECRET = "hunter2-very-secret-value-0451"
FOREIGN_KEY = "sk-ant-api03-" + "Q" * 40


@tool(args=TextArgs)
def leak(args: TextArgs, ctx: object) -> str:
    """Prints what a careless tool would: the environment's token and a key it found."""
    return f"token={SECRET} key={FOREIGN_KEY} asked={args.text}"


@pytest.mark.parametrize("capture_content", [False, True])
async def test_no_secret_reaches_any_span(
    tmp_path: Path,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    capture_content: bool,
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    script = [
        turn(call("leak", "l1", text=f"use {SECRET}"), text=f"I will send {SECRET}"),
        turn(text=f"The key is {FOREIGN_KEY}."),
    ]
    agent, _ = make_agent(tmp_path, script, tools=[leak, FINISH_TOOL], verify=False)
    with trace_agent(agent, tracer_provider=provider, capture_content=capture_content):
        result = await agent.run(f"deploy with {SECRET}")
    assert result.success

    text = exported_text(exporter.get_finished_spans())
    assert SECRET not in text and FOREIGN_KEY not in text
    assert "hunter2" not in text
    (tool_span,) = by_name(exporter.get_finished_spans(), "execute_tool leak")
    assert tool_span.attributes is not None
    if capture_content:  # captured, but redacted
        assert "[REDACTED]" in str(tool_span.attributes["gen_ai.tool.call.result"])
        arguments = json.loads(str(tool_span.attributes["gen_ai.tool.call.arguments"]))
        assert arguments == {"text": "use [REDACTED]"}
    else:  # nothing the model or a tool wrote
        assert "gen_ai.tool.call.result" not in tool_span.attributes
        assert "gen_ai.tool.call.arguments" not in tool_span.attributes
        assert "asked=" not in text and "I will send" not in text and "deploy with" not in text


async def test_a_subagent_run_nests_under_the_spawn_call_that_started_it(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script = [
        turn(ToolCall("s1", "spawn_agent", {"task": "list the modules"})),
        turn(text="two modules: a and b"),  # the child's answer
        turn(text="the project has two modules"),
    ]
    agent, _ = make_agent(tmp_path, script, verify=False, sandbox="local")
    tracing = trace_agent(agent, tracer_provider=provider)
    result = await with_subagents(agent, True).run("what is in this project?")
    tracing.close()
    assert result.success

    spans = exporter.get_finished_spans()
    runs = by_name(spans, "invoke_agent journeyman")
    assert len(runs) == 2
    (root,) = [r for r in runs if r.parent is None]
    (child,) = [r for r in runs if r.parent is not None]
    (spawn,) = by_name(spans, "execute_tool spawn_agent")
    assert parent_of(spawn) == span_id(root)
    assert parent_of(child) == span_id(spawn)
    assert child.context is not None and root.context is not None
    assert child.context.trace_id == root.context.trace_id
    assert child.attributes is not None
    assert child.attributes["journeyman.parent_session_id"] == result.session_id
    child_calls = [s for s in by_name(spans, "chat scripted") if parent_of(s) == span_id(child)]
    assert len(child_calls) == 1
    assert spawn.start_time is not None and child.start_time is not None
    assert spawn.start_time <= child.start_time
    assert child.end_time is not None and spawn.end_time is not None
    assert child.end_time <= spawn.end_time


async def test_detach_gives_the_agent_its_own_handler_back(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seen: list[str] = []
    agent, _ = make_agent(tmp_path, [turn(text="hello"), turn(text="again")], verify=False)
    agent.on_event = lambda event: seen.append(event.type)
    with trace_agent(agent, tracer_provider=provider):
        await agent.run("greet")
    traced = len(exporter.get_finished_spans())
    assert "run_started" in seen and traced == 2  # the run and its one model call
    await agent.run("greet again")
    assert len(exporter.get_finished_spans()) == traced
    assert seen.count("run_started") == 2


async def test_a_run_inside_the_callers_span_becomes_its_child(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent, _ = make_agent(tmp_path, [turn(text="hello")], verify=False)
    with (
        trace_agent(agent, tracer_provider=provider),
        provider.get_tracer("app").start_as_current_span("nightly job") as job,
    ):
        await agent.run("greet")
    spans = exporter.get_finished_spans()
    (run,) = by_name(spans, "invoke_agent journeyman")
    assert parent_of(run) == job.get_span_context().span_id


def test_without_the_extra_the_library_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import journeyman.integrations.otel as otel

    monkeypatch.setattr(otel, "otel_installed", lambda: False)
    with pytest.raises(ImportError, match=r"pip install 'journeyman\[otel\]'"):
        otel.trace_agent  # noqa: B018


async def test_approval_decisions_are_events_of_the_run_span(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from journeyman.policy.permissions import PermissionMode
    from tests.fakes.agents import FINISH, WRITE, policy_agent

    agent, _, _ = policy_agent(
        tmp_path, [turn(WRITE), turn(FINISH)], mode=PermissionMode.DEFAULT, assume_yes=True
    )
    with trace_agent(agent, tracer_provider=provider):
        await agent.run("write it")
    (run,) = by_name(exporter.get_finished_spans(), "invoke_agent journeyman")
    (approval,) = [e for e in run.events if e.name == "journeyman.approval"]
    assert approval.attributes is not None
    assert dict(approval.attributes) == {
        "gen_ai.tool.name": "write_file",
        "gen_ai.tool.call.id": WRITE.id,
        "granted": True,
        "decided_by": "yes",
    }


async def test_chat_spans_say_which_model_answered_and_the_reply_limit_sent(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script = [ModelResponse(text="hi", usage=Usage(10, 5), model="claude-test-20260101")]
    agent, scripted = make_agent(
        tmp_path,
        script,
        provider_options={"name": "anthropic", "model": "claude-test"},
        price_per_mtok=PRICE,
        max_budget_usd=0.1,  # 10,000 tokens in all: the reply limit is cut to fit
        max_output_tokens=50_000,
        verify=False,
    )
    with trace_agent(agent, tracer_provider=provider):
        await agent.run("greet")
    (chat,) = by_name(exporter.get_finished_spans(), "chat claude-test")
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.response.model"] == "claude-test-20260101"
    (request,) = scripted.requests
    assert request.max_output_tokens < 50_000
    assert chat.attributes["gen_ai.request.max_tokens"] == request.max_output_tokens


async def test_children_of_the_same_task_nest_under_their_own_spawn_call(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script = [
        turn(
            ToolCall("s1", "spawn_agent", {"task": "list the modules"}),
            ToolCall("s2", "spawn_agent", {"task": "list the modules"}),
        ),
        turn(text="first child"),
        turn(text="second child"),
        turn(text="both agree"),
    ]
    agent, _ = make_agent(tmp_path, script, verify=False, sandbox="local")
    reports: dict[str, str] = {}

    def note(event: object) -> None:
        if isinstance(event, ToolResultReceived) and event.result.name == "spawn_agent":
            reports[event.result.call_id] = str(event.result.metadata["child_session_id"])

    agent.on_event = note
    with trace_agent(agent, tracer_provider=provider):
        await with_subagents(agent, True).run("what is in this project?")
    spans = exporter.get_finished_spans()
    spawns = {
        s.attributes["gen_ai.tool.call.id"]: s
        for s in by_name(spans, "execute_tool spawn_agent")
        if s.attributes is not None
    }
    children = {
        s.attributes["gen_ai.conversation.id"]: s
        for s in by_name(spans, "invoke_agent journeyman")
        if s.parent is not None and s.attributes is not None
    }
    assert set(reports) == {"s1", "s2"} and len(children) == 2
    for call_id, child_session in reports.items():
        assert parent_of(children[child_session]) == span_id(spawns[call_id])


def test_a_compaction_summary_call_is_a_chat_span_of_its_own(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from journeyman.core import events as ev
    from journeyman.integrations.otel import AgentTracing

    tracer = AgentTracing(provider).handler()
    tracer(ev.RunStarted("s1", "task", "anthropic", "claude-test", "/w", timestamp=100.0))
    tracer(
        ev.SummaryCallMade(
            iteration=4,
            usage=Usage(900, 60),
            cost_usd=0.01,
            latency_s=2.0,
            max_output_tokens=2_048,
            model="claude-test-1",
            provider="anthropic",
            timestamp=110.0,
        )
    )
    (summary,) = by_name(exporter.get_finished_spans(), "chat claude-test")
    assert summary.attributes is not None
    assert summary.attributes["journeyman.compaction_summary"] is True
    assert summary.attributes["gen_ai.usage.input_tokens"] == 900
    assert summary.attributes["gen_ai.usage.output_tokens"] == 60
    assert summary.attributes["gen_ai.request.max_tokens"] == 2_048
    assert summary.attributes["gen_ai.response.model"] == "claude-test-1"
    assert summary.start_time == 108_000_000_000 and summary.end_time == 110_000_000_000
