"""The variables a command may get from the agent's environment: the allow-list.

Asked by `tools.sandbox.environment` (which builds every command's environment from it) and by
the command line (which wipes every other variable from what `/proc/<pid>/environ` shows of
the agent; see `core.environ_block`).
"""

from __future__ import annotations

from collections.abc import Iterable

ALLOWED_NAMES = frozenset(
    {
        # who and where
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "HOSTNAME",
        "TMPDIR",
        "TZ",
        # locale and terminal
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "FORCE_COLOR",
        "COLUMNS",
        "LINES",
        # Python: which interpreter and how it runs (none of these names a credential)
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONHASHSEED",
        "PYTHONWARNINGS",
        "PYTHONNOUSERSITE",
        "PYTHONSAFEPATH",
        "PYENV_ROOT",
        "PYENV_VERSION",
        # other toolchains' locations
        "JAVA_HOME",
        "GOPATH",
        "GOROOT",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "NVM_DIR",
        "NODE_PATH",
        # build reproducibility, CI detection
        "SOURCE_DATE_EPOCH",
        "CI",
        # set by journeyman for every command (no pager, no credential prompt)
        "PAGER",
        "GIT_PAGER",
        "GIT_TERMINAL_PROMPT",
    }
)
"""Variables every command gets when the agent has them."""
ALLOWED_PREFIXES = ("LC_", "XDG_")
"""Families of variables every command gets (the locale categories, the XDG folders)."""


def allowed(name: str, pass_env: Iterable[str] = ()) -> bool:
    """Whether a variable named `name` reaches commands (`pass_env`: the user's additions,
    exact names or prefixes ending in `*`)."""
    if name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES):
        return True
    for wanted in pass_env:
        if wanted == name or (wanted.endswith("*") and name.startswith(wanted[:-1])):
            return True
    return False
