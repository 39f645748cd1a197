"""Start-up stays light: the command line and `import journeyman` load the agent only when used."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("journeyman.loop.agent", "journeyman.providers.factory", "journeyman.integrations.lsp")


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())


def test_import_journeyman_loads_no_agent_until_a_name_is_used() -> None:
    loaded = _loaded_after("import journeyman")
    assert not loaded & set(HEAVY)
    loaded = _loaded_after("import journeyman\nassert journeyman.Agent.__name__ == 'Agent'")
    assert "journeyman.loop.agent" in loaded


def test_the_command_line_module_loads_no_agent_provider_or_language_server() -> None:
    loaded = _loaded_after("import journeyman.cli.app")
    assert not loaded & set(HEAVY)
    assert "rich.console" not in loaded  # typer needs rich only to print help


def test_version_is_printed() -> None:
    import journeyman

    done = subprocess.run(
        [sys.executable, "-m", "journeyman", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == f"journeyman {journeyman.__version__}"
