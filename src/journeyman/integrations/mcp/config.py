"""Which MCP servers to use: `.journeyman/mcp.json` in the workspace and servers given in code.

The file uses the `mcpServers` shape most MCP clients share:

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-mcp-server"],
                  "env": {"TOKEN": "${TOKEN}"}},
        "search": {"type": "http", "url": "http://127.0.0.1:8000/mcp",
                   "headers": {"Authorization": "Bearer ${SEARCH_KEY}"}}
    }}

`${VAR}` and `${VAR:-default}` in `command`, `args`, `env`, `cwd`, `url` and `headers` are
replaced from the environment. Keys other clients add (`alwaysAllow`, ...) are ignored. A broken
server entry does not spoil the others: it is kept as a problem and reported like a failed start.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError
from journeyman.core.pins import PinCheck, RepoItem, json_digest, refusal
from journeyman.tools.host_read import RefusedFile, read_host_file

MAX_CONFIG_BYTES = 1 << 20
"""An MCP config file larger than this is not read."""

CONFIG_FILE = Path(".journeyman") / "mcp.json"
"""Where the workspace's MCP servers are declared, relative to the workspace root."""

Transport = Literal["stdio", "http"]

_HTTP_TYPES = frozenset({"http", "streamable-http", "streamable_http", "streamablehttp"})
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpServerConfig(BaseModel):
    """How to reach one MCP server: a command to spawn (stdio) or a URL (streamable HTTP)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: str | None = None
    """"stdio", or "http" / "streamable-http"; inferred from `command` or `url` when unset."""
    command: str | None = None
    """Executable that starts a stdio server (looked up on PATH)."""
    args: list[str] = Field(default_factory=list)
    """Arguments passed to `command`."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment of the server process, over a minimal inherited set (PATH, HOME...)."""
    cwd: str | None = None
    """Working directory of the server process, relative to the workspace (default: its root)."""
    url: str | None = None
    """Endpoint of a streamable-HTTP server, e.g. http://127.0.0.1:8000/mcp."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent with every request (e.g. Authorization); never shown in status output."""
    disabled: bool = False
    """Keep the entry but do not start the server."""
    startup_timeout_s: float = Field(default=20.0, gt=0)
    """Seconds to connect, negotiate and list tools before the start is reported as timed out."""
    tool_timeout_s: float = Field(default=60.0, gt=0)
    """Seconds one tool call may take before it fails with a timeout."""
    sandbox: bool = False
    """Start this stdio server inside the run's bubblewrap sandbox, seeing what commands see
    (never started at all when the run has no such sandbox)."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        kind = (self.type or "").strip().lower()
        if kind == "sse":
            raise ValueError(
                "the legacy SSE transport is not supported; use a stdio command or a "
                "streamable-HTTP url (type 'http')"
            )
        if kind and kind != "stdio" and kind not in _HTTP_TYPES:
            raise ValueError(f"unknown type {self.type!r}; use 'stdio' or 'http'")
        if kind == "stdio" or (not kind and self.command):
            if not self.command:
                raise ValueError("a stdio server needs a `command`")
        elif not self.url:
            raise ValueError("give either `command` (stdio server) or `url` (HTTP server)")
        elif self.sandbox:
            raise ValueError(
                "`sandbox` is for stdio servers (journeyman starts them); an HTTP server runs "
                "wherever it was started"
            )
        return self

    @property
    def transport(self) -> Transport:
        kind = (self.type or "").strip().lower()
        if kind == "stdio" or (not kind and self.command):
            return "stdio"
        return "http"

    def target(self) -> str:
        """What the server runs or where it lives, for status output (no env, no headers)."""
        if self.transport == "stdio":
            command = " ".join([self.command or "", *self.args])
            return f"{command} (in the sandbox)" if self.sandbox else command
        return _strip_userinfo(self.url or "")


@dataclass
class McpConfig:
    """The servers of one workspace, and the entries that could not be used."""

    servers: dict[str, McpServerConfig] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    """Server name -> why its entry was rejected."""
    path: Path | None = None
    """The last file the servers came from, if any."""


def load_mcp_config(
    workspace: Path,
    *,
    user_file: Path | None = None,
    include_workspace: bool = True,
    environ: Mapping[str, str] | None = None,
) -> McpConfig:
    """Servers of the user's `mcp.json` (if `user_file` is given), then of
    `<workspace>/.journeyman/mcp.json` (unless `include_workspace` is False), the workspace's
    winning on a name clash; missing files mean no servers.

    Raises `ConfigurationError` when a file is not JSON or not the `mcpServers` shape; a single
    bad entry is recorded in `problems` instead.
    """
    merged = McpConfig()
    paths = [user_file, Path(workspace) / CONFIG_FILE if include_workspace else None]
    for path in paths:
        if path is None or not path.is_file():
            continue
        inside = None if path == user_file else [Path(workspace)]
        try:
            raw = read_host_file(path, limit=MAX_CONFIG_BYTES, inside=inside)
            data = json.loads(raw.decode("utf-8"))
        except RefusedFile as refused:
            raise ConfigurationError(f"{path}: not read: {refused.reason}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigurationError(f"{path}: cannot read MCP server config: {exc}") from exc
        config = parse_mcp_config(data, source=str(path), environ=environ)
        if path != user_file:
            _keep_pinned(Path(workspace), data, config)
        for name in config.servers.keys() | config.problems.keys():
            merged.servers.pop(name, None)
            merged.problems.pop(name, None)
        merged.servers.update(config.servers)
        merged.problems.update(config.problems)
        merged.path = path
    return merged


def parse_mcp_config(
    data: Any, *, source: str = "MCP config", environ: Mapping[str, str] | None = None
) -> McpConfig:
    """Build an `McpConfig` from the decoded `{"mcpServers": {...}}` document."""
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigurationError(
            f'{source}: expected an object {{"mcpServers": {{"<name>": {{...}}}}}}'
        )
    env = os.environ if environ is None else environ
    config = McpConfig()
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            config.problems[name] = "the entry is not a JSON object"
            continue
        try:
            config.servers[name] = McpServerConfig.model_validate(_expand(entry, env))
        except (ValidationError, ValueError) as exc:
            config.problems[name] = describe_invalid(exc)
    return config


def mcp_server_items(data: Any) -> list[RepoItem]:
    """A workspace's `mcp.json` servers as the content `journeyman trust` approves."""
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return []
    items = []
    for name, entry in servers.items():
        shown = ""
        if isinstance(entry, dict):
            parts = [entry.get("command") or entry.get("url") or "", *(entry.get("args") or [])]
            shown = printable(" ".join(str(part) for part in parts))
        items.append(RepoItem(f"mcp server {name}", json_digest(entry), shown))
    return items


def _keep_pinned(workspace: Path, data: Any, config: McpConfig) -> None:
    """Move the servers that are not as the user approved them (pinned workspace) from
    `config.servers` to `config.problems`, saying why."""
    check = PinCheck(workspace)
    for item in mcp_server_items(data):
        name = item.item.removeprefix("mcp server ")
        verdict = check.verdict(item.item, item.digest)
        if name in config.servers and not verdict.usable:
            del config.servers[name]
            config.problems[name] = refusal(verdict)


def describe_invalid(exc: Exception) -> str:
    """One line saying what is wrong with a server entry."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "invalid entry: " + "; ".join(parts)


_EXPANDED = ("command", "args", "env", "cwd", "url", "headers")


def _expand(entry: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    result = dict(entry)
    for key in _EXPANDED:
        if key in result:
            result[key] = _expand_value(result[key], environ, key)
    return result


def _expand_value(value: Any, environ: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):
        return _substitute(value, environ, where)
    if isinstance(value, list):
        return [_expand_value(v, environ, where) for v in value]
    if isinstance(value, dict):
        return {k: _expand_value(v, environ, f"{where}.{k}") for k, v in value.items()}
    return value


def _substitute(text: str, environ: Mapping[str, str], where: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ValueError(f"{where}: environment variable {name} is not set")

    return _VARIABLE.sub(replace, text)


def _strip_userinfo(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"
