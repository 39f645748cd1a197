"""`journeyman` / `jm`: the command wiring. Each command lives in the module of its concept:
`run_cmd` (run, resume, fork), `chat_cmd` (the interactive app, also `journeyman` alone on a
terminal), `swarm_cmd`, `batch_cmd`, `eval_cmd`, `changes_cmd` (undo, diff), `verify_cmd`,
`sessions_cmd`, `replay_cmd` (replay a stored session's replies and compare the tool
results), `usage_cmd`, `rules_cmd`, `skills_cmd`, `lsp_cmd`, `mcp_list_cmd` (mcp list,
mcp serve), `acp_cmd`, `inspect_cmd`; shared options in `options` (those of one command alone
in `run_options`, `batch_options`, `mcp_serve_options`), exit codes in `exits`.

Of the surfaces, the command line alone imports the others (the app, the ACP agent, the MCP
server, the inspector): it launches them. None of them imports the command line; what they
share with it (choosing a run's servers, restoring a stored session's settings) lives in the
loop layer. `tests/test_layering.py` holds every package to this."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from journeyman.cli.exits import EXIT_CLOSED_STDOUT, EXIT_CONFIG, silence_stdout
from journeyman.cli.lazy import lazy_group

COMMANDS = {
    "lsp": "journeyman.cli.lsp_cmd:lsp_command",
    "run": "journeyman.cli.run_cmd:run",
    "resume": "journeyman.cli.run_cmd:resume",
    "fork": "journeyman.cli.run_cmd:fork",
    "chat": "journeyman.cli.chat_cmd:chat",
    "swarm": "journeyman.cli.swarm_cmd:swarm",
    "batch": "journeyman.cli.batch_cmd:batch",
    "eval": "journeyman.cli.eval_cmd:eval_command",
    "undo": "journeyman.cli.changes_cmd:undo",
    "diff": "journeyman.cli.changes_cmd:diff",
    "verify": "journeyman.cli.verify_cmd:verify",
    "replay": "journeyman.cli.replay_cmd:replay",
    "usage": "journeyman.cli.usage_cmd:usage",
    "rules": "journeyman.cli.rules_cmd:rules",
    "skills": "journeyman.cli.skills_cmd:skills",
    "trust": "journeyman.cli.trust_cmd:trust",
    "sessions": "journeyman.cli.sessions_cmd:sessions_app",
    "mcp": "journeyman.cli.mcp_list_cmd:mcp_app",
    "acp": "journeyman.cli.acp_cmd:acp_command",
    "inspect": "journeyman.cli.inspect_cmd:inspect",
}
"""Every command, in the order `--help` lists them: name -> "module:function" (or a
`typer.Typer` of subcommands). A command's module is imported only when the command line names
it, so that one command's imports never slow the start of another: add new commands here."""

app = typer.Typer(
    name="journeyman",
    help=(
        "An autonomous coding agent: give it a task and a workspace, it reads, edits and runs "
        "tests until the task is done — within limits, with every step saved.\n\n"
        "Provider auto-detection: ANTHROPIC_API_KEY, then OPENAI_API_KEY (+ OPENAI_BASE_URL)."
    ),
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=lazy_group(COMMANDS),
)


def _version(value: bool) -> None:
    if value:
        from journeyman.core.package import package_version  # reads the metadata: ~13 ms

        typer.echo(f"journeyman {package_version()}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """journeyman command line."""
    if ctx.invoked_subcommand is not None:
        return
    if sys.stdin.isatty() and sys.stdout.isatty():  # `journeyman` alone opens the app
        from journeyman.cli.chat_cmd import chat

        chat()
        raise typer.Exit()
    typer.echo(ctx.get_help())
    raise typer.Exit(2)  # as before the app existed: no command and no terminal is a usage error


def main() -> None:
    from journeyman.core.environ_block import wipe_unlisted

    wipe_unlisted()  # /proc/<pid>/environ shows no credential to other processes from here on
    try:
        app()
    except BrokenPipeError:  # `journeyman sessions export ... | head -1`
        silence_stdout()
        sys.exit(EXIT_CLOSED_STDOUT)
    except Exception as error:
        from journeyman.session.database import StoreDamagedError

        if not isinstance(error, StoreDamagedError):
            raise
        # found by a query after the store was opened
        sys.stderr.write(f"journeyman: {error.message}\n")
        sys.exit(EXIT_CONFIG)
