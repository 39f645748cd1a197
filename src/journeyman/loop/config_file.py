"""Config files: the user's and the project's `AgentConfig` settings, merged.

Sources, later ones winning (the command line's flags come on top, in the CLI):

1. the user file, ``<user config dir>/journeyman/config.toml`` (platformdirs; the directory can
   be moved with ``JOURNEYMAN_CONFIG_DIR``);
2. the project file, ``<workspace>/journeyman.toml``, else ``.journeyman/config.toml`` there;
3. environment variables ``JOURNEYMAN_<FIELD>`` for the scalar fields of `AgentConfig`
   (``JOURNEYMAN_MAX_ITERATIONS=80``) and ``JOURNEYMAN_PERMISSION_MODE``.

Keys are `AgentConfig` field names at the top level, plus ``[permissions]`` and
``[subagents]`` tables and ``[[hooks]]`` entries. Scalars of a later source replace earlier
ones (key by key inside those two tables); the rule lists of ``[permissions]`` and the hooks
are concatenated, so a project cannot drop the user's deny rules.

A project file may only tighten what the user's sources decided: `policy.settings` holds the one
allow-list of keys it may set and, per key, what "tighter" means. Every key that would loosen
(an allow rule, a looser permission mode, higher limits, ``sandbox = "local"``, the network, the
session folder, ``journal_commands = false``, hooks without ``--project-hooks``, ...) is ignored
with a warning naming the key and the file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError
from journeyman.core.pins import PinCheck, RepoItem, json_digest, refusal
from journeyman.core.toml_text import parse_toml
from journeyman.core.user_folder import user_config_folder
from journeyman.loop.config import AgentConfig
from journeyman.policy.permissions import PermissionsConfig
from journeyman.policy.settings import IgnoredSetting, tighten_only, trusted_from_data
from journeyman.session.store import SESSION_DIR_ENV, SessionRecord, default_session_root
from journeyman.tools.host_read import RefusedFile, read_host_file

PROJECT_FILES = ("journeyman.toml", ".journeyman/config.toml")
MAX_CONFIG_BYTES = 1 << 20
"""A config file larger than this is not read."""
ENV_PREFIX = "JOURNEYMAN_"
_LIST_KEYS = ("allow", "ask", "deny")
_NOT_FROM_ENV = frozenset({"permissions", "hooks", "system_prompt", "phased", "subagents"})
_KEYED_TABLES = ("permissions", "subagents")
"""Tables merged key by key: a later source's ``[subagents]`` changes only the keys it sets."""


@dataclass
class LoadedConfig:
    """The merged settings and where they came from."""

    values: dict[str, Any] = field(default_factory=dict)
    """`AgentConfig` keyword arguments (flags are merged on top with `build`)."""
    files: list[Path] = field(default_factory=list)
    """The files that were read, lowest priority first."""
    warnings: list[str] = field(default_factory=list)
    """Settings that were ignored, and why (one line each, naming the key and the file)."""
    ignored: list[IgnoredSetting] = field(default_factory=list)
    """The same, as records (for JSON output and the session's settings)."""

    def build(self, **flags: Any) -> AgentConfig:
        """An `AgentConfig` of these values with the given flags (None means unset) on top."""
        values = dict(self.values)
        permission_mode = flags.pop("permission_mode", None)
        values.update({k: v for k, v in flags.items() if v is not None})
        if permission_mode is not None:
            set_permission_mode(values, permission_mode)
        try:
            return AgentConfig(**values)
        except ValidationError as error:
            where = ", ".join(str(f) for f in self.files) or "the environment"
            raise ConfigurationError(f"invalid settings (from {where}): {error}") from error


def set_permission_mode(values: dict[str, Any], mode: Any) -> None:
    """Set the permission mode in `values` (`AgentConfig` keyword arguments), keeping the rules."""
    values["permissions"] = {**(values.get("permissions") or {}), "mode": mode}


def user_config_file() -> Path:
    """The user's `config.toml`, in the user's config folder (`core.user_folder`)."""
    return user_config_folder() / "config.toml"


def user_mcp_file() -> Path:
    """The user's own MCP servers (`mcp.json`), beside the user's `config.toml`."""
    return user_config_file().parent / "mcp.json"


def user_skills_folder() -> Path:
    """The user's own skills (one folder each, with its SKILL.md), beside the user's
    `config.toml`."""
    return user_config_file().parent / "skills"


def session_root(given: Path | None = None) -> Path:
    """The folder sessions are stored in, chosen as `journeyman run` chooses it: `given` (the
    ``--session-dir`` flag), else JOURNEYMAN_SESSION_DIR, else ``session_dir`` in the user
    config file, else the per-user data folder.

    Every command that reads or writes sessions asks this, so they all find the same store.
    A workspace's config file is never read here: where sessions live (and their secrets)
    is the user's choice only. A broken user config file raises `ConfigurationError`, as
    it does for `run`.
    """
    if given is not None:
        return given
    if os.environ.get(SESSION_DIR_ENV):
        return default_session_root()
    user = user_config_file()
    if user.is_file():
        configured = _read(user).get("session_dir")
        if configured:
            return Path(configured)
    return default_session_root()


def restorable_settings(record: SessionRecord) -> tuple[dict[str, Any], list[IgnoredSetting]]:
    """The settings of a stored session that resume and fork may bring back, and those left out.

    A session this user ran keeps what the user chose then. One imported from a file keeps only
    what the trust rules accept from data (`trusted_from_data`): no hooks, permissions,
    approvals, sandbox, MCP choice or provider endpoint, even if it was stored before imports
    were filtered.
    """
    if not record.settings.get("imported_from"):
        return record.settings, []
    return trusted_from_data(record.settings, f"session {record.id} (imported)")


def project_config_file(workspace: Path) -> Path | None:
    """The workspace's config file (a link or special file too: `load_config` refuses it)."""
    for name in PROJECT_FILES:
        candidate = workspace / name
        if os.path.lexists(candidate) and not candidate.is_dir():
            return candidate
    return None


def load_config(
    workspace: Path, env: Mapping[str, str] | None = None, *, project_hooks: bool = False
) -> LoadedConfig:
    """Read the user file, the project file and the environment, in that order.

    The project file is held to the trust rules (`policy.settings.tighten_only`) against what the
    defaults, the user file and the environment give; its hooks are kept only with
    `project_hooks` (the user said to trust them).
    """
    loaded = LoadedConfig()
    user_values: dict[str, Any] = {}
    user = user_config_file()
    if user.is_file():
        user_values = _read(user)
        _merge(loaded.values, user_values)
        loaded.files.append(user)
    env_values = _from_env(os.environ if env is None else env)
    project = project_config_file(workspace)
    if project is not None:
        base = _defaults()
        for layer in (user_values, _checked(env_values, "the environment")):
            _merge(base, layer, replace_lists=True)
        retired: list[IgnoredSetting] = []
        try:
            proposed = _read(project, retired=retired, inside=[workspace])
        except RefusedFile as refused:
            skipped = IgnoredSetting("(every setting)", "(not read)", str(project), refused.reason)
            loaded.ignored.append(skipped)
            loaded.warnings.append(skipped.message)
        else:
            kept, ignored = tighten_only(base, proposed, str(project), trust_hooks=project_hooks)
            if isinstance(kept.get("hooks"), list):
                kept["hooks"], unpinned = _pinned_hooks(workspace, kept["hooks"], str(project))
                ignored.extend(unpinned)
            ignored = retired + ignored
            loaded.ignored.extend(ignored)
            loaded.warnings.extend(item.message for item in ignored)
            _merge(loaded.values, kept)
            loaded.files.append(project)
    _merge(loaded.values, env_values)
    return loaded


def project_hooks_of(workspace: Path) -> list[Any]:
    """The `[[hooks]]` entries of the workspace's config file, read as a run reads them (none
    when there is no file or it cannot be read: a run would not use them either)."""
    project = project_config_file(workspace)
    if project is None:
        return []
    try:
        hooks = _read(project, retired=[], inside=[workspace]).get("hooks")
    except (RefusedFile, ConfigurationError):
        return []
    return hooks if isinstance(hooks, list) else []


def project_hook_items(entries: list[Any]) -> list[RepoItem]:
    """The workspace's `[[hooks]]` entries as the content `journeyman trust` approves."""
    items = []
    for number, entry in enumerate(entries, start=1):
        event = entry.get("event", "?") if isinstance(entry, dict) else "?"
        command = entry.get("command", "") if isinstance(entry, dict) else ""
        shown = printable(str(command))
        items.append(RepoItem(f"hook #{number} ({event})", json_digest(entry), shown))
    return items


def _pinned_hooks(
    workspace: Path, entries: list[Any], source: str
) -> tuple[list[Any], list[IgnoredSetting]]:
    """The hooks the user approved as they are now, when the workspace is pinned."""
    check = PinCheck(workspace)
    kept: list[Any] = []
    refused: list[IgnoredSetting] = []
    for entry, item in zip(entries, project_hook_items(entries), strict=True):
        verdict = check.verdict(item.item, item.digest)
        if verdict.usable:
            kept.append(entry)
        else:
            refused.append(IgnoredSetting(item.item, item.shown, source, refusal(verdict)))
    return kept, refused


def _defaults() -> dict[str, Any]:
    """The settings nobody chose, with the permissions the command line always starts from."""
    defaults = AgentConfig(permissions=PermissionsConfig()).model_dump(mode="json")
    return dict(defaults)


RETIRED_PERMISSIONS = {
    "edit_tools": "it is no longer a setting: each tool declares whether it edits files",
}
"""Permission keys of earlier versions. A workspace's file that still sets one gets it ignored
with a warning (it could only loosen); the user's own file is told to remove it."""


def _read(
    path: Path,
    *,
    retired: list[IgnoredSetting] | None = None,
    inside: list[Path] | None = None,
) -> dict[str, Any]:
    """A config file's settings, checked against `AgentConfig` and normalised (enum values as
    text, numbers as numbers), holding only the keys the file sets. With `retired`, keys of
    earlier versions are dropped into it instead of failing the file.

    With `inside` (a workspace's file), a file that is a link out of those folders, not a
    regular file, or over `MAX_CONFIG_BYTES` raises `RefusedFile`; the user's own file may be a
    link anywhere, and a special or oversized one is a `ConfigurationError`."""
    try:
        raw = read_host_file(path, limit=MAX_CONFIG_BYTES, inside=inside)
        data = parse_toml(raw)
    except RefusedFile as refused:
        if inside is not None:
            raise
        raise ConfigurationError(f"config file {path} not read: {refused.reason}") from None
    except OSError as error:
        raise ConfigurationError(f"cannot read config file {path}: {error}") from error
    except RecursionError:
        raise ConfigurationError(
            f"config file {path} nests arrays or tables too deeply to be read"
        ) from None
    except UnicodeDecodeError as error:
        raise ConfigurationError(
            f"config file {path} is not UTF-8 text ({error.reason} at byte {error.start}); "
            "save it as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"config file {path} is not valid TOML: {error}") from error
    permissions = data.get("permissions")
    if retired is not None and isinstance(permissions, dict):
        for key, reason in RETIRED_PERMISSIONS.items():
            if key in permissions:
                value = permissions.pop(key)
                retired.append(IgnoredSetting(f"permissions.{key}", value, str(path), reason))
    unknown = set(data) - set(AgentConfig.model_fields)
    if unknown:
        known = ", ".join(sorted(AgentConfig.model_fields))
        raise ConfigurationError(
            f"config file {path}: unknown setting(s) {', '.join(sorted(unknown))}; "
            f"known settings are {known}"
        )
    return _checked(data, f"config file {path}")


def _checked(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`data` validated as `AgentConfig` fields on its own, so that a wrong type (``hooks = 5``,
    ``deny = 5``) is reported with its source before anything is merged."""
    try:
        config = AgentConfig(**data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or 'value'}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
        raise ConfigurationError(f"invalid settings in {where}: {problems}") from None
    except TypeError as error:
        raise ConfigurationError(f"invalid settings in {where}: {error}") from None
    return config.model_dump(mode="json", exclude_unset=True)


def _merge(into: dict[str, Any], data: Mapping[str, Any], *, replace_lists: bool = False) -> None:
    """Lay `data` over `into`: scalars replace, the hooks and the permission rule lists add up
    (so that no later source drops an earlier one's deny rules) unless `replace_lists`."""
    for key, value in data.items():
        if key == "hooks" and not replace_lists:
            into["hooks"] = [*into.get("hooks", []), *value]
        elif key in _KEYED_TABLES and isinstance(value, Mapping):
            merged = dict(into.get(key) or {})
            for name, item in value.items():
                if name in _LIST_KEYS and not replace_lists:
                    merged[name] = [*merged.get(name, []), *item]
                else:
                    merged[name] = item
            into[key] = merged
        else:
            into[key] = value


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in AgentConfig.model_fields:
        if name in _NOT_FROM_ENV:
            continue
        raw = env.get(ENV_PREFIX + name.upper())
        if raw and name == "pass_env":
            values[name] = raw.replace(",", " ").split()  # JOURNEYMAN_PASS_ENV="A B_*"
        elif raw and name == "sandbox_hidden":
            values[name] = [part for part in raw.split(os.pathsep) if part]
        elif raw:
            values[name] = raw  # pydantic converts the text to the field's type
    mode = env.get(f"{ENV_PREFIX}PERMISSION_MODE")
    if mode:
        values["permissions"] = {"mode": mode}
    return values
