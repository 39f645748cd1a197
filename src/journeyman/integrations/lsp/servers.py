"""Which language servers exist: their configuration, the built-in set, detection and lookup.

A server is *configured* when it is in the list (built-in or from the user's config), *detected*
when the workspace holds one of its marker files (pyproject.toml for Python, go.mod for Go...),
and *installed* when its executable is found on PATH or next to the running Python (where a
virtual environment puts `pylsp`). Servers start lazily, the first time a file they cover is
asked about, and only when installed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from journeyman.core.errors import ConfigurationError
from journeyman.core.toml_text import parse_toml
from journeyman.tools.host_read import RefusedFile, read_host_file

CONFIG_FILE = Path(".journeyman") / "lsp.toml"
"""The workspace's language server settings (`LspConfig` keys), relative to its root."""
ENV_SWITCH = "JOURNEYMAN_LSP"
"""Environment variable that turns language servers off (`0`, `off`, `false`, `no`) or on."""
_OFF = frozenset({"0", "off", "false", "no"})
_ON = frozenset({"1", "on", "true", "yes"})


class ServerConfig(BaseModel):
    """How to run one language server and which files it covers."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    """Short unique name (`pyright`, `pylsp`); a user entry with a built-in's name replaces it."""
    language: str
    """Language the server handles, shown by `journeyman lsp` (`python`, `typescript`...)."""
    command: list[str] = Field(min_length=1)
    """Executable and arguments that start the server speaking LSP over stdio."""
    extensions: list[str] = Field(default_factory=list)
    """File suffixes the server covers, with the dot (`.py`)."""
    language_ids: dict[str, str] = Field(default_factory=dict)
    """LSP languageId per suffix where it differs from `language` (`.tsx` -> typescriptreact)."""
    detect: list[str] = Field(default_factory=list)
    """Marker files at the workspace root that mean the project uses this language."""
    fallback_for: str | None = None
    """Name of the server this one stands in for: used only when that one is not installed."""
    initialization_options: dict[str, Any] = Field(default_factory=dict)
    """Sent as `initializationOptions` in the initialize request."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """Answers to the server's `workspace/configuration` requests, by dotted section."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the server process."""
    enabled: bool = True
    """False turns the server off (a user entry can disable a built-in by name)."""

    def covers(self, path: Path) -> bool:
        """Whether files with this path's suffix belong to the server."""
        return path.suffix.lower() in {ext.lower() for ext in self.extensions}

    def language_id(self, path: Path) -> str:
        """The languageId to announce in didOpen for this file."""
        return self.language_ids.get(path.suffix.lower(), self.language)


class LspConfig(BaseModel):
    """Language server settings of a run."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """False: no server is ever started; every LSP call answers 'unavailable'."""
    servers: list[ServerConfig] = Field(default_factory=list)
    """User-declared servers, tried before the built-ins; same name replaces a built-in."""
    builtin_servers: bool = True
    """Include the built-in servers (TypeScript, Python, Rust, Go, JSON)."""
    request_timeout: float = Field(default=20.0, gt=0)
    """Seconds one request may take; a server that takes longer is treated as hung."""
    startup_timeout: float = Field(default=30.0, gt=0)
    """Seconds a server may take to start and answer `initialize`."""
    diagnostics_wait: float = Field(default=2.5, ge=0)
    """Seconds to wait for diagnostics of a file's current text before saying "still analysing"."""
    max_restarts: int = Field(default=1, ge=0)
    """Restarts allowed after a crash or hang; once used up, the server stays off."""
    symbol_scan_files: int = Field(default=50, ge=0)
    """Files searched one by one for symbols when a server has no workspace symbol search."""
    disabled: list[str] = Field(default_factory=list)
    """Names of servers never to use, built-in or declared (`["pyright"]` makes pylsp answer)."""
    edit_diagnostics: int = Field(default=20, ge=0)
    """Most diagnostic lines appended to a write_file/edit_file result; 0 appends none."""


_TS_IDS = {
    ".ts": "typescript",
    ".tsx": "typescriptreact",
    ".js": "javascript",
    ".jsx": "javascriptreact",
    ".mjs": "javascript",
    ".cjs": "javascript",
}

BUILTIN_SERVERS: tuple[ServerConfig, ...] = (
    ServerConfig(
        name="typescript",
        language="typescript",
        command=["typescript-language-server", "--stdio"],
        extensions=list(_TS_IDS),
        language_ids=_TS_IDS,
        detect=["package.json", "tsconfig.json"],
    ),
    ServerConfig(
        name="pyright",
        language="python",
        command=["pyright-langserver", "--stdio"],
        extensions=[".py", ".pyi"],
        detect=["pyproject.toml", "requirements.txt"],
    ),
    ServerConfig(
        name="pylsp",
        language="python",
        command=["pylsp"],
        extensions=[".py", ".pyi"],
        detect=["pyproject.toml", "requirements.txt"],
        fallback_for="pyright",
        # style and complexity findings are noise after every edit; pyflakes stays on
        settings={
            "pylsp": {"plugins": {"pycodestyle": {"enabled": False}, "mccabe": {"enabled": False}}}
        },
    ),
    ServerConfig(
        name="rust-analyzer",
        language="rust",
        command=["rust-analyzer"],
        extensions=[".rs"],
        detect=["Cargo.toml"],
    ),
    ServerConfig(
        name="gopls",
        language="go",
        command=["gopls"],
        extensions=[".go"],
        detect=["go.mod"],
    ),
    ServerConfig(
        name="json",
        language="json",
        command=["vscode-json-language-server", "--stdio"],
        extensions=[".json", ".jsonc"],
        language_ids={".jsonc": "jsonc"},
    ),
)
"""The servers journeyman knows without configuration, in order of preference."""


def merge_servers(
    user: Sequence[ServerConfig],
    *,
    builtins: Iterable[ServerConfig] = BUILTIN_SERVERS,
    disabled: Iterable[str] = (),
) -> list[ServerConfig]:
    """User servers first, then the built-ins they do not replace; disabled ones dropped."""
    names = {server.name for server in user}
    off = set(disabled)
    merged = [*user, *(server for server in builtins if server.name not in names)]
    return [server for server in merged if server.enabled and server.name not in off]


def find_executable(program: str) -> str | None:
    """Absolute path of `program` on PATH or beside the running Python, or None.

    A path with a slash is taken as given (and must be an executable file).
    """
    if os.sep in program or (os.altsep and os.altsep in program):
        return program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    found = shutil.which(program)
    if found:
        return found
    beside = Path(sys.executable).parent / program
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return None


def detected_markers(server: ServerConfig, root: Path) -> list[str]:
    """Which of the server's marker files exist at the workspace root."""
    return [marker for marker in server.detect if (root / marker).exists()]


@dataclass(frozen=True)
class Candidate:
    """A configured server as this workspace and machine see it."""

    config: ServerConfig
    executable: str | None
    """Resolved path of the command's program; None when it is not installed."""
    markers: tuple[str, ...]
    """Marker files found at the workspace root."""

    @property
    def installed(self) -> bool:
        return self.executable is not None

    @property
    def detected(self) -> bool:
        return bool(self.markers)

    @property
    def command(self) -> list[str]:
        """The command with its program resolved to an absolute path where found."""
        return [self.executable or self.config.command[0], *self.config.command[1:]]


def survey(servers: Sequence[ServerConfig], root: Path) -> list[Candidate]:
    """Look up each server's executable and marker files (no process is started)."""
    return [
        Candidate(
            config=server,
            executable=find_executable(server.command[0]),
            markers=tuple(detected_markers(server, root)),
        )
        for server in servers
    ]


def choose(candidates: Sequence[Candidate], path: Path) -> Candidate | None:
    """The server to ask about `path`: the first installed one that covers it.

    A fallback is skipped while the server it stands in for is installed. When nothing covering
    the file is installed, the first covering candidate is returned so that the caller can say
    what to install; None means no configured server covers the file at all.
    """
    covering = [c for c in candidates if c.config.covers(path)]
    installed = {c.config.name for c in candidates if c.installed}
    for candidate in covering:
        primary = candidate.config.fallback_for
        if candidate.installed and not (primary and primary in installed):
            return candidate
    return covering[0] if covering else None


def is_shadowed(candidate: Candidate, candidates: Sequence[Candidate]) -> bool:
    """Whether a fallback is unused because the server it replaces is installed."""
    primary = candidate.config.fallback_for
    return bool(primary) and any(c.config.name == primary and c.installed for c in candidates)


@dataclass
class LoadedLspConfig:
    """The merged language server settings, and what was read or ignored on the way."""

    config: LspConfig
    files: list[Path]
    """The files that were read, the user's first."""
    warnings: list[str]
    """Settings that were ignored, and why."""


def load_lsp_config(
    workspace: Path,
    *,
    user_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> LoadedLspConfig:
    """The user's `lsp.toml`, then the workspace's `.journeyman/lsp.toml`, then `JOURNEYMAN_LSP`.

    Each file holds `LspConfig` keys at the top level and `[[servers]]` tables:

        disabled = ["pyright"]
        [[servers]]
        name = "ruff"
        language = "python"
        command = ["ruff", "server"]
        extensions = [".py"]

    Later sources replace earlier values, except `disabled`, which accumulates. Servers are
    taken from the user's file only: a workspace's `[[servers]]` are ignored with a warning,
    because cloning a repository must not be enough to make journeyman run a program of its
    choosing. Raises `ConfigurationError` for a file that cannot be read or does not fit.
    """
    files: list[Path] = []
    warnings: list[str] = []
    merged: dict[str, Any] = {}
    for path, trusted in ((user_file, True), (workspace / CONFIG_FILE, False)):
        if path is None or not path.is_file():
            continue
        data = _read_toml(path, None if trusted else [workspace])
        _validate(data, str(path))
        files.append(path)
        if not trusted and data.get("servers"):
            names = ", ".join(str(entry.get("name", "?")) for entry in data["servers"])
            where = user_file or "your user lsp.toml"
            warnings.append(
                f"{path}: ignored the workspace's language servers ({names}); a repository "
                f"cannot choose programs for journeyman to run; declare them in {where}"
            )
        if not trusted:
            data.pop("servers", None)
        for key, value in data.items():
            if key == "disabled":
                merged[key] = [*merged.get(key, []), *value]
            else:
                merged[key] = value
    switch = (os.environ if environ is None else environ).get(ENV_SWITCH, "").strip().lower()
    if switch in _OFF:
        merged["enabled"] = False
    elif switch in _ON:
        merged["enabled"] = True
    elif switch:
        raise ConfigurationError(f"{ENV_SWITCH}={switch!r} is neither on (1, on) nor off (0, off)")
    config = _validate(merged, " + ".join(str(f) for f in files) or "defaults")
    return LoadedLspConfig(config, files, warnings)


def _read_toml(path: Path, inside: list[Path] | None) -> dict[str, Any]:
    """A settings file; a workspace's (`inside` given) must be a regular file inside it."""
    try:
        return parse_toml(read_host_file(path, limit=1 << 20, inside=inside))
    except RefusedFile as refused:
        raise ConfigurationError(f"{path}: not read: {refused.reason}") from None
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{path} is not UTF-8 text: {exc}") from None
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from exc


def _validate(data: dict[str, Any], where: str) -> LspConfig:
    try:
        return LspConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        )
        raise ConfigurationError(f"{where}: {problems}") from None
