"""Fake model servers on 127.0.0.1 that speak the Anthropic and OpenAI wire formats.

with FakeOpenAIServer([reply("hi", tool_calls=[("read_file", {"path": "a.py"})])]) as server:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    ...
    assert server.last_request.json["model"] == "gpt-test"
"""

from .anthropic_server import FakeAnthropicServer
from .openai_server import FakeOpenAIServer
from .script import (
    Disconnect,
    Drip,
    FakeToolCall,
    FakeUsage,
    Hang,
    HTTPFault,
    KeepAlive,
    MidStreamError,
    RawBody,
    RecordedRequest,
    Reply,
    ScriptItem,
    StreamCut,
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
from .server import FakeServer

__all__ = [
    "Disconnect",
    "Drip",
    "FakeAnthropicServer",
    "FakeOpenAIServer",
    "FakeServer",
    "FakeToolCall",
    "FakeUsage",
    "HTTPFault",
    "Hang",
    "KeepAlive",
    "MidStreamError",
    "RawBody",
    "RecordedRequest",
    "Reply",
    "ScriptItem",
    "StreamCut",
    "cut_stream",
    "disconnect",
    "drip",
    "error",
    "hang",
    "item_from_dict",
    "item_to_dict",
    "keep_alive",
    "malformed_json",
    "reply",
    "tool_call",
]
