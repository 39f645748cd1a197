"""`journeyman` / `jm`: run the agent on a task from the command line."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from journeyman import __version__
from journeyman.cli.approver import choose_approver
from journeyman.cli.render import OutputFormat, Renderer, usage_table
from journeyman.core.errors import ConfigurationError
from journeyman.core.result import FinishReason
from journeyman.economics.budget import BudgetMode
from journeyman.economics.usage_log import DATABASE_FILE, UsageLog
from journeyman.loop.agent import Agent
from journeyman.loop.config import AgentConfig
from journeyman.providers.factory import create_provider
from journeyman.session.store import default_session_root

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_CANCELLED = 130

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


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What the agent should do, in plain words.")],
    workspace: Annotated[
        Path, typer.Option("--workspace", "-w", help="Repository to work in.")
    ] = Path("."),
    provider: Annotated[
        str | None,
        typer.Option(help="anthropic or openai; auto-detected from the environment if omitted."),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name (provider default if omitted).")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(help="Base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp...)."),
    ] = None,
    tool_format: Annotated[
        str,
        typer.Option(help="native, or text for models without tool calling (fenced JSON)."),
    ] = "native",
    max_iterations: Annotated[int, typer.Option(min=1, help="Stop after N model turns.")] = 50,
    max_budget_usd: Annotated[
        float | None, typer.Option(min=0.0, help="Stop once the run has cost this many USD.")
    ] = None,
    max_total_tokens: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Token budget of the run (input + output tokens consumed; not the model's "
            "output limit).",
        ),
    ] = None,
    max_duration: Annotated[
        str | None,
        typer.Option(help="Wall-clock limit, e.g. 600, 90s, 10m or 1h."),
    ] = None,
    budget_mode: Annotated[
        BudgetMode,
        typer.Option(
            help="strict: nudge at 70 %, fewer tools at 90 %, text only at 95 %, stop at 100 %; "
            "advisory: nudges only; soft: track only.",
        ),
    ] = BudgetMode.STRICT,
    auto_extend: Annotated[
        int,
        typer.Option(
            min=0,
            help="Grant up to N budget extensions without asking (default: ask on a terminal, "
            "deny otherwise).",
        ),
    ] = 0,
    tool_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds one tool call may run.")
    ] = 60.0,
    output_format: Annotated[
        OutputFormat,
        typer.Option(
            "--output-format",
            "-o",
            help="text: progress + summary; json: the final result; stream-json: one event "
            "per line.",
        ),
    ] = OutputFormat.TEXT,
    session_dir: Annotated[
        Path | None,
        typer.Option(help="Where session folders go (default: the per-user data dir)."),
    ] = None,
    stream: Annotated[bool, typer.Option(help="Stream the model's text as it is written.")] = False,
) -> None:
    """Run the agent on TASK until it finishes or a limit stops it.

    Exit status: 0 success, 1 the run did not succeed, 2 configuration error, 130 cancelled.
    """
    if tool_format not in ("native", "text"):
        _fail(EXIT_CONFIG, f"--tool-format must be native or text, not {tool_format!r}")
    if not workspace.is_dir():
        _fail(EXIT_CONFIG, f"workspace {workspace} is not a directory")
    fmt: Literal["native", "text"] = "text" if tool_format == "text" else "native"
    try:
        chosen = create_provider(provider, model, base_url, tool_format=fmt)
    except ConfigurationError as error:
        _fail(EXIT_CONFIG, error.message)
    try:
        duration_s = parse_duration(max_duration) if max_duration else None
    except ValueError as error:
        _fail(EXIT_CONFIG, str(error))
    config = AgentConfig(
        max_iterations=max_iterations,
        max_budget_usd=max_budget_usd or None,
        max_total_tokens=max_total_tokens,
        max_duration_s=duration_s,
        budget_mode=budget_mode,
        tool_timeout_s=tool_timeout,
        session_dir=session_dir,
        stream=stream or output_format is OutputFormat.STREAM_JSON,
    )
    renderer = Renderer(output_format)
    interactive = output_format is OutputFormat.TEXT and sys.stdin.isatty()
    agent = Agent(
        chosen,
        workspace=workspace,
        config=config,
        on_event=renderer,
        approver=choose_approver(auto_extend, interactive),
    )
    try:
        result = asyncio.run(agent.run(task))
    except KeyboardInterrupt:
        _fail(EXIT_CANCELLED, "cancelled")
    renderer.final(result)
    if result.success:
        raise typer.Exit(EXIT_OK)
    code = {
        FinishReason.CONFIGURATION_ERROR: EXIT_CONFIG,
        FinishReason.CANCELLED: EXIT_CANCELLED,
    }.get(result.finish_reason, EXIT_FAILED)
    _fail(code, f"{result.finish_reason.value}: {result.error or 'the run did not succeed'}")


@app.command()
def usage(
    session: Annotated[
        str | None, typer.Option(help="Only this session id (default: every session).")
    ] = None,
    session_dir: Annotated[
        Path | None,
        typer.Option(help="Session root holding the usage database (default: per-user dir)."),
    ] = None,
) -> None:
    """Tokens and cost per provider and model, from the usage log."""
    path = (session_dir or default_session_root()) / DATABASE_FILE
    if not path.exists():
        _fail(EXIT_FAILED, f"no usage recorded yet ({path} does not exist)")
    log = UsageLog(path)
    try:
        rows = log.summary(session)
    finally:
        log.close()
    if not rows:
        _fail(EXIT_FAILED, f"no usage recorded for session {session}" if session else "no usage")
    usage_table(rows)


def parse_duration(text: str) -> float:
    """Seconds from `600`, `90s`, `10m` or `1h`."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    value = text.strip().lower()
    factor = units.get(value[-1:])
    number = value[:-1] if factor else value
    try:
        seconds = float(number) * (factor or 1.0)
    except ValueError:
        raise ValueError(
            f"--max-duration: cannot read {text!r}; use e.g. 600, 90s, 10m, 1h"
        ) from None
    if seconds <= 0:
        raise ValueError("--max-duration must be positive")
    return seconds


def _fail(code: int, message: str) -> typer.Exit:
    first, *rest = message.splitlines() or [""]
    sys.stderr.write(f"journeyman: {first}\n")
    for line in rest:
        sys.stderr.write(f"{line}\n")
    raise typer.Exit(code)


def main() -> None:
    app()
