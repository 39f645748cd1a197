"""Start-up stays light: the command line and `import journeyman` load the agent only when used,
and a command line loads only the module of the command it names."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from journeyman.cli.app import COMMANDS, app
from journeyman.cli.lazy import lazy_group
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import reply
from tests.support.cli import clean_env

HEAVY = ("journeyman.loop.agent", "journeyman.providers.factory", "journeyman.integrations.lsp")
RUN_SETTINGS = (
    "pydantic",  # the settings models; typer loads it too, to check the values given
    "journeyman.loop.config",
    "journeyman.loop.config_file",
    "journeyman.session.store",
    "journeyman.tools.builtin",
    "journeyman.policy.permissions",
    "journeyman.economics.budget",
)
COMMAND_MODULES = {entry.target.partition(":")[0] for entry in COMMANDS.values()}


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())


def _loaded_by_command_line(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[set[str], str]:
    """The modules a `journeyman` process had loaded when it exited, and its output."""
    listing = tmp_path / "modules.txt"
    probe = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(listing)!r}, 'w').write('\\n'.join(sys.modules)))\n"
        "from journeyman.cli.app import main\n"
        f"sys.argv = ['journeyman', *{list(args)!r}]\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=90, env=env
    )
    assert done.returncode == 0, done.stderr
    return set(listing.read_text().split()), done.stdout


def test_import_journeyman_loads_no_agent_until_a_name_is_used() -> None:
    loaded = _loaded_after("import journeyman")
    assert not loaded & set(HEAVY)
    loaded = _loaded_after("import journeyman\nassert journeyman.Agent.__name__ == 'Agent'")
    assert "journeyman.loop.agent" in loaded


def test_the_command_line_module_loads_no_command_settings_or_agent() -> None:
    loaded = _loaded_after("import journeyman.cli.app")
    assert not loaded & set(HEAVY)
    assert not loaded & set(RUN_SETTINGS)
    assert not loaded & COMMAND_MODULES
    assert "rich.console" not in loaded  # typer needs rich only to print help
    assert "importlib.metadata" not in loaded  # the version is read only for --version


def test_version_loads_no_command_module_nor_pydantic(tmp_path: Path) -> None:
    import journeyman

    loaded, output = _loaded_by_command_line(tmp_path, "--version")
    assert output.strip() == f"journeyman {journeyman.__version__}"
    assert not loaded & (set(HEAVY) | set(RUN_SETTINGS) | COMMAND_MODULES)
    assert "rich.console" not in loaded


def test_run_help_loads_the_run_command_but_not_its_settings_or_the_others(
    tmp_path: Path,
) -> None:
    loaded, output = _loaded_by_command_line(tmp_path, "run", "--help")
    assert "--max-iterations" in output and "--permission-mode" in output
    assert "journeyman.cli.run_cmd" in loaded
    run_modules = {"journeyman.cli.run_cmd", "journeyman.cli.lsp_cmd"}  # --lsp is defined there
    assert not loaded & (COMMAND_MODULES - run_modules)
    assert not loaded & set(HEAVY)
    assert not loaded & set(RUN_SETTINGS)


def test_help_lists_the_commands_without_loading_any(tmp_path: Path) -> None:
    loaded, output = _loaded_by_command_line(tmp_path, "--help")
    assert all(f" {name} " in output for name in COMMANDS)
    assert "journeyman.cli.lazy" in loaded
    assert not loaded & (set(HEAVY) | set(RUN_SETTINGS) | COMMAND_MODULES)
    assert not any(name.startswith(("openai", "anthropic", "genai_prices")) for name in loaded)


def test_each_summary_is_the_first_paragraph_of_its_commands_help() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    context = typer.Context(group, info_name="journeyman")
    for name, entry in COMMANDS.items():
        command = group.get_command(context, name)
        assert command is not None and command.help, name
        assert entry.summary == inspect.cleandoc(command.help).split("\n\n")[0], name


def test_help_from_the_summaries_is_the_help_from_the_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    context = typer.Context(group, info_name="journeyman")
    group.get_help(context)  # typer's rich help prints rather than returns
    from_summaries = capsys.readouterr().out
    for name in COMMANDS:
        group.get_command(context, name)  # built now: the listing reads the commands themselves
    group.get_help(context)
    assert capsys.readouterr().out == from_summaries
    assert "Run the agent on TASK until it finishes" in from_summaries


@pytest.mark.slow  # two runs through the command line: about 10 s on a loaded machine
def test_a_react_run_loads_only_its_mode_its_provider_and_kept_prices(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_openai.default = reply("Done.")
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_openai.base_url)
    env["JOURNEYMAN_CACHE_DIR"] = str(tmp_path / "cache")  # the prices kept by the first run
    args = ["run", "--yes", "say hi", "--model", "gpt-4o-mini", "-w", str(tmp_path / "ws")]
    args += ["--session-dir", str(tmp_path / "sessions"), "--no-verify"]
    (tmp_path / "ws").mkdir()
    first, _ = _loaded_by_command_line(tmp_path, *args, env=env)
    assert "genai_prices.data" in first  # the price looked up once
    loaded, output = _loaded_by_command_line(tmp_path, *args, env=env)
    assert "Done." in output and len(fake_openai.requests) == 2
    assert "journeyman.loop.modes.react" in loaded and "openai" in loaded
    unused = ("journeyman.swarm", "journeyman.loop.modes.phased", "journeyman.loop.modes.plan_")
    assert not {name for name in loaded if name.startswith(unused)}
    assert not {name for name in loaded if name.startswith("anthropic")}
    assert "genai_prices.data" not in loaded


def test_a_bad_choice_still_exits_2_naming_the_choices() -> None:
    done = CliRunner().invoke(app, ["run", "task", "--mode", "bogus"])
    assert done.exit_code == 2
    assert "--mode" in done.output and "'bogus' is not one of" in done.output
    assert all(f"'{mode}'" in done.output for mode in ("react", "plan-solve", "phased", "ask"))


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


def test_help_lists_every_command_in_table_order_and_a_typo_gets_a_suggestion() -> None:
    runner = CliRunner()
    listing = runner.invoke(app, ["--help"], terminal_width=100).output
    positions = [listing.find(f"│ {name} ") for name in COMMANDS]
    assert -1 not in positions and positions == sorted(positions)
    typo = runner.invoke(app, ["rn"], terminal_width=100)
    assert typo.exit_code == 2
    assert "Did you mean 'run'?" in typo.output


def _greet(name: str, loud: bool = False) -> None:
    """Say hello."""
    typer.echo(f"hello {name}{'!' if loud else ''}")


_tools = typer.Typer(help="Tool things.")


@_tools.command("count")
def _count(limit: int = typer.Option(..., min=1)) -> None:
    """Count up."""
    typer.echo(" ".join(str(i) for i in range(1, limit + 1)))


def test_a_lazy_group_builds_functions_and_subapps_and_keeps_eager_commands() -> None:
    demo = typer.Typer(
        cls=lazy_group({"greet": f"{__name__}:_greet", "tools": f"{__name__}:_tools"}),
        add_completion=False,
    )

    @demo.callback()
    def options() -> None:
        """A demo."""

    @demo.command()
    def eager() -> None:
        """Registered the usual way."""
        typer.echo("eager ran")

    runner = CliRunner()
    assert runner.invoke(demo, ["greet", "ada", "--loud"]).output == "hello ada!\n"
    assert runner.invoke(demo, ["tools", "count", "--limit", "3"]).output == "1 2 3\n"
    assert runner.invoke(demo, ["eager"]).output == "eager ran\n"
    bad = runner.invoke(demo, ["tools", "count", "--limit", "0"])
    assert bad.exit_code == 2 and "--limit" in bad.output
    listing = runner.invoke(demo, ["--help"], terminal_width=100).output
    assert listing.find("eager") < listing.find("greet") < listing.find("tools")
    assert "Say hello." in listing and "Tool things." in listing
    assert runner.invoke(demo, ["nope"]).exit_code == 2


def test_help_paragraphs_wrap_to_the_terminal_not_to_the_source_file() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    resume = group.get_command(typer.Context(group), "resume")
    swarm = group.get_command(typer.Context(group), "swarm")
    assert resume is not None and swarm is not None and resume.help and swarm.help
    # the source wraps these docstrings at 100 columns; the help keeps only paragraph breaks
    assert "\n" not in resume.help.split("\n\n")[0]
    assert "no uncommitted changes to tracked files" in swarm.help
