"""`journeyman run --otel` through the real CLI: spans reach an OTLP/HTTP receiver on
127.0.0.1 (decoded with the opentelemetry-proto classes), the endpoint variable alone turns
tracing on, and a missing extra or an unreachable collector is one line, never a traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.proto", reason="the otel extra is not installed")

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.integrations.otel.receiver import OtlpReceiver, ReceivedSpan
from tests.support.cli import clean_env, journeyman

SECRET = "s3cr3t-deploy-value-7781"
API_KEY = "sk-test-otel-0123456789abcdef"


def otel_free_env(**extra: str) -> dict[str, str]:
    """`clean_env` without any OTEL_* setting of the machine running the tests."""
    env = {k: v for k, v in clean_env().items() if not k.startswith("OTEL_")}
    env.update(extra)
    return env


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text(f"the deploy token is {SECRET}\n")
    return root


def script_a_read_then_finish(server: FakeOpenAIServer) -> None:
    server.enqueue(
        reply("Reading.", tool_calls=[("read_file", {"path": "notes.txt"})], input_tokens=40),
        reply(tool_calls=[("finish", {"summary": "read it"})], stop_reason="tool_calls"),
    )


def run_args(root: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--yes",
        "--no-verify",
        "read notes.txt",
        "-w",
        str(root),
        "--model",
        "gpt-4.1-mini",
        "--session-dir",
        str(tmp_path / "sessions"),
        "--output-format",
        "json",
        *extra,
    ]


def named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.name == name]


def test_run_with_otel_sends_the_span_tree_to_an_otlp_receiver(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = workspace(tmp_path)
    script_a_read_then_finish(fake_openai)
    with OtlpReceiver() as receiver:
        env = otel_free_env(
            OPENAI_API_KEY=API_KEY,
            OPENAI_BASE_URL=fake_openai.base_url,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            DEPLOY_TOKEN=SECRET,
        )
        done = journeyman(*run_args(root, tmp_path, "--otel"), env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    result = json.loads(done.stdout)

    assert set(receiver.paths) == {"/v1/traces"}
    spans = receiver.spans
    assert sorted(s.name for s in spans) == sorted(
        [
            "invoke_agent journeyman",
            "chat gpt-4.1-mini",
            "chat gpt-4.1-mini",
            "execute_tool read_file",
            "execute_tool finish",
        ]
    )
    (run,) = named(spans, "invoke_agent journeyman")
    assert run.parent_span_id == ""
    assert all(s.parent_span_id == run.span_id for s in spans if s is not run)
    assert {s.trace_id for s in spans} == {run.trace_id}
    assert run.resource["service.name"] == "journeyman"
    assert run.attributes["gen_ai.conversation.id"] == result["session_id"]
    assert run.attributes["gen_ai.provider.name"] == "openai"
    assert run.attributes["journeyman.finish_reason"] == "completed"
    assert run.status_code == 0  # unset: the run succeeded
    first, second = sorted(
        named(spans, "chat gpt-4.1-mini"), key=lambda s: s.attributes["journeyman.iteration"]
    )
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "gpt-4.1-mini"
    assert first.attributes["gen_ai.usage.input_tokens"] == 40
    assert first.attributes["gen_ai.usage.output_tokens"] == 7
    assert second.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    (read,) = named(spans, "execute_tool read_file")
    assert read.attributes["gen_ai.tool.name"] == "read_file"
    assert read.attributes["gen_ai.tool.call.id"]
    # the tool read the secret, the environment holds it and the API key: no span carries them
    body = b"".join(receiver.raw_bodies)
    assert SECRET.encode() not in body and API_KEY.encode() not in body
    assert b"deploy token" not in body


def test_the_endpoint_variable_alone_turns_tracing_on(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = workspace(tmp_path)
    script_a_read_then_finish(fake_openai)
    with OtlpReceiver() as receiver:
        env = otel_free_env(
            OPENAI_API_KEY=API_KEY,
            OPENAI_BASE_URL=fake_openai.base_url,
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=receiver.endpoint + "/v1/traces",
            OTEL_SERVICE_NAME="ci-agent",
        )
        done = journeyman(*run_args(root, tmp_path), env=env)
    assert done.returncode == 0, done.stderr
    assert len(named(receiver.spans, "invoke_agent journeyman")) == 1
    assert receiver.spans[0].resource["service.name"] == "ci-agent"


def test_without_the_otel_flag_or_endpoint_nothing_is_sent(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = workspace(tmp_path)
    script_a_read_then_finish(fake_openai)
    with OtlpReceiver() as receiver:
        env = otel_free_env(OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=fake_openai.base_url)
        done = journeyman(*run_args(root, tmp_path), env=env)
    assert done.returncode == 0, done.stderr
    assert receiver.spans == []


@pytest.fixture
def without_the_extra(tmp_path: Path) -> str:
    """A PYTHONPATH on which `opentelemetry` is an empty package: the extra looks uninstalled."""
    shadow = tmp_path / "shadow"
    (shadow / "opentelemetry").mkdir(parents=True)
    (shadow / "opentelemetry" / "__init__.py").write_text("")
    return str(shadow)


def test_otel_flag_without_the_extra_exits_2_with_one_line(
    fake_openai: FakeOpenAIServer, tmp_path: Path, without_the_extra: str
) -> None:
    root = workspace(tmp_path)
    env = otel_free_env(
        OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=fake_openai.base_url, PYTHONPATH=without_the_extra
    )
    done = journeyman(*run_args(root, tmp_path, "--otel"), env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "journeyman: --otel: OpenTelemetry export needs the otel extra, which is not installed; "
        "install it with: pip install 'journeyman[otel]'"
    ]
    assert fake_openai.requests == []  # refused before any model call


def test_endpoint_without_the_extra_is_a_note_and_the_run_goes_on(
    fake_openai: FakeOpenAIServer, tmp_path: Path, without_the_extra: str
) -> None:
    root = workspace(tmp_path)
    script_a_read_then_finish(fake_openai)
    env = otel_free_env(
        OPENAI_API_KEY=API_KEY,
        OPENAI_BASE_URL=fake_openai.base_url,
        PYTHONPATH=without_the_extra,
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318",
    )
    done = journeyman(*run_args(root, tmp_path), env=env)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "otel extra" in line]
    assert notes == [
        "journeyman: note: OTEL_EXPORTER_OTLP_ENDPOINT is set, but no traces are sent: "
        "OpenTelemetry export needs the otel extra, which is not installed; install it with: "
        "pip install 'journeyman[otel]'"
    ]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_collector_is_one_warning_and_the_run_still_succeeds(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = workspace(tmp_path)
    script_a_read_then_finish(fake_openai)
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = otel_free_env(
        OPENAI_API_KEY=API_KEY,
        OPENAI_BASE_URL=fake_openai.base_url,
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
    )
    done = journeyman(*run_args(root, tmp_path, "--otel"), env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if "traces could not be sent" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"journeyman: warning: traces could not be sent to {endpoint}")
    assert json.loads(done.stdout)["success"]


def test_a_continued_session_is_traced_under_the_same_conversation_id(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = workspace(tmp_path)
    fake_openai.enqueue(reply("Hello."), reply("Still here."))
    env = otel_free_env(OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=fake_openai.base_url)
    first = journeyman(*run_args(root, tmp_path), env=env)
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)["session_id"]
    with OtlpReceiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        follow_up = run_args(root, tmp_path, "--otel", "--continue", session)
        follow_up[follow_up.index("read notes.txt")] = "are you there?"
        done = journeyman(*follow_up, env=env)
    assert done.returncode == 0, done.stderr
    (run,) = named(receiver.spans, "invoke_agent journeyman")
    assert run.attributes["gen_ai.conversation.id"] == session
    assert run.attributes["journeyman.resumed_at_step"] == 1
    assert len(named(receiver.spans, "chat gpt-4.1-mini")) == 1


def test_subagent_runs_nest_under_their_spawn_call_from_the_command_line(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    root = workspace(tmp_path)
    fake_openai.enqueue(
        reply(tool_calls=[("spawn_agent", {"task": "list the files"})]),
        reply("Only notes.txt."),  # the subagent's answer
        reply("The workspace holds notes.txt."),
    )
    with OtlpReceiver() as receiver:
        env = otel_free_env(
            OPENAI_API_KEY=API_KEY,
            OPENAI_BASE_URL=fake_openai.base_url,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        )
        done = journeyman(*run_args(root, tmp_path, "--otel", "--subagents"), env=env)
    assert done.returncode == 0, done.stderr
    runs = named(receiver.spans, "invoke_agent journeyman")
    (parent,) = [r for r in runs if not r.parent_span_id]
    (spawn,) = named(receiver.spans, "execute_tool spawn_agent")
    (child,) = [r for r in runs if r.parent_span_id]
    assert spawn.parent_span_id == parent.span_id
    assert child.parent_span_id == spawn.span_id
    assert child.trace_id == parent.trace_id
    assert child.attributes["journeyman.parent_session_id"] == json.loads(done.stdout)["session_id"]
