"""Everything a repository brings that `journeyman trust` reviews: its rules files, skills,
hooks and MCP servers, each named and hashed exactly as a run checks it (`core.pins`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from journeyman.context.rules import RuleScope, RulesLoader, rules_item
from journeyman.context.skills import (
    MAX_FOLDER_ENTRIES,
    SKILL_FILE,
    WORKSPACE_SKILL_FOLDERS,
    skill_digest,
    skill_item,
)
from journeyman.core.display import printable
from journeyman.core.pins import RepoItem, content_digest
from journeyman.integrations.mcp.config import CONFIG_FILE, MAX_CONFIG_BYTES, mcp_server_items
from journeyman.loop.config_file import project_hook_items, project_hooks_of
from journeyman.tools.host_read import RefusedFile, read_host_file


def repository_items(workspace: Path) -> list[RepoItem]:
    """What the repository at `workspace` brings, in a stable order."""
    return [
        *_rules(workspace),
        *_skills(workspace),
        *project_hook_items(project_hooks_of(workspace)),
        *_mcp_servers(workspace),
    ]


def _rules(workspace: Path) -> list[RepoItem]:
    items = []
    for source in RulesLoader(workspace).sources:
        if source.scope is not RuleScope.USER and source.raw:
            first = next((line for line in source.content.splitlines() if line.strip()), "")
            items.append(
                RepoItem(rules_item(source.display), content_digest(source.raw), first[:80])
            )
    return items


def _skills(workspace: Path) -> list[RepoItem]:
    root = Path(os.path.realpath(workspace))
    items = []
    for folder in WORKSPACE_SKILL_FOLDERS:
        base = root / folder
        if not base.is_dir() or not Path(os.path.realpath(base)).is_relative_to(root):
            continue
        for entry in sorted(base.iterdir())[:MAX_FOLDER_ENTRIES]:
            real = Path(os.path.realpath(entry))
            if entry.name.startswith(".") or not real.is_relative_to(root):
                continue
            if (entry / SKILL_FILE).is_file():
                shown = printable(entry.relative_to(root).as_posix())
                items.append(RepoItem(skill_item(shown), skill_digest(entry), ""))
    return items


def _mcp_servers(workspace: Path) -> list[RepoItem]:
    path = workspace / CONFIG_FILE
    try:
        data = json.loads(read_host_file(path, limit=MAX_CONFIG_BYTES, inside=[workspace]))
    except (OSError, RefusedFile, ValueError):
        return []
    return mcp_server_items(data)
