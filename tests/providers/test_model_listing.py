"""Without --model, a server given by its base URL (not OpenAI's own) is asked for its models,
as a server found on the local ports is: its only model is used, several are listed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.fakes import FakeOpenAIServer
from tests.providers.test_local_servers import _Models
from tests.support.cli import clean_env, jm

from journeyman.core.errors import ConfigurationError
from journeyman.providers.factory import create_provider


class _ModelsOnly(_Models):
    """Lists its models; a chat request gets a 400 (not retried), so runs end at once."""

    def do_POST(self) -> None:
        self.send_error(400, "this server only lists models")


def _serve(models: tuple[str, ...]) -> Iterator[int]:
    handler = type("Handler", (_ModelsOnly,), {"models": models})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def one_model() -> Iterator[int]:
    yield from _serve(("qwen2.5-coder:7b",))


@pytest.fixture
def two_models() -> Iterator[int]:
    yield from _serve(("small", "large"))


def url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


def test_the_only_model_a_server_lists_is_used_and_said(one_model: int) -> None:
    notices: list[str] = []
    made = create_provider(base_url=url(one_model), env={}, on_notice=notices.append)
    assert made.model == "qwen2.5-coder:7b"
    assert notices == [
        f"no model given: using qwen2.5-coder:7b, the only model the server at "
        f"{url(one_model)} lists"
    ]
    from_env = create_provider(env={"OPENAI_BASE_URL": url(one_model)})
    assert from_env.model == "qwen2.5-coder:7b"


def test_several_models_are_listed_for_the_user_to_choose(two_models: int) -> None:
    with pytest.raises(ConfigurationError) as caught:
        create_provider("openai", base_url=url(two_models), env={})
    assert "has several models; pass one with --model NAME" in caught.value.message
    assert "  - small\n  - large" in caught.value.message


def test_a_model_given_anywhere_is_used_without_asking(two_models: int) -> None:
    assert create_provider(base_url=url(two_models), model="large", env={}).model == "large"
    env = {"JOURNEYMAN_MODEL": "small"}
    assert create_provider(base_url=url(two_models), env=env).model == "small"


def test_a_server_without_a_model_list_gets_the_default_model(
    fake_openai: FakeOpenAIServer,
) -> None:
    """Not every OpenAI-compatible service lists its models (the fake answers GET with 404)."""
    assert create_provider(base_url=fake_openai.base_url, env={}).model == "gpt-4.1-mini"


def test_a_server_that_is_not_running_is_named() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with pytest.raises(ConfigurationError) as caught:
        create_provider(base_url=url(port), env={})
    assert caught.value.message == (
        f"nothing is listening on 127.0.0.1:{port}; is the server running?"
    )


def test_run_with_a_base_url_and_no_model_uses_the_servers_model(
    one_model: int, two_models: int, tmp_path: Path
) -> None:
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"))
    several = jm("run", "hi", "-w", str(tmp_path), "--base-url", url(two_models), env=env)
    assert several.returncode == 2 and "  - small" in several.stderr
    one = jm("run", "hi", "-w", str(tmp_path), "--base-url", url(one_model), env=env)
    assert "gpt-4.1-mini" not in one.stdout + one.stderr
    assert "openai:qwen2.5-coder:7b" in one.stdout


def test_a_server_that_takes_an_api_key_is_not_asked(fake_openai: FakeOpenAIServer) -> None:
    """A key means a hosted service: its default model is used, nothing is listed."""
    env = {"OPENAI_API_KEY": "sk-test"}
    assert create_provider(base_url=fake_openai.base_url, env=env).model == "gpt-4.1-mini"
    assert fake_openai.requests == []
