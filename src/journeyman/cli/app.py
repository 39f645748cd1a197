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
from journeyman.cli.lazy import LazyCommand, lazy_group

COMMANDS = {
    "lsp": LazyCommand(
        "journeyman.cli.lsp_cmd:lsp_command",
        "Show the language servers: configured, installed, detected, running, capabilities.",
    ),
    "run": LazyCommand(
        "journeyman.cli.run_cmd:run",
        "Run the agent on TASK until it finishes or a limit stops it.",
    ),
    "resume": LazyCommand(
        "journeyman.cli.run_cmd:resume",
        (
            "Continue a session from its last completed step, with the model-visible history, "
            "budget counters and settings it had. Flags given here override the remembered "
            "settings; API keys come from the environment again."
        ),
    ),
    "fork": LazyCommand(
        "journeyman.cli.run_cmd:fork",
        (
            "Start a new session from the first K steps of SESSION, with the files as they were at "
            "step K (in a fresh copy of the workspace unless --in-place), then continue."
        ),
    ),
    "chat": LazyCommand(
        "journeyman.cli.chat_cmd:chat",
        (
            "Talk to the agent in an interactive terminal app: send a task, follow up, approve "
            "edits and commands, undo; /help lists the commands. Limits, the check and the sandbox "
            "work as for `run`; a reopened session keeps its own unless given here."
        ),
    ),
    "swarm": LazyCommand(
        "journeyman.cli.swarm_cmd:swarm",
        (
            "Split GOAL into subtasks with one planning turn, work on them in parallel, and merge "
            "the results."
        ),
    ),
    "batch": LazyCommand(
        "journeyman.cli.batch_cmd:batch",
        (
            "Run the agent on every task of TASKS, each in its own copy of its workspace, under "
            "one global budget, with results and reports in --out."
        ),
    ),
    "eval": LazyCommand(
        "journeyman.cli.eval_cmd:eval_command",
        (
            "Run the agent on every task of SUITE as `journeyman batch` does, grade each task with "
            "its hidden tests once the agent has stopped, and report the resolved rate."
        ),
    ),
    "undo": LazyCommand(
        "journeyman.cli.changes_cmd:undo",
        "Undo the agent's most recent file change (or a step's, a file's, or all of them).",
    ),
    "diff": LazyCommand(
        "journeyman.cli.changes_cmd:diff",
        "Unified diff of the session's file changes that have not been undone.",
    ),
    "verify": LazyCommand(
        "journeyman.cli.verify_cmd:verify",
        "Run a session's check again on the workspace as it is now.",
    ),
    "replay": LazyCommand(
        "journeyman.cli.replay_cmd:replay",
        (
            "Re-execute SESSION's model replies in order, without calling a model, and check that "
            "every tool gives the result it gave then."
        ),
    ),
    "usage": LazyCommand(
        "journeyman.cli.usage_cmd:usage",
        "Tokens and cost per provider and model, from the usage log.",
    ),
    "rules": LazyCommand(
        "journeyman.cli.rules_cmd:rules",
        (
            "Show the rules files the agent reads into its system prompt: which exist, which were "
            "loaded, and their priority (the highest is listed first and wins a conflict)."
        ),
    ),
    "skills": LazyCommand(
        "journeyman.cli.skills_cmd:skills",
        (
            "List the skills a run in the workspace offers the model: the name, where it was "
            "found, whether it is yours or the repository's, and its description."
        ),
    ),
    "trust": LazyCommand(
        "journeyman.cli.trust_cmd:trust",
        "Review what the workspace's repository brings and approve it by content hash.",
    ),
    "sessions": LazyCommand(
        "journeyman.cli.sessions_cmd:sessions_app",
        "List, inspect, export, import and delete sessions.",
    ),
    "mcp": LazyCommand(
        "journeyman.cli.mcp_list_cmd:mcp_app",
        (
            "MCP servers declared in your mcp.json and the workspace's .journeyman/mcp.json, and "
            "journeyman itself as an MCP server (`mcp serve`)."
        ),
    ),
    "acp": LazyCommand(
        "journeyman.cli.acp_cmd:acp_command",
        (
            "Serve the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim "
            "plugins): the editor opens sessions on a folder, sends prompts, answers permission "
            "questions, cancels, and reopens stored sessions."
        ),
    ),
    "inspect": LazyCommand(
        "journeyman.cli.inspect_cmd:inspect",
        (
            "Write a session as one self-contained HTML page (timeline, diffs, token and cost "
            "charts, subagents) that opens offline and can be attached to a bug report."
        ),
    ),
}
"""Every command, in the order `--help` lists them: name -> where it is ("module:function", or a
`typer.Typer` of subcommands) and its summary in `journeyman --help` (the first paragraph of its
help; `tests/cli/test_startup.py` checks that the two agree). A command's module is imported only
when the command line names it, so that one command's imports never slow the start of another,
nor the list of commands: add new commands here."""

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
