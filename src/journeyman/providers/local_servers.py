"""Finding an OpenAI-compatible model server already running on this machine.

When no provider is configured, the usual local ports are asked for `/v1/models` with a short
timeout: Ollama (11434), llama.cpp's server (8080), LM Studio (1234), vLLM (8000). The first
that answers with a model list is used. `JOURNEYMAN_LOCAL_PORTS` replaces the list
("name=port,..." or plain ports; "none" turns the search off).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from journeyman.core.errors import ConfigurationError
from journeyman.providers.http_errors import host_and_port, is_loopback

PORTS_ENV = "JOURNEYMAN_LOCAL_PORTS"
USUAL_SERVERS: tuple[tuple[str, int], ...] = (
    ("Ollama", 11434),
    ("llama.cpp", 8080),
    ("LM Studio", 1234),
    ("vLLM", 8000),
)
PROBE_TIMEOUT_S = 0.5
"""Per port: a local server answers its model list in milliseconds."""


@dataclass(frozen=True)
class LocalServer:
    """A local OpenAI-compatible server that answered."""

    name: str
    base_url: str
    models: tuple[str, ...]


def candidate_servers(env: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
    """The (name, port) pairs to try, from `JOURNEYMAN_LOCAL_PORTS` or the usual ones."""
    given = env.get(PORTS_ENV)
    if given is None:
        return USUAL_SERVERS
    if given.strip().lower() in ("", "none", "off"):
        return ()
    found: list[tuple[str, int]] = []
    for item in given.split(","):
        name, equals, port = item.strip().rpartition("=")
        try:
            number = int(port)
        except ValueError:
            raise ConfigurationError(
                f"{PORTS_ENV}={given!r}: {item.strip()!r} is not a port; write ports "
                'separated by commas, each optionally named ("Ollama=11434,8080"), or "none"'
            ) from None
        if not 0 < number < 65536:
            raise ConfigurationError(
                f"{PORTS_ENV}={given!r}: {number} is not a port (ports run from 1 to 65535)"
            )
        found.append((name.strip() if equals else f"port {number}", number))
    return tuple(found)


def _models(base_url: str, timeout: float, api_key: str | None = None) -> tuple[str, ...] | str:
    """The model ids the server lists, or why they could not be read."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    request = urllib.request.Request(f"{base_url.rstrip('/')}/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            body = json.loads(reply.read(1_000_000))
    except urllib.error.HTTPError as error:
        return f"GET /models answered HTTP {error.code}"
    except urllib.error.URLError as error:
        if isinstance(error.reason, ConnectionRefusedError) and is_loopback(base_url):
            return f"nothing is listening on {host_and_port(base_url)}; is the server running?"
        return f"GET /models failed: {error.reason}"
    except (OSError, ValueError) as error:
        return f"GET /models failed: {error}"
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return "GET /models did not answer with a model list"
    return tuple(str(m["id"]) for m in data if isinstance(m, dict) and m.get("id"))


MODEL_LIST_TIMEOUT_S = 5.0
"""How long a server given by its base URL has to list its models."""
LISTED_AT_MOST = 20
"""Models named in the message asking for --model; the rest are counted."""


def server_at(
    base_url: str, *, api_key: str | None = None, timeout: float = MODEL_LIST_TIMEOUT_S
) -> LocalServer:
    """The server at `base_url` with the models it lists, asked through the official SDK
    (`GET /models`). A server that cannot be reached or does not list its models is a
    `ConfigurationError` naming --model: without it there is no model to ask for."""
    import openai

    shown = without_credentials(base_url)
    client = openai.OpenAI(
        api_key=api_key or "no-key-needed", base_url=base_url, timeout=timeout, max_retries=0
    )
    try:
        page = client.models.list()
        models = tuple(str(model.id) for model in page.data if getattr(model, "id", None))
    except openai.APIConnectionError as error:
        if is_loopback(base_url) and _refused(error):
            reason = f"nothing is listening on {host_and_port(base_url)}; is the server running?"
        else:
            reason = f"it could not be reached ({type(error).__name__})"
        raise ConfigurationError(
            f"no model given and the server at {shown} could not be asked for its models: "
            f"{reason} (or pass --model NAME)"
        ) from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
        raise ConfigurationError(
            f"no model given and the server at {shown} refused the API key when asked for its "
            f"models (HTTP {error.status_code}); set OPENAI_API_KEY to a key that server "
            "accepts, or pass --model NAME"
        ) from None
    except openai.APIStatusError as error:
        raise ConfigurationError(
            f"no model given and the server at {shown} does not list its models (GET /models "
            f"answered HTTP {error.status_code}); pass --model NAME"
        ) from None
    except (openai.OpenAIError, ValueError, TypeError) as error:
        raise ConfigurationError(
            f"no model given and the model list of the server at {shown} is not usable "
            f"({type(error).__name__}); pass --model NAME"
        ) from None
    finally:
        client.close()
    return LocalServer("OpenAI-compatible", shown, models)


def _refused(error: BaseException) -> bool:
    """Whether a connection was refused somewhere down `error`'s chain of causes."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def without_credentials(url: str) -> str:
    """`url` without a user name or password in it (safe to show)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def find_local_server(
    env: Mapping[str, str], *, timeout: float = PROBE_TIMEOUT_S
) -> LocalServer | None:
    """The first local server on the candidate ports that lists its models, or None."""
    for name, port in candidate_servers(env):
        base_url = f"http://127.0.0.1:{port}/v1"
        models = _models(base_url, timeout)
        if not isinstance(models, str):
            return LocalServer(name, base_url, models)
    return None


def pick_model(server: LocalServer, model: str | None) -> str:
    """`model` when given; the server's only model; else a `ConfigurationError` listing them."""
    if model:
        return model
    if len(server.models) == 1:
        return server.models[0]
    if not server.models:
        raise ConfigurationError(
            f"the {server.name} server at {server.base_url} lists no models; load or pull one, "
            "then pass --model NAME"
        )
    listed = "\n".join(f"  - {m}" for m in server.models[:LISTED_AT_MOST])
    more = len(server.models) - LISTED_AT_MOST
    if more > 0:
        listed += f"\n  ... and {more} more (GET {server.base_url.rstrip('/')}/models lists all)"
    raise ConfigurationError(
        f"the {server.name} server at {server.base_url} has several models; pass one with "
        f"--model NAME:\n{listed}"
    )


def ports_tried(env: Mapping[str, str]) -> str:
    """The candidate ports in words, for the message shown when none answered."""
    names: Sequence[tuple[str, int]] = candidate_servers(env)
    return ", ".join(f"{name} {port}" for name, port in names) or "none (search turned off)"
