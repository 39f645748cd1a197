"""`journeyman` / `jm`: the command wiring. Each command lives in the module of its concept:
`run_cmd` (run, resume, fork), `changes_cmd` (undo, diff), `sessions_cmd`, `usage_cmd`,
`rules_cmd`, `lsp_cmd`, `mcp_list_cmd`; shared options in `options`, exit codes in `exits`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from journeyman import __version__
from journeyman.cli.batch_cmd import batch
from journeyman.cli.changes_cmd import diff, undo
from journeyman.cli.eval_cmd import eval_command
from journeyman.cli.exits import EXIT_CLOSED_STDOUT, EXIT_CONFIG, silence_stdout
from journeyman.cli.lsp_cmd import lsp_command
from journeyman.cli.mcp_list_cmd import mcp_list_cmd
from journeyman.cli.rules_cmd import rules
from journeyman.cli.run_cmd import fork, resume, run
from journeyman.cli.sessions_cmd import sessions_app
from journeyman.cli.usage_cmd import usage
from journeyman.session.database import StoreDamagedError

app = typer.Typer(
    name="journeyman",
    help=(
        "An autonomous coding agent: give it a task and a workspace, it reads, edits and runs "
        "tests until the task is done — within limits, with every step saved.\n\n"
        "Provider auto-detection: ANTHROPIC_API_KEY, then OPENAI_API_KEY (+ OPENAI_BASE_URL)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(sessions_app, name="sessions")
mcp_app = typer.Typer(
    help="MCP servers declared in your mcp.json and the workspace's .journeyman/mcp.json.",
    no_args_is_help=True,
)
app.add_typer(mcp_app, name="mcp")
app.command("lsp")(lsp_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"journeyman {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """journeyman command line."""


for command in (run, resume, fork, undo, diff, usage):
    app.command()(command)
mcp_app.command("list")(mcp_list_cmd)
app.command()(rules)
app.command()(batch)
app.command("eval")(eval_command)


def main() -> None:
    try:
        app()
    except BrokenPipeError:  # `journeyman sessions export ... | head -1`
        silence_stdout()
        sys.exit(EXIT_CLOSED_STDOUT)
    except StoreDamagedError as error:  # found by a query after the store was opened
        sys.stderr.write(f"journeyman: {error.message}\n")
        sys.exit(EXIT_CONFIG)
