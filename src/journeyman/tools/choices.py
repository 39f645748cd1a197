"""The tool choices a user names on the command line or in a config file: the edit tool, the
tool set and the sandbox.

Kept apart from `builtin` and `sandbox` (and free of heavy imports) so that the command line
can offer them without loading the tools.
"""

from __future__ import annotations

import re
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


class ToolSetChoice(StrEnum):
    """How many tools the model is offered (``tool_set`` in the config)."""

    AUTO = "auto"
    """`minimal` for a tiny model (see `is_tiny_model`), `full` for the others."""
    MINIMAL = "minimal"
    """Read a file, edit and write files, run a command, finish: nothing to search with, no
    language-server, MCP or skill tools. A model of a few hundred million parameters spends
    its turns on malformed calls of tools it cannot use; these few it can."""
    FULL = "full"
    """Every built-in tool, plus the language-server, MCP and skill tools the run has."""


EMBEDDED_PROVIDER = "local"
"""The provider that runs a model in process (`providers.local`): only small models run there."""
_UNDER_A_BILLION = re.compile(r"(?<![\d.])(?:\d{1,3}m|0\.\d+b)(?![a-z0-9])")
"""A size written in a model's name below one billion parameters: "135m", "270m", "0.5b"."""


def is_tiny_model(provider: str, model: str) -> bool:
    """Whether the model is too small to use more than a handful of tools: the embedded
    provider's models, and any model whose name gives a size under a billion parameters
    ("smollm2-135m", "gemma3:270m", "qwen2.5-coder:0.5b")."""
    return provider == EMBEDDED_PROVIDER or bool(_UNDER_A_BILLION.search(model.lower()))


def minimal_tool_set(choice: ToolSetChoice | str, provider: str, model: str) -> bool:
    """Whether the run offers only the minimal tool set (`choice` resolved for the model)."""
    chosen = ToolSetChoice(choice)
    if chosen is ToolSetChoice.AUTO:
        return is_tiny_model(provider, model)
    return chosen is ToolSetChoice.MINIMAL


class SandboxKind(StrEnum):
    AUTO = "auto"
    LOCAL = "local"
    BUBBLEWRAP = "bubblewrap"
    DOCKER = "docker"
