"""The permission modes a user names on the command line or in a config file.

Kept apart from `permissions` (and free of pydantic) so that the command line can offer them
without loading the permission rules.
"""

from __future__ import annotations

from enum import StrEnum


class PermissionMode(StrEnum):
    PLAN = "plan"
    DEFAULT = "default"
    ACCEPT_EDITS = "accept_edits"
    TRUSTED = "trusted"
    BYPASS = "bypass"
