"""The tool choices a user names on the command line or in a config file: the edit tool and
the sandbox.

Kept apart from `builtin` and `sandbox` (and free of heavy imports) so that the command line
can offer them without loading the tools.
"""

from __future__ import annotations

from enum import StrEnum


class EditToolChoice(StrEnum):
    """Which tool the model edits files with (``edit_tool`` in the config)."""

    AUTO = "auto"
    """`apply_patch` for providers in `builtin.PATCH_PROVIDERS`, `edit_file` for the others."""
    EDIT_FILE = "edit_file"
    """Exact string replacement in one file."""
    APPLY_PATCH = "apply_patch"
    """Multi-file patches in the format OpenAI's models are trained on."""
    BOTH = "both"
    """Offer both and let the model choose."""


class SandboxKind(StrEnum):
    AUTO = "auto"
    LOCAL = "local"
    BUBBLEWRAP = "bubblewrap"
    DOCKER = "docker"
