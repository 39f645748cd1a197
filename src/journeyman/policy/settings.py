"""The trust rules for settings: who may set which key, and what "tighter" means for each.

Three kinds of source, from most to least trusted:

- the **user** (command-line flags, the user config file, ``JOURNEYMAN_*`` variables) decides
  everything: programs to run, the sandbox, the network, permissions, limits, where sessions live;
- a **workspace** (its ``journeyman.toml`` or ``.journeyman/config.toml``) may only tighten what
  the user decided. `WORKSPACE_RULES` is the one allow-list: a key missing from it is ignored, and
  a listed key is kept only when its rule says the value is at least as strict as the user's;
- **data** (an imported session, a trajectory, a stored session that came from a file) keeps
  descriptive keys only (`DATA_KEYS`, `DATA_CONFIG_KEYS`): which model, which loop mode. It never
  chooses programs, loosens permissions or points the provider at another endpoint.

Every ignored key becomes an `IgnoredSetting` whose `message` names the key and the file, so the
caller can show it (stderr in text mode, a record in JSON output).

The rules work on plain values as a config file decodes them (enum values are their strings),
so this module does not need the config models of the layers that use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from journeyman.core.text import clip

Rule = Callable[[Any, Any], str | None]
"""(the user's value, the workspace's value) -> why the workspace's value is refused, or None."""


@dataclass(frozen=True)
class IgnoredSetting:
    """A setting a less trusted source tried to set, and why it was not used."""

    key: str
    """Dotted name of the setting, e.g. ``permissions.mode``."""
    value: Any
    """The value the source gave."""
    source: str
    """Where it came from: a file path, or a description such as "the imported session"."""
    reason: str
    """Why it was ignored, in words a user can act on."""

    @property
    def message(self) -> str:
        return f"{self.source}: ignored {self.key} = {_show(self.value)}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "value": self.value,
            "source": self.source,
            "reason": self.reason,
            "message": self.message,
        }


# --- what "tighter" means -----------------------------------------------------------------

PERMISSION_MODE_ORDER = ("plan", "default", "accept_edits", "trusted", "bypass")
"""Permission modes from the strictest to the loosest."""
BUDGET_MODE_ORDER = ("strict", "advisory", "soft")
"""Budget enforcement modes from the strictest to the loosest."""
ISOLATING_SANDBOXES = frozenset({"bubblewrap", "docker"})
"""Sandboxes that isolate commands from the host (`auto` may fall back to `local`, which does
not)."""

UNLISTED = "it is not one of the settings a workspace may choose"
USER_ONLY = "only you can choose it (your user config, a JOURNEYMAN_* variable or a flag)"
PROGRAMS = (
    "it names programs to run, and a repository cannot choose those "
    "(declare them in your user config)"
)


def accept(_base: Any, _value: Any) -> str | None:
    """Any value: the key describes the work, it grants nothing."""
    return None


def refuse(reason: str) -> Rule:
    """No value from this source, for the given reason."""

    def rule(_base: Any, _value: Any) -> str | None:
        return reason

    return rule


def not_above(base: Any, value: Any) -> str | None:
    """A limit that may only go down (None in `base` means no limit at all)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "a limit must be a number"
    if base is None or value <= base:
        return None
    return f"it would raise the limit above {_show(base)}; a workspace may only lower limits"


def not_below(base: Any, value: Any) -> str | None:
    """A floor or a reserve that may only go up (a larger share kept back, a larger smallest
    allocation)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "a limit must be a number"
    if base is None or value >= base:
        return None
    return f"it would lower {_show(base)}; a workspace may only raise this one"


def ranked(order: tuple[str, ...], what: str) -> Rule:
    """A choice from `order` (strictest first) that may only move towards the strict end."""

    def rule(base: Any, value: Any) -> str | None:
        if value not in order:
            return f"unknown {what} {_show(value)}"
        if base not in order or order.index(value) <= order.index(base):
            return None
        stricter = ", ".join(order[: order.index(base) + 1])
        return f"it is looser than {_show(base)}; a workspace may only choose {stricter}"

    return rule


def only(allowed: Any, reason: str) -> Rule:
    """Exactly `allowed` (e.g. ``allow_network = false``); any other value is refused."""

    def rule(_base: Any, value: Any) -> str | None:
        return None if value == allowed else reason

    return rule


def sandbox_not_weaker(base: Any, value: Any) -> str | None:
    if value == base or (value in ISOLATING_SANDBOXES and base not in ISOLATING_SANDBOXES):
        return None
    if value in ISOLATING_SANDBOXES:
        return f"you chose {_show(base)}; a workspace may not switch to another sandbox"
    return (
        f"it is weaker than {_show(base)}; a workspace may only ask for bubblewrap or docker, "
        "never turn isolation off"
    )


WORKSPACE_RULES: Mapping[str, Rule] = {
    # how the work is done: descriptive, grants nothing
    "mode": accept,
    "verify_command": refuse(
        "it decides what counts as done; without it the check is the test command detected "
        f"from the project's files, and {USER_ONLY}"
    ),
    "phased": accept,
    "edit_tool": refuse(
        "the edit tool decides how changes reach your files (and a patch tool can touch "
        f"several in one call); {USER_ONLY}"
    ),
    "tool_set": accept,
    "temperature": accept,
    "stream": accept,
    "snapshot_messages": accept,
    "compaction": accept,
    # limits: only down
    "max_iterations": not_above,
    "max_consecutive_mistakes": not_above,
    "max_budget_usd": not_above,
    "max_total_tokens": not_above,
    "hard_token_limit": only(
        True, f"a workspace may make the token limit a hard cap, not a softer one; {USER_ONLY}"
    ),
    "max_duration_s": not_above,
    "extension_share": not_above,
    "exploration_saturation": not_above,
    "loop_threshold": not_above,
    "max_unproductive_iterations": not_above,
    "max_concurrency": not_above,
    "tool_timeout_s": not_above,
    "model_call_timeout_s": not_above,
    "requests_per_minute": not_above,
    "tokens_per_minute": not_above,
    "max_output_tokens": not_above,
    "budget_mode": ranked(BUDGET_MODE_ORDER, "budget mode"),
    "max_verify_rounds": not_above,
    "verify_timeout_s": not_above,
    # the verdict and the price behind the USD cap are the user's
    "verify": only(
        True, f"a workspace cannot turn off the check that decides success; {USER_ONLY}"
    ),
    "allow_test_edits": only(
        False, f"a workspace cannot let a run rewrite the tests that judge it; {USER_ONLY}"
    ),
    "price_per_mtok": refuse(f"a lower price would quietly lift your USD cap; {USER_ONLY}"),
    # permissions: stricter mode, more deny and ask rules, never an allow rule
    "permissions.mode": ranked(PERMISSION_MODE_ORDER, "permission mode"),
    "permissions.deny": accept,
    "permissions.ask": accept,
    "permissions.allow": refuse(f"a repository cannot grant itself permissions; {USER_ONLY}"),
    # the subagent tree: only smaller (its floors and the parent's reserve only larger)
    "subagents.max_depth": not_above,
    "subagents.max_children_per_turn": not_above,
    "subagents.max_parallel": not_above,
    "subagents.max_child_share": not_above,
    "subagents.child_max_iterations": not_above,
    "subagents.child_timeout_s": not_above,
    "subagents.reserve_share": not_below,
    "subagents.min_child_tokens": not_below,
    "subagents.min_child_usd": not_below,
    # isolation
    "sandbox": sandbox_not_weaker,
    "allow_network": only(False, f"a workspace cannot open the network; {USER_ONLY}"),
    "sandbox_image": refuse(f"the image decides which programs commands run; {USER_ONLY}"),
    "pass_env": refuse(f"it would hand your environment variables to commands; {USER_ONLY}"),
    "sandbox_hidden": refuse(f"it names paths of your machine; {USER_ONLY}"),
    "journal_commands": only(True, f"a workspace cannot turn off undo for commands; {USER_ONLY}"),
    # the user's own choices
    "session_dir": refuse(f"it decides where sessions and their secrets are stored; {USER_ONLY}"),
    "system_prompt": refuse(
        "a workspace gives instructions through AGENTS.md or .journeyman/rules.md, which "
        "the built-in prompt keeps in their place"
    ),
    "hooks": refuse(f"{PROGRAMS}, or pass --project-hooks to trust this workspace's hooks"),
    "system_prompt_shared_chars": refuse(f"it marks a part of system_prompt; {USER_ONLY}"),
}
"""The one allow-list of keys a workspace may set, each with the rule that keeps it tight.
Nested tables are listed by dotted key; a key not listed here is ignored."""

_TABLES = frozenset(name.partition(".")[0] for name in WORKSPACE_RULES if "." in name)
"""Tables whose keys have rules of their own (``permissions``, ``subagents``)."""

DATA_KEYS = frozenset(
    {"provider", "model", "tool_format", "imported_from", "format", "mini_version"}
    | {"exit_status", "cost_usd", "model_name", "api_calls", "recorded_cwd"}
)
"""Top-level session settings kept from data: which model and where the data came from."""
DATA_CONFIG_KEYS = frozenset({"mode"})
"""Run settings kept from data: only the loop mode (descriptive, it grants nothing)."""


# --- applying the rules -------------------------------------------------------------------


def tighten_only(
    base: Mapping[str, Any],
    proposed: Mapping[str, Any],
    source: str,
    *,
    trust_hooks: bool = False,
) -> tuple[dict[str, Any], list[IgnoredSetting]]:
    """The part of `proposed` (a workspace's settings) that is at least as strict as `base`
    (the settings the user's sources and the defaults give), and what was left out.

    `trust_hooks` is the user's explicit opt-in to the workspace's hooks (``--project-hooks``).
    """
    kept: dict[str, Any] = {}
    ignored: list[IgnoredSetting] = []
    for key, value in proposed.items():
        if isinstance(value, Mapping) and key in _TABLES:
            found = base.get(key)
            inner_base: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
            for name, item in value.items():
                dotted = f"{key}.{name}"
                reason = _verdict(dotted, inner_base.get(name), item)
                if reason is None:
                    kept.setdefault(key, {})[name] = item
                else:
                    ignored.append(IgnoredSetting(dotted, item, source, reason))
            continue
        if key == "hooks" and trust_hooks:
            kept[key] = value
            continue
        reason = _verdict(key, base.get(key), value)
        if reason is None:
            kept[key] = value
        else:
            ignored.append(IgnoredSetting(key, value, source, reason))
    return kept, ignored


def _verdict(key: str, base: Any, value: Any) -> str | None:
    rule = WORKSPACE_RULES.get(key)
    if rule is None:
        return UNLISTED
    if value == base:
        return None  # repeating the user's own value changes nothing
    return rule(base, value)


def trusted_from_data(
    settings: Mapping[str, Any], source: str
) -> tuple[dict[str, Any], list[IgnoredSetting]]:
    """The settings of a session that came from a file, reduced to descriptive keys.

    Hooks, permissions, `assume_yes`, the sandbox, MCP servers and `base_url` are dropped:
    whoever wrote the file does not get to choose them for the user who imports it.
    """
    kept: dict[str, Any] = {}
    ignored: list[IgnoredSetting] = []
    for key, value in settings.items():
        if key == "config" and isinstance(value, Mapping):
            config = {k: v for k, v in value.items() if k in DATA_CONFIG_KEYS}
            if config:
                kept["config"] = config
            ignored += [
                IgnoredSetting(f"config.{k}", v, source, DATA_REASON)
                for k, v in value.items()
                if k not in DATA_CONFIG_KEYS
            ]
        elif key in DATA_KEYS:
            kept[key] = value
        else:
            ignored.append(IgnoredSetting(key, value, source, DATA_REASON))
    return kept, ignored


DATA_REASON = (
    "settings from a session file describe the work only; programs, permissions, the sandbox "
    "and the provider endpoint come from you"
)


def _show(value: Any) -> str:
    text = repr(value)
    return clip(text, 80)
