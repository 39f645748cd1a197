"""A base URL that cannot work is refused before any call, and a local server that is not
running is reported at once instead of being retried."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from tests.support.cli import clean_env, jm

from journeyman.core.errors import ConfigurationError, ProviderError
from journeyman.core.messages import Message, Role
from journeyman.providers.base import ModelRequest
from journeyman.providers.factory import create_provider
from journeyman.providers.local_servers import candidate_servers
from journeyman.providers.openai import OpenAIProvider


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    "url",
    ["notaurl", "ftp://127.0.0.1/v1", "http://", "http://127.0.0.1:99999/v1", "127.0.0.1:8080"],
)
def test_a_base_url_without_http_scheme_and_host_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="base URL"):
        create_provider("openai", "m", url, env={})
    with pytest.raises(ConfigurationError, match="base URL"):
        create_provider(model="m", env={"OPENAI_BASE_URL": url})


@pytest.mark.parametrize("ports", ["99999", "-5", "0", "Ollama=70000"])
def test_local_ports_out_of_range_are_refused(ports: str) -> None:
    with pytest.raises(ConfigurationError, match="1 to 65535"):
        candidate_servers({"JOURNEYMAN_LOCAL_PORTS": ports})


async def test_a_refused_connection_to_this_machine_is_final_and_says_what_to_check() -> None:
    port = closed_port()
    model = OpenAIProvider("m", base_url=f"http://127.0.0.1:{port}/v1", timeout=5.0)
    request = ModelRequest(system="", messages=(Message(Role.USER, "hi"),))
    with pytest.raises(ProviderError) as caught:
        await model.complete(request)
    assert not caught.value.retryable
    assert caught.value.message == (
        f"openai: nothing is listening on 127.0.0.1:{port}; is the server running?"
    )


def test_run_refuses_a_bad_base_url_with_exit_2(tmp_path: Path) -> None:
    done = jm("run", "hi", "-w", str(tmp_path), "--base-url", "notaurl", env=clean_env())
    assert done.returncode == 2 and "'notaurl' is not an http:// or https:// URL" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_refuses_local_ports_out_of_range_with_exit_2(tmp_path: Path) -> None:
    env = clean_env(JOURNEYMAN_LOCAL_PORTS="99999")
    done = jm("run", "hi", "-w", str(tmp_path), env=env)
    assert done.returncode == 2 and "99999 is not a port" in done.stderr


def test_run_on_a_local_server_that_is_not_running_stops_at_the_first_call(
    tmp_path: Path,
) -> None:
    port = closed_port()
    env = clean_env(JOURNEYMAN_SESSION_DIR=str(tmp_path / "sessions"))
    url = f"http://127.0.0.1:{port}/v1"
    done = jm("run", "hi", "-w", str(tmp_path), "--base-url", url, "--model", "m", env=env)
    assert done.returncode == 1, done.stderr
    assert f"nothing is listening on 127.0.0.1:{port}; is the server running?" in done.stderr
    assert "retry" not in done.stderr.lower()


def test_a_refused_connection_to_another_machine_is_still_retried() -> None:
    from journeyman.providers.http_errors import connection_error

    refused = ConnectionRefusedError(111, "Connection refused")
    remote = connection_error("openai", "http://10.0.0.7:8000/v1", timed_out=False, cause=refused)
    local = connection_error("openai", "http://localhost:8000/v1", timed_out=False, cause=refused)
    assert remote.retryable and not local.retryable
    assert local.message == "openai: nothing is listening on localhost:8000; is the server running?"
