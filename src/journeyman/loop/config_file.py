"""Config files: the user's and the project's `AgentConfig` settings, merged.

Sources, later ones winning (the command line's flags come on top, in the CLI):

1. the user file, ``<user config dir>/journeyman/config.toml`` (platformdirs; the directory can
   be moved with ``JOURNEYMAN_CONFIG_DIR``);
2. the project file, ``<workspace>/journeyman.toml``, else ``.journeyman/config.toml`` there;
3. environment variables ``JOURNEYMAN_<FIELD>`` for the scalar fields of `AgentConfig`
   (``JOURNEYMAN_MAX_ITERATIONS=80``) and ``JOURNEYMAN_PERMISSION_MODE``.

Keys are `AgentConfig` field names at the top level, plus a ``[permissions]`` table and
``[[hooks]]`` entries. Scalars of a later source replace earlier ones; the rule lists of
``[permissions]`` and the hooks are concatenated, so a project cannot drop the user's deny rules.

A project file cannot loosen permissions on its own: its ``allow`` rules and a ``trusted`` or
``bypass`` mode are ignored with a warning, because cloning a repository must not be enough to
let it run commands without asking. Such settings belong in the user file or on the command line.
For the same reason a project's ``[[hooks]]`` (shell commands run on the agent's events) are
ignored with a warning unless the caller trusts them (``journeyman run --project-hooks``).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir
from pydantic import ValidationError

from journeyman.core.errors import ConfigurationError
from journeyman.loop.config import AgentConfig
from journeyman.policy.permissions import PermissionMode

PROJECT_FILES = ("journeyman.toml", ".journeyman/config.toml")
ENV_PREFIX = "JOURNEYMAN_"
LOOSE_MODES = frozenset({PermissionMode.TRUSTED, PermissionMode.BYPASS})
_LIST_KEYS = ("allow", "ask", "deny")
_NOT_FROM_ENV = frozenset({"permissions", "hooks", "system_prompt", "phased"})


@dataclass
class LoadedConfig:
    """The merged settings and where they came from."""

    values: dict[str, Any] = field(default_factory=dict)
    """`AgentConfig` keyword arguments (flags are merged on top with `build`)."""
    files: list[Path] = field(default_factory=list)
    """The files that were read, lowest priority first."""
    warnings: list[str] = field(default_factory=list)
    """Settings that were ignored, and why."""

    def build(self, **flags: Any) -> AgentConfig:
        """An `AgentConfig` of these values with the given flags (None means unset) on top."""
        values = dict(self.values)
        permission_mode = flags.pop("permission_mode", None)
        values.update({k: v for k, v in flags.items() if v is not None})
        if permission_mode is not None:
            values["permissions"] = {**values.get("permissions", {}), "mode": permission_mode}
        try:
            return AgentConfig(**values)
        except ValidationError as error:
            where = ", ".join(str(f) for f in self.files) or "the environment"
            raise ConfigurationError(f"invalid settings (from {where}): {error}") from error


def user_config_file() -> Path:
    root = os.environ.get(f"{ENV_PREFIX}CONFIG_DIR") or user_config_dir("journeyman")
    return Path(root) / "config.toml"


def user_mcp_file() -> Path:
    """The user's own MCP servers (`mcp.json`), beside the user's `config.toml`."""
    return user_config_file().parent / "mcp.json"


def project_config_file(workspace: Path) -> Path | None:
    for name in PROJECT_FILES:
        candidate = workspace / name
        if candidate.is_file():
            return candidate
    return None


def load_config(
    workspace: Path, env: Mapping[str, str] | None = None, *, project_hooks: bool = False
) -> LoadedConfig:
    """Read the user file, the project file and the environment, in that order.

    The project file's hooks are kept only with `project_hooks` (the user said to trust them).
    """
    loaded = LoadedConfig()
    user = user_config_file()
    if user.is_file():
        _merge(loaded.values, _read(user))
        loaded.files.append(user)
    project = project_config_file(workspace)
    if project is not None:
        data = _read(project)
        loaded.warnings.extend(_drop_loosening(data, project))
        if data.get("hooks") and not project_hooks:
            loaded.warnings.append(
                f"{project}: ignored the project's {len(data['hooks'])} hook(s); they run shell "
                "commands, so a repository cannot install them on its own (pass "
                "--project-hooks to trust them, or declare hooks in your user config)"
            )
            del data["hooks"]
        _merge(loaded.values, data)
        loaded.files.append(project)
    _merge(loaded.values, _from_env(os.environ if env is None else env))
    return loaded


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise ConfigurationError(f"cannot read config file {path}: {error}") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"config file {path} is not valid TOML: {error}") from error
    unknown = set(data) - set(AgentConfig.model_fields)
    if unknown:
        known = ", ".join(sorted(AgentConfig.model_fields))
        raise ConfigurationError(
            f"config file {path}: unknown setting(s) {', '.join(sorted(unknown))}; "
            f"known settings are {known}"
        )
    return data


def _drop_loosening(data: dict[str, Any], path: Path) -> list[str]:
    permissions = data.get("permissions")
    if not isinstance(permissions, dict):
        return []
    warnings = []
    if permissions.get("allow"):
        warnings.append(
            f"{path}: ignored the project's permissions.allow rules; a repository cannot grant "
            "itself permissions (put them in your user config or pass --permission-mode)"
        )
        del permissions["allow"]
    mode = permissions.get("mode")
    if mode in {m.value for m in LOOSE_MODES}:
        warnings.append(
            f"{path}: ignored permissions.mode = {mode!r} from the project; choose it with "
            "--permission-mode or in your user config"
        )
        del permissions["mode"]
    return warnings


def _merge(into: dict[str, Any], data: Mapping[str, Any]) -> None:
    for key, value in data.items():
        if key == "hooks":
            into["hooks"] = [*into.get("hooks", []), *value]
        elif key == "permissions" and isinstance(value, Mapping):
            merged = dict(into.get("permissions", {}))
            for name, item in value.items():
                if name in _LIST_KEYS:
                    merged[name] = [*merged.get(name, []), *item]
                else:
                    merged[name] = item
            into["permissions"] = merged
        else:
            into[key] = value


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in AgentConfig.model_fields:
        if name in _NOT_FROM_ENV:
            continue
        raw = env.get(ENV_PREFIX + name.upper())
        if raw:
            values[name] = raw  # pydantic converts the text to the field's type
    mode = env.get(f"{ENV_PREFIX}PERMISSION_MODE")
    if mode:
        values["permissions"] = {"mode": mode}
    return values
