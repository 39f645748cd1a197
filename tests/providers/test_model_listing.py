"""Without --model, a server given by its base URL (not OpenAI's own) is asked for its models
through the SDK, as a server found on the local ports is, whether or not an API key is set: its
only model is used and said, several are listed for the user to choose (exit 2), and a server
that lists none or cannot be asked is an error naming --model."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.fakes import FakeOpenAIServer, reply
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


def test_a_server_without_a_model_list_is_an_error_naming_model() -> None:
    """Not every OpenAI-compatible service lists its models: then the user names one."""
    with FakeOpenAIServer() as server:
        server.models = None
        with pytest.raises(ConfigurationError) as caught:
            create_provider(base_url=server.base_url, env={"OPENAI_API_KEY": "sk-test"})
        assert caught.value.message == (
            f"no model given and the server at {server.base_url} does not list its models "
            "(GET /models answered HTTP 404); pass --model NAME"
        )


def test_a_server_listing_no_models_says_to_load_one() -> None:
    with FakeOpenAIServer() as server:
        server.models = ()
        with pytest.raises(ConfigurationError) as caught:
            create_provider(base_url=server.base_url, env={})
    assert "lists no models; load or pull one, then pass --model NAME" in caught.value.message


def test_a_long_model_list_is_cut_and_counted() -> None:
    with FakeOpenAIServer() as server:
        server.models = tuple(f"model-{n}" for n in range(45))
        with pytest.raises(ConfigurationError) as caught:
            create_provider(base_url=server.base_url, env={"OPENAI_API_KEY": "sk-test"})
        message = caught.value.message
        assert "  - model-19\n" in message and "model-20" not in message
        assert f"... and 25 more (GET {server.base_url}/models lists all)" in message


def test_a_server_that_is_not_running_is_named() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with pytest.raises(ConfigurationError) as caught:
        create_provider(base_url=url(port), env={})
    assert caught.value.message == (
        f"no model given and the server at {url(port)} could not be asked for its models: "
        f"nothing is listening on 127.0.0.1:{port}; is the server running? (or pass --model "
        "NAME)"
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


def test_an_api_key_in_the_environment_does_not_stop_the_question(
    fake_openai: FakeOpenAIServer,
) -> None:
    """OPENAI_API_KEY set for OpenAI itself must not send OpenAI's default model name to
    another server: it is asked (with the key) like a server that needs none."""
    fake_openai.models = ("qwen2.5-coder:7b",)
    env = {"OPENAI_API_KEY": "sk-test"}
    assert create_provider(base_url=fake_openai.base_url, env=env).model == "qwen2.5-coder:7b"
    assert fake_openai.model_list_requests == 1
    assert fake_openai.requests == []


def test_openais_own_api_is_not_asked() -> None:
    """OpenAI's own API gets the default model without a question (it lists hundreds)."""
    made = create_provider(base_url="https://api.openai.com/v1", env={"OPENAI_API_KEY": "sk-t"})
    assert made.model == "gpt-4.1-mini"


def test_run_with_an_api_key_and_a_base_url_uses_the_servers_model(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The newcomer's case: OPENAI_API_KEY set, --base-url to a local server, no --model."""
    fake_openai.models = ("qwen2.5-coder:7b",)
    fake_openai.enqueue(reply("nothing to do"))
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"), OPENAI_API_KEY="sk-test")
    done = jm(
        "run", "hi", "-w", str(tmp_path), "--base-url", fake_openai.base_url,
        "--max-iterations", "1", env=env,
    )  # fmt: skip
    assert fake_openai.requests[0].body["model"] == "qwen2.5-coder:7b"
    assert "gpt-4.1-mini" not in done.stdout + done.stderr
    assert (
        "note: no model given: using qwen2.5-coder:7b, the only model the server at "
        f"{fake_openai.base_url} lists" in done.stderr
    )
    fake_openai.models = ("small", "large")
    several = jm("run", "hi", "-w", str(tmp_path), "--base-url", fake_openai.base_url, env=env)
    assert several.returncode == 2
    assert "has several models; pass one with --model NAME:\n  - small\n  - large" in (
        several.stderr
    )
    assert len(fake_openai.requests) == 1  # nothing was sent to the model the second time


class _RefusesKeys(_Models):
    def do_GET(self) -> None:
        self.send_error(401, "Incorrect API key provided")


def test_a_refused_key_is_said_as_such(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusesKeys)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ConfigurationError) as caught:
            create_provider(base_url=url(server.server_address[1]), env={"OPENAI_API_KEY": "k"})
    finally:
        server.shutdown()
        server.server_close()
    assert "refused the API key when asked for its models (HTTP 401)" in caught.value.message
    assert "set OPENAI_API_KEY" in caught.value.message and "--model NAME" in caught.value.message
