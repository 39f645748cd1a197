"""What an MCP client may choose, and what only the user who started the server decides.

The user who runs `journeyman mcp serve` is the trusted source: the folders runs may work in,
the provider, the permission mode, the sandbox, the limits and whether calls that need approval
are approved. A client (another program, or a model driving it) is less trusted than a
workspace's own config file: it names a workspace inside those folders, a task and a loop mode,
and may ask for *tighter* limits, a stricter permission mode or a stronger sandbox. Limits above
the server's are lowered to the server's (and said so in the answer); a looser permission mode
or a weaker sandbox is refused outright.

Each run's settings are built the way `journeyman run` builds them: the user config, then the
workspace's file held to the trust rules of `policy.settings`, then `JOURNEYMAN_*` variables,
then the server's own flags; the client's requests come last and may only tighten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from journeyman.core.errors import ConfigurationError
from journeyman.loop.choices import ModeName
from journeyman.loop.config import AgentConfig
from journeyman.loop.launch import LaunchRequest, settle
from journeyman.policy.choices import PermissionMode
from journeyman.policy.settings import (
    PERMISSION_MODE_ORDER,
    IgnoredSetting,
    ranked,
    sandbox_not_weaker,
)
from journeyman.providers.tool_modes import ToolModeChoice
from journeyman.tools.choices import SandboxKind


class ServerPolicy(BaseModel):
    """The choices of the user who started the server; no client can loosen them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    roots: tuple[Path, ...]
    """Folders runs may work in (a workspace must be one of them or inside one); the first is
    the default workspace."""
    provider: str | None = None
    """Provider name or "provider:model" spec; None detects it from the environment."""
    model: str | None = None
    """Model name; None takes the provider's default."""
    base_url: str | None = None
    """Base URL of an OpenAI-compatible server; None for the provider's default."""
    tool_format: ToolModeChoice = "auto"
    """How tools reach the model: auto, native, json_schema, grammar or text."""
    flags: dict[str, Any] = Field(default_factory=dict)
    """`AgentConfig` values given on the server's command line (limits, permission mode,
    sandbox, session folder, ...), laid over the config files like `run`'s flags."""
    assume_yes: bool = False
    """Approve every call that would need asking (deny rules and plan mode still refuse);
    without it such calls are refused, as nobody is there to ask."""
    approval_timeout_s: float = Field(default=60.0, gt=0)
    """Seconds a question asked through elicitation waits for the client's answer before the
    call is refused."""
    lsp: bool = True
    """Offer the language servers of the user's and the workspace's lsp.toml to runs."""

    def resolved_roots(self) -> tuple[Path, ...]:
        return tuple(root.expanduser().resolve() for root in self.roots)


class ClientLimits(BaseModel):
    """Limits and choices a client may ask for a run; each may only tighten the server's."""

    model_config = ConfigDict(extra="forbid")

    mode: ModeName | None = None
    """Loop mode: react, plan-solve, phased or ask (a question, read-only tools)."""
    max_iterations: int | None = Field(default=None, ge=1)
    """Model turns this run may take; lowered to the server's limit if above it."""
    max_budget_usd: float | None = Field(default=None, ge=0)
    """US dollars the session may cost; lowered to the server's limit if above it."""
    max_total_tokens: int | None = Field(default=None, ge=1)
    """Tokens (input + output) the session may use; lowered to the server's limit if above."""
    max_duration_s: float | None = Field(default=None, gt=0)
    """Wall-clock seconds the run may last; lowered to the server's limit if above it."""
    permission_mode: PermissionMode | None = None
    """A permission mode at least as strict as the server's (plan is the strictest)."""
    sandbox: SandboxKind | None = None
    """A sandbox at least as strong as the server's (bubblewrap or docker); never weaker."""


CAPPED_LIMITS = ("max_iterations", "max_budget_usd", "max_total_tokens", "max_duration_s")
"""The limits a client may lower; a higher value is clamped to the server's."""


@dataclass
class RunSettings:
    """The settings of one run started for a client, and what was changed from the request."""

    workspace: Path
    config: AgentConfig
    ignored: list[IgnoredSetting] = field(default_factory=list)
    """Settings of the workspace's file the trust rules left out."""
    clamped: list[str] = field(default_factory=list)
    """One line per limit the client asked above the server's cap, saying what was used."""


def resolve_workspace(policy: ServerPolicy, requested: str | None) -> Path:
    """The workspace a client names, resolved, and checked to be inside an allowed root.

    None means the first root; a relative path is taken from the first root. Symbolic links are
    followed before the check, so a link inside a root cannot lead outside it.
    """
    roots = policy.resolved_roots()
    if requested is None or not requested.strip():
        candidate = roots[0]
    else:
        given = Path(requested).expanduser()
        candidate = (given if given.is_absolute() else roots[0] / given).resolve()
    if not any(candidate == root or candidate.is_relative_to(root) for root in roots):
        allowed = ", ".join(str(root) for root in roots)
        raise ConfigurationError(
            f"workspace {requested!r} resolves to {candidate}, which is outside the folders this "
            f"server may work in ({allowed}); pass a folder inside one of them, or restart the "
            "server with another -w/--root"
        )
    if not candidate.is_dir():
        raise ConfigurationError(
            f"workspace {candidate} is not a directory; pass an existing folder inside {roots[0]}"
        )
    return candidate


def inside_roots(policy: ServerPolicy) -> Callable[[str], bool]:
    """A test of a stored session's workspace: True when it is inside the server's roots
    (after resolving links)."""
    roots = policy.resolved_roots()

    def inside(workspace: str) -> bool:
        path = Path(workspace).resolve()
        return any(path == root or path.is_relative_to(root) for root in roots)

    return inside


def check_inside_roots(policy: ServerPolicy, workspace: str, session_id: str) -> Path:
    """The workspace of a stored session, refused when it is outside the server's roots."""
    path = Path(workspace).resolve()
    if not inside_roots(policy)(workspace):
        roots = policy.resolved_roots()
        raise ConfigurationError(
            f"session {session_id} worked in {path}, outside the folders this server may work in "
            f"({', '.join(str(root) for root in roots)}); use the journeyman command line for it"
        )
    return path


def run_settings(
    policy: ServerPolicy,
    workspace: Path,
    limits: ClientLimits,
    *,
    stored_mode: str | None = None,
) -> RunSettings:
    """The config of a run in `workspace`: the server's (config files under the trust rules,
    then its flags), tightened by the client's `limits`.

    `stored_mode` is the loop mode of a session being continued (used unless the client names
    another). Raises `ConfigurationError` for a request that would loosen the permission mode
    or the sandbox, or for unusable config files.
    """
    flags = dict(policy.flags)
    mode = limits.mode or stored_mode
    if mode is not None:
        flags["mode"] = mode
    settled = settle(LaunchRequest(workspace, flags=flags))
    config = settled.config
    assert config.permissions is not None
    updates: dict[str, Any] = {}
    clamped: list[str] = []
    for name in CAPPED_LIMITS:
        asked = getattr(limits, name)
        if asked is None:
            continue
        cap = getattr(config, name)
        if cap is not None and asked > cap:
            clamped.append(
                f"{name} {asked:g} is above this server's limit; {cap:g} is used "
                "(a client may only lower limits)"
            )
            continue
        updates[name] = asked
    if limits.permission_mode is not None:
        server_mode = config.permissions.mode.value
        reason = ranked(PERMISSION_MODE_ORDER, "permission mode")(
            server_mode, limits.permission_mode.value
        )
        if reason is not None:
            stricter = PERMISSION_MODE_ORDER[: PERMISSION_MODE_ORDER.index(server_mode) + 1]
            raise ConfigurationError(
                f"permission_mode {limits.permission_mode.value!r} is looser than this server's "
                f"{server_mode!r}; a client may only ask for a stricter one "
                f"({', '.join(stricter)})"
            )
        updates["permissions"] = config.permissions.model_copy(
            update={"mode": limits.permission_mode}
        )
    if limits.sandbox is not None and limits.sandbox is not config.sandbox:
        if sandbox_not_weaker(config.sandbox.value, limits.sandbox.value) is not None:
            raise ConfigurationError(
                f"sandbox {limits.sandbox.value!r} would weaken this server's "
                f"{config.sandbox.value!r}; a client may only ask for bubblewrap or docker "
                "when the server's sandbox does not isolate, never turn isolation off"
            )
        updates["sandbox"] = limits.sandbox
    if updates:
        config = config.model_copy(update=updates)
    return RunSettings(workspace, config, list(settled.ignored), clamped)
