"""The user's own folder: the one home of journeyman's settings for a person.

Config (`config.toml`), rules (`rules.md`), skills, MCP and language-server settings, the
approved content of repositories (`pinned-content.json`) and the tool modes found per server
all live in it: `$JOURNEYMAN_CONFIG_DIR` when set, else the platform's config folder
(`$XDG_CONFIG_HOME/journeyman`, by default `~/.config/journeyman`, on Linux).
"""

from __future__ import annotations

import os
from pathlib import Path

CONFIG_DIR_ENV = "JOURNEYMAN_CONFIG_DIR"


def user_config_folder() -> Path:
    """The user's config folder (not created here)."""
    root = os.environ.get(CONFIG_DIR_ENV)
    if not root:
        from platformdirs import user_config_dir

        root = user_config_dir("journeyman")
    return Path(root)
