"""Finding a local OpenAI-compatible server when nothing is configured, against small local
HTTP servers on free ports (JOURNEYMAN_LOCAL_PORTS points the search at them)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.support.cli import clean_env, jm

from journeyman.core.errors import ConfigurationError
from journeyman.providers.factory import create_provider
from journeyman.providers.local_servers import candidate_servers, find_local_server
from journeyman.providers.openai import OpenAIProvider


class _Models(BaseHTTPRequestHandler):
    models: tuple[str, ...] = ()

    def do_GET(self) -> None:
        if self.path != "/v1/models":
            self.send_error(404)
            return
        body = json.dumps(
            {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(models: tuple[str, ...]) -> Iterator[int]:
    handler = type("Handler", (_Models,), {"models": models})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def one_model() -> Iterator[int]:
    yield from _serve(("qwen2.5-coder:7b",))


@pytest.fixture
def two_models() -> Iterator[int]:
    yield from _serve(("small", "large"))


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_first_port_that_lists_models_is_used(one_model: int, tmp_path: Path) -> None:
    notices: list[str] = []
    env = {"JOURNEYMAN_LOCAL_PORTS": f"Nothing={closed_port()},Ollama={one_model}"}
    provider = create_provider(env=env, discover_local=True, on_notice=notices.append)
    assert isinstance(provider, OpenAIProvider)
    assert provider.model == "qwen2.5-coder:7b"
    assert provider._base_url.startswith(f"http://127.0.0.1:{one_model}/v1")
    assert notices == [
        f"using the Ollama server found at http://127.0.0.1:{one_model}/v1, model qwen2.5-coder:7b"
    ]


def test_a_server_with_several_models_needs_one_named(two_models: int) -> None:
    env = {"JOURNEYMAN_LOCAL_PORTS": str(two_models)}
    with pytest.raises(ConfigurationError) as caught:
        create_provider(env=env, discover_local=True)
    assert "pass one with --model NAME" in caught.value.message
    assert "  - small\n  - large" in caught.value.message
    chosen = create_provider(model="large", env=env, discover_local=True)
    assert chosen.model == "large"


def test_with_nothing_listening_the_help_names_the_ports_tried() -> None:
    port = closed_port()
    with pytest.raises(ConfigurationError) as caught:
        create_provider(env={"JOURNEYMAN_LOCAL_PORTS": f"vLLM={port}"}, discover_local=True)
    assert "No model provider is configured" in caught.value.message
    assert f"vLLM {port}" in caught.value.message


def test_a_configured_key_is_never_overridden_by_a_local_server(one_model: int) -> None:
    env = {"JOURNEYMAN_LOCAL_PORTS": str(one_model), "OPENAI_API_KEY": "sk-test"}
    provider = create_provider(env=env, discover_local=True)
    assert provider.model == "gpt-4.1-mini"


def test_the_usual_ports_and_the_override() -> None:
    assert [port for _, port in candidate_servers({})] == [11434, 8080, 1234, 8000]
    assert candidate_servers({"JOURNEYMAN_LOCAL_PORTS": "none"}) == ()
    assert find_local_server({"JOURNEYMAN_LOCAL_PORTS": "none"}) is None
    with pytest.raises(ConfigurationError, match="not a port"):
        candidate_servers({"JOURNEYMAN_LOCAL_PORTS": "Ollama=eleven"})


def test_the_cli_lists_the_models_of_the_server_it_found(two_models: int, tmp_path: Path) -> None:
    env = clean_env(JOURNEYMAN_LOCAL_PORTS=f"LM Studio={two_models}")
    run = jm("run", "task", "-w", str(tmp_path), "--session-dir", str(tmp_path / "s"), env=env)
    assert run.returncode == 2, run.stderr
    assert "LM Studio server at" in run.stderr and "- small" in run.stderr
    assert "Traceback" not in run.stderr
