"""The fake model servers themselves: scripting, recording, control API, other processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from tests.fakes import (
    FakeAnthropicServer,
    FakeOpenAIServer,
    MidStreamError,
    RecordedRequest,
    cut_stream,
    disconnect,
    drip,
    error,
    hang,
    item_from_dict,
    item_to_dict,
    keep_alive,
    malformed_json,
    reply,
    tool_call,
)

from journeyman.core.errors import ProviderError
from journeyman.core.messages import Message
from journeyman.providers.base import ModelRequest
from journeyman.providers.openai import OpenAIProvider

ROOT = Path(__file__).resolve().parents[2]
REQUEST = ModelRequest(system="", messages=(Message.user("hi"),))


def _post(url: str, body: Any) -> Any:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as response:
        return json.loads(response.read())


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_script_items_survive_json() -> None:
    items = [
        reply("hi", [tool_call("read_file", {"path": "a"}, id="c1")], cache_read_tokens=5),
        error(429, "slow", retry_after=2, retry_after_ms=300, headers={"x-extra": "1"}),
        hang(0.2),
        malformed_json(),
        disconnect(reset=False),
        cut_stream(reply("abc"), after_events=3, clean_end=True),
        MidStreamError(reply("x"), error_type="api_error", message="boom"),
        drip(reply("slow"), interval_s=0.3),
        keep_alive(interval_s=0.1, seconds=2),
    ]
    for item in items:
        assert item_from_dict(json.loads(json.dumps(item_to_dict(item)))) == item


def test_plain_dict_defaults_to_reply() -> None:
    assert item_from_dict({"text": "hello"}) == reply("hello")


async def test_exhausted_script_fails_fast_and_default_reply_repeats(
    fake_openai: FakeOpenAIServer,
) -> None:
    p = OpenAIProvider("m", api_key="k", base_url=fake_openai.base_url, timeout=5)
    with pytest.raises(ProviderError, match="script exhausted") as caught:
        await p.complete(REQUEST)
    assert caught.value.retryable is False
    fake_openai.default = reply("again")
    assert (await p.complete(REQUEST)).text == "again"
    assert (await p.complete(REQUEST)).text == "again"
    assert len(fake_openai.requests) == 3


async def test_callable_items_see_the_request(fake_openai: FakeOpenAIServer) -> None:
    def echo(request: RecordedRequest) -> Any:
        return reply(f"you said {request.json['messages'][-1]['content']}")

    fake_openai.enqueue(echo)
    p = OpenAIProvider("m", api_key="k", base_url=fake_openai.base_url, timeout=5)
    assert (await p.complete(REQUEST)).text == "you said hi"


def test_unknown_path_is_404_in_provider_shape(fake_anthropic: FakeAnthropicServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        _post(f"{fake_anthropic.url}/v1/complete", {})
    assert caught.value.code == 404
    body = json.loads(caught.value.read())
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"


def test_control_api(fake_openai: FakeOpenAIServer) -> None:
    queued = _post(
        f"{fake_openai.url}/_fake/enqueue", [{"text": "one"}, {"kind": "http_error", "status": 503}]
    )
    assert queued == {"queued": 2, "remaining": 2}
    answer = _post(f"{fake_openai.base_url}/chat/completions", {"model": "m", "messages": []})
    assert answer["choices"][0]["message"]["content"] == "one"
    recorded = _get(f"{fake_openai.url}/_fake/requests")
    assert [r["path"] for r in recorded] == ["/v1/chat/completions"]
    assert recorded[0]["body"] == {"model": "m", "messages": []}
    assert fake_openai.remaining == 1
    _post(f"{fake_openai.url}/_fake/reset", {})
    assert fake_openai.remaining == 0
    assert fake_openai.requests == []


def test_stop_releases_hanging_handlers() -> None:
    server = FakeOpenAIServer([hang(30)]).start()
    client = socket.create_connection(("127.0.0.1", server.port))
    body = b"{}"
    client.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 3
    client.settimeout(3)
    assert client.recv(100) == b""  # the hanging request was dropped without an answer
    client.close()


def test_thread_server_serves_a_subprocess(fake_openai: FakeOpenAIServer) -> None:
    """The end-to-end shape: the fake runs in the test process, the client in a child process."""
    fake_openai.enqueue(reply("from the parent", [("read_file", {"path": "a.py"})]))
    script = textwrap.dedent(
        """
        import sys, openai
        client = openai.OpenAI(base_url=sys.argv[1], api_key="k", max_retries=0, timeout=5)
        messages = [{"role": "user", "content": "hi"}]
        message = client.chat.completions.create(model="m", messages=messages).choices[0].message
        print(message.content, message.tool_calls[0].function.name)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, fake_openai.base_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from the parent read_file"
    assert fake_openai.last_request.json["messages"] == [{"role": "user", "content": "hi"}]


async def test_server_in_its_own_process(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {"text": "scripted in a file"},
                {"kind": "http_error", "status": 429, "retry_after": 1},
            ]
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes",
            "openai",
            "--script",
            str(script),
            "--until-stdin-closes",
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        base_url = child.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        p = OpenAIProvider("m", api_key="k", base_url=base_url, timeout=5)
        assert (await p.complete(REQUEST)).text == "scripted in a file"
        with pytest.raises(ProviderError) as caught:
            await p.complete(REQUEST)
        assert caught.value.retry_after == 1.0
        recorded = _get(base_url.removesuffix("/v1") + "/_fake/requests")
        assert len(recorded) == 2
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)
    assert child.returncode == 0


async def test_a_quick_drip_delivers_the_whole_reply(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(drip(reply("ok"), interval_s=0.001), drip(reply("ok"), interval_s=0.001))
    client = OpenAIProvider("gpt-test", api_key="k", base_url=fake_openai.base_url, timeout=5)
    assert (await client.complete(REQUEST)).text == "ok"
    assert (await client.complete(REQUEST, lambda text: None)).text == "ok"
