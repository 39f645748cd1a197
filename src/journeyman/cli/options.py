"""The options `run`, `resume` and `fork` share (typer `Annotated` types), and the parsing of
the limits and tool settings they give."""

from __future__ import annotations

import math
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from journeyman.cli.exits import EXIT_CONFIG, fail
from journeyman.economics.choices import BudgetMode
from journeyman.loop.choices import ModeName
from journeyman.policy.choices import PermissionMode
from journeyman.tools.choices import EditToolChoice, SandboxKind


class OutputFormat(StrEnum):
    """How `run`, `resume` and `fork` report: text, the final JSON result, or JSON events."""

    TEXT = "text"
    JSON = "json"
    STREAM_JSON = "stream-json"


MCP_CONFIG = Path(".journeyman") / "mcp.json"
"""`integrations.mcp.CONFIG_FILE`, repeated so that the MCP SDK loads only when it is used."""


WorkspaceOpt = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="Repository to work in.")
]
ProviderOpt = Annotated[
    str | None,
    typer.Option(
        help="anthropic, openai (any OpenAI-compatible server) or local (an embedded .gguf "
        "model). If omitted: ANTHROPIC_API_KEY, else OPENAI_API_KEY or OPENAI_BASE_URL, else "
        "a server on 127.0.0.1's usual ports (Ollama 11434, llama.cpp 8080, LM Studio 1234, "
        'vLLM 8000; JOURNEYMAN_LOCAL_PORTS="name=port,..." replaces them, "none" skips the '
        "search)."
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        help="Model name. With --provider local: PATH.gguf or an alias (smollm2-135m, "
        "gemma3-270m). If omitted: a server given by --base-url or OPENAI_BASE_URL (any but "
        "OpenAI's own, with or without an API key) or found on the local ports is asked for "
        "its models and its only one is used (several are listed to choose from); otherwise "
        "the provider's default."
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(help="Base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp...)."),
]
ToolFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--tool-format",
        "--tool-mode",
        help="How tools reach the model: auto (default: detected and recorded per server and "
        "model), native, json_schema, grammar, or text.",
    ),
]
MaxIterationsOpt = Annotated[
    int | None, typer.Option(min=1, help="Stop after N model turns (default 50).")
]
MaxBudgetOpt = Annotated[
    float | None, typer.Option(min=0.0, help="Stop once the session has cost this many USD.")
]
PricePerMtokOpt = Annotated[
    str | None,
    typer.Option(
        metavar="IN,OUT",
        help="The model's price in USD per million input and output tokens, e.g. 3,15; needed "
        "for --max-budget-usd when the price list does not know the model.",
    ),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Token budget (input + output tokens consumed; not the model's output limit).",
    ),
]
MaxDurationOpt = Annotated[
    str | None, typer.Option(help="Wall-clock limit, e.g. 600, 90s, 10m or 1h.")
]
BudgetModeOpt = Annotated[
    BudgetMode | None,
    typer.Option(
        help="How the token budget is enforced. strict (default): nudges from 70 %, one tool "
        "call a turn from 90 %, text only from 95 %, stop at 100 % of the token or USD "
        "budget; advisory: nudges only, never a stop for tokens; soft: tracking only. In "
        "every mode --max-iterations, --max-budget-usd and --max-duration stop the run at "
        "their limit; --max-total-tokens stops it only under strict.",
    ),
]
AutoExtendOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="Grant up to N budget extensions without asking (default: ask on a terminal, "
        "deny otherwise).",
    ),
]
ToolTimeoutOpt = Annotated[
    float | None, typer.Option(min=0.1, help="Seconds one tool call may run (default 60).")
]
OutputOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--output-format",
        "-o",
        help="text: progress + summary; json: the final result; stream-json: one event per line.",
    ),
]
SessionDirOpt = Annotated[
    Path | None,
    typer.Option(
        help="Session root (default: JOURNEYMAN_SESSION_DIR, else session_dir in your user "
        "config, else the per-user data dir)."
    ),
]
StreamOpt = Annotated[
    bool | None,
    typer.Option(
        help="Stream the model's text as it is written (default: the stream setting of your "
        "config, else on when the text output goes to a terminal and --quiet is not given; "
        "always in stream-json). --no-stream shows each reply whole once it has arrived.",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Text output without anything redrawn in place: no live status line (on a "
        "terminal it shows what runs, for how long, and the tokens and cost so far) and, "
        "unless --stream, no streamed reply. Piped output never has either.",
    ),
]


def stream_choice(
    stream: bool | None, output_format: OutputFormat, *, quiet: bool = False
) -> tuple[bool | None, bool]:
    """(what the command line decides, the default when neither it nor the settings do): always
    in stream-json, else as --stream/--no-stream says; by default on when the text output goes
    to a terminal, unless --quiet."""
    if output_format is OutputFormat.STREAM_JSON:
        return True, True
    return stream, output_format is OutputFormat.TEXT and not quiet and sys.stdout.isatty()


def streamed_text(
    stream: bool | None,
    output_format: OutputFormat,
    *,
    configured: bool = False,
    quiet: bool = False,
) -> bool | None:
    """Whether the model's text streams: always in stream-json, else as --stream/--no-stream
    says, else as the settings say when they do (`configured`), else on when the text output
    goes to a terminal (not with --quiet); None leaves it to the settings."""
    chosen, by_default = stream_choice(stream, output_format, quiet=quiet)
    if chosen is not None or configured:
        return chosen
    return True if by_default else None


ModeOpt = Annotated[
    ModeName | None,
    typer.Option(
        help="react (default): tool calls until done; plan-solve: write a plan first, then "
        "react; phased: discover (context pack) -> plan -> act -> verify, done only when the "
        "model says so and the verification command passed after its last change (each phase "
        "step counts as a turn against --max-iterations); ask: a question, answered with "
        "read-only tools (nothing can change; a prose answer succeeds; no check runs).",
    ),
]
VerifyOpt = Annotated[
    str | None,
    typer.Option(
        "--verify",
        metavar="CMD",
        help="Shell command that checks the work (every mode). It is fixed before the model's "
        "first turn and runs once then; when the model says it is done it runs again on the "
        "final tree. It passes only if it exits 0, its runner's summary (pytest, unittest, "
        "tox, make, ...) shows at least one test ran, and the tests and their settings are "
        "as they were at the start; otherwise its output goes back to the model, and after "
        "--max-verify-rounds failures the run ends as verification_failed. Default: the test "
        "command detected in the workspace before the run (make test, pytest, unittest, "
        "...); with none, the run cannot succeed (finish reason unverified). Runs in the "
        "run_command sandbox without asking (deny rules still hold).",
    ),
]
NoVerifyOpt = Annotated[
    bool,
    typer.Option(
        "--no-verify",
        help="Accept the model's word that it is done: no check runs (for questions and tasks "
        "without tests; see also --mode ask). Edit or command calls that were refused still "
        "end the run as refused. The phased mode still checks each change (its workflow).",
    ),
]
AllowTestEditsOpt = Annotated[
    bool,
    typer.Option(
        "--allow-test-edits",
        help="Let the run succeed although it changed existing test files, conftest.py, test "
        "settings (pytest.ini, tox.ini, the test tables of pyproject.toml and setup.cfg, the "
        "Makefile) or runs fewer tests than before: for tasks about the tests. The changes "
        "are listed on the receipt either way. Only you can give it, never a repository.",
    ),
]
VerifyTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--verify-timeout",
        metavar="SECONDS",
        min=0.1,
        help="Seconds the check may run (default 600); separate from --tool-timeout.",
    ),
]
VerifyRoundsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-verify-rounds",
        min=1,
        help="Failed checks after which the run ends as verification_failed (default 3).",
    ),
]
EditToolOpt = Annotated[
    EditToolChoice | None,
    typer.Option(
        help="The tool the model edits files with: auto (default: apply_patch for "
        "OpenAI-compatible providers, edit_file for the others), edit_file, apply_patch, both.",
    ),
]
SandboxOpt = Annotated[
    SandboxKind | None,
    typer.Option(
        help="Where commands run: auto (default: bubblewrap when it works, else local), local "
        "(no isolation, resource limits only), bubblewrap (workspace writable except .git and "
        "the Python journeyman runs from; home folder hidden except toolchains such as "
        "~/.local/bin, ~/.pyenv, ~/.cargo/bin; session store, your config, password hashes, SSH "
        "host keys and service data hidden; rest read-only; private /tmp and processes; no "
        "network), docker. Under every one, commands get an allow-listed environment "
        "(--pass-env). One named here that cannot start is an error.",
    ),
]
AllowNetworkOpt = Annotated[
    bool,
    typer.Option(
        "--allow-network",
        help="Let commands use the network inside the bubblewrap or docker sandbox.",
    ),
]
PassEnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--pass-env",
        metavar="NAME",
        help="Give commands this environment variable too (repeatable; NAME or PREFIX*). "
        "Commands otherwise get only an allow-list (PATH, HOME, the locale, the terminal, the "
        "Python and toolchain settings) and never the run's provider key; adds to pass_env of "
        "your config.",
    ),
]
PermissionModeOpt = Annotated[
    PermissionMode | None,
    typer.Option(
        help="plan: read only; default: ask before edits and commands; accept_edits: ask before "
        "commands; trusted: never ask (deny rules still apply); bypass: no ask rules either.",
    ),
]
McpOpt = Annotated[
    bool | None,
    typer.Option(
        "--mcp/--no-mcp",
        help="MCP servers lend the agent their tools as <server>_<tool>. Without this flag, the "
        "servers of your own mcp.json (beside your config.toml) start; --mcp also starts those "
        f"of the workspace's {MCP_CONFIG} (not by default: that file names programs to run, and "
        "a cloned repository should not choose them); --no-mcp starts none. Resume and fork "
        "keep the session's choice.",
    ),
]
SubagentsOpt = Annotated[
    bool,
    typer.Option(
        "--subagents",
        help="Give the model the spawn_agent tool: subagents with their own task, read-only "
        "unless asked to write, budgeted from this run's limits (which cap the whole tree). "
        "Their limits are set in the subagents table of your config.toml: max_depth (2), "
        "max_children_per_turn (4), max_parallel (3), max_child_share (0.6 of what remains), "
        "child_max_iterations (30), child_timeout_s (1800); a project's file may only lower "
        "them.",
    ),
]
ProjectHooksOpt = Annotated[
    bool,
    typer.Option(
        "--project-hooks",
        help="Run the hooks declared in the workspace's journeyman.toml (or "
        ".journeyman/config.toml). Ignored without this flag: they are shell commands chosen by "
        "the repository. Your user config's hooks always run.",
    ),
]
YesOpt = Annotated[
    bool | None,
    typer.Option(
        "--yes/--ask",
        "-y",
        help="--yes approves every call that would need asking (deny rules and plan mode still "
        "refuse); without it, a run that cannot ask (no terminal) refuses such calls. Resume and "
        "fork keep the session's choice unless given.",
    ),
]

OtelOpt = Annotated[
    bool,
    typer.Option(
        "--otel",
        help="Send OpenTelemetry traces of the run (a span per run, model call and tool call) "
        "over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318); on "
        "without this flag whenever that variable is set. Needs journeyman\\[otel]. See "
        "docs/otel.md.",
    ),
]


def given_limits(
    max_iterations: int | None,
    max_budget_usd: float | None,
    max_total_tokens: int | None,
    max_duration: str | None,
    budget_mode: BudgetMode | None,
    tool_timeout: float | None,
    price_per_mtok: str | None = None,
) -> dict[str, Any]:
    """The config fields the user set on the command line (unset ones are left out)."""
    try:
        duration_s = parse_duration(max_duration) if max_duration else None
        price = parse_price(price_per_mtok) if price_per_mtok else None
    except ValueError as error:
        fail(EXIT_CONFIG, str(error))
    if max_budget_usd is not None and not math.isfinite(max_budget_usd):
        fail(EXIT_CONFIG, f"--max-budget-usd must be a finite amount of USD, not {max_budget_usd}")
    if tool_timeout is not None and not math.isfinite(tool_timeout):
        fail(EXIT_CONFIG, f"--tool-timeout must be a finite number of seconds, not {tool_timeout}")
    given = {
        "price_per_mtok": price,
        "max_iterations": max_iterations,
        "max_budget_usd": max_budget_usd,
        "max_total_tokens": max_total_tokens,
        "max_duration_s": duration_s,
        "budget_mode": budget_mode,
        "tool_timeout_s": tool_timeout,
    }
    return {k: v for k, v in given.items() if v is not None}


def tool_flags(
    sandbox: SandboxKind | None,
    edit_tool: EditToolChoice | None,
    allow_network: bool,
    pass_env: list[str] | None,
) -> dict[str, Any]:
    """The config fields of --sandbox, --edit-tool, --allow-network and --pass-env (None where
    the flag was not given)."""
    return {
        "sandbox": sandbox,
        "edit_tool": edit_tool,
        "allow_network": True if allow_network else None,
        "pass_env": pass_env or None,
    }


def parse_price(text: str) -> tuple[float, float]:
    """`IN,OUT` dollars per million tokens, both >= 0."""
    parts = text.split(",")
    try:
        prices = tuple(float(p) for p in parts)
    except ValueError:
        prices = ()
    if len(prices) != 2 or not all(math.isfinite(p) and p >= 0 for p in prices):
        raise ValueError(
            f"--price-per-mtok {text!r} is not a price; give two numbers, USD per million "
            "input and output tokens, like --price-per-mtok 3,15"
        )
    return prices[0], prices[1]


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
    if not seconds > 0:  # nan too
        raise ValueError("--max-duration must be positive")
    return seconds
