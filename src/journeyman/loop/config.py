"""Reliability knobs and settings of one run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from journeyman.context.compaction import CompactionSettings
from journeyman.context.memory import MemorySettings
from journeyman.context.pack import PackSettings
from journeyman.economics.choices import BudgetMode
from journeyman.loop.choices import ModeName as ModeName
from journeyman.loop.subagent_config import SubagentConfig
from journeyman.policy.hooks import ShellHookConfig
from journeyman.policy.permissions import PermissionsConfig
from journeyman.tools.choices import EditToolChoice, SandboxKind, ToolSetChoice

Price = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""US dollars per million tokens: a finite amount, never negative."""


class PhasedSettings(BaseModel):
    """How the phased mode builds its context pack and keeps its memory."""

    model_config = ConfigDict(extra="forbid")

    pack_chars: int = Field(default=6_000, ge=500)
    """Largest context pack of the first discovery and of one forced by a loop, in characters."""
    update_pack_chars: int = Field(default=2_000, ge=200)
    """Largest pack of a discovery after a passing check, in characters: the history already
    holds the earlier pack and everything done since, so this one only brings it up to date."""
    pack: PackSettings = Field(default_factory=PackSettings)
    """Which files the pack shows snippets of, and how much of an error's output."""
    memory: MemorySettings = Field(default_factory=MemorySettings)
    """How much of the structured memory is kept verbatim and when it is compressed."""


class AgentConfig(BaseModel):
    """Limits and settings of a run; every limit is checked before each turn, in field order."""

    model_config = ConfigDict(extra="forbid")

    mode: ModeName = ModeName.REACT
    """react: tool calls until done; plan-solve: a plan first, then react; phased: discover,
    plan, act and verify, done only when verification passes; ask: a question, answered with
    read-only tools (nothing may change, a prose answer is a success, no check runs)."""
    verify_command: str | None = None
    """Shell command whose exit code 0 means the task is verified; None uses the first test
    command detected in the workspace whose program is installed."""
    verify: bool = True
    """Run the check command after the model's last change before accepting a success (every
    mode); False accepts the model's word (`--no-verify`)."""
    verify_timeout_s: float = Field(default=600.0, gt=0)
    """Seconds the check command may run (its own limit, never `tool_timeout_s`)."""
    allow_test_edits: bool = False
    """Let the run succeed although it changed the test infrastructure (existing test files,
    conftest.py, test settings, modules that shadow the runner) or runs fewer tests than
    before; for tasks that are about the tests (`--allow-test-edits`). The changes are listed
    on the receipt either way."""
    max_verify_rounds: int = Field(default=3, ge=1)
    """Failed checks after which the run ends as `verification_failed`; each earlier failure
    goes back to the model with the command's output."""
    phased: PhasedSettings = Field(default_factory=PhasedSettings)
    """Context pack and memory settings of the phased mode."""
    subagents: SubagentConfig = Field(default_factory=SubagentConfig)
    """Limits of the subagent tree when subagents are on (`--subagents`): depth, children per
    turn and at once, a child's largest share of the budget; ``[subagents]`` in a config file."""
    max_iterations: int = Field(default=50, ge=1)
    """Stop after this many turns of a run (finish reason `max_iterations`), in every budget
    mode; in the phased mode every phase step (plan, act, verify) is a turn."""
    max_consecutive_mistakes: int = Field(default=3, ge=1)
    """Stop after this many turns in a row whose tool calls all failed or were malformed."""
    max_budget_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Stop once the session has cost this many US dollars, in every budget mode (0 allows no
    spending at all); None means no cost limit. Needs the model's price: a run whose price is
    unknown is refused unless `price_per_mtok` gives it."""
    price_per_mtok: tuple[Price, Price] | None = None
    """US dollars per million (input, output) tokens, for a model the price database does not
    know or to override it; None uses the database."""
    max_total_tokens: int | None = Field(default=None, gt=0)
    """Token budget of the session (input + output since the baseline); None means none. In
    the strict budget mode a cap: each call is fitted to what is left of it."""
    hard_token_limit: bool = False
    """Make `max_total_tokens` a cap on every token billed (no baseline), with each call priced
    before it is sent so the cap is never passed, as `max_budget_usd` always is: how subagents,
    swarm workers and batch tasks run on an allocation granted from a shared pool."""
    max_duration_s: float | None = Field(default=None, gt=0)
    """Wall-clock seconds one run may last, in every budget mode; None means no time limit."""
    budget_mode: BudgetMode = BudgetMode.STRICT
    """How the token budget is enforced (strict: stop at 100 %, text only from 95 %;
    advisory: nudges only; soft: tracking only); the iteration, USD and duration limits stop
    the run in every mode."""
    extension_share: float = Field(default=0.5, gt=0)
    """Size of a budget extension as a fraction of the original token/USD limit."""
    exploration_saturation: int = Field(default=10, ge=1)
    """Read/search calls without an edit before the model is told to start acting."""
    loop_threshold: int = Field(default=3, ge=2)
    """Identical calls (same arguments and same result) within the window that count as a loop."""
    max_unproductive_iterations: int = Field(default=3, ge=1)
    """Stop after this many turns in a row that add no new call, result or text."""
    max_concurrency: int = Field(default=4, ge=1)
    """How many parallel-safe tool calls of one turn may run at the same time."""
    tool_timeout_s: float = Field(default=60.0, gt=0)
    """Seconds one tool call may run before it is stopped."""
    model_call_timeout_s: float = Field(default=600.0, gt=0)
    """Seconds one model call may take, its retries and waits included (a stalled stream or a
    long Retry-After ends it); `max_duration_s` may end it sooner."""
    requests_per_minute: int | None = Field(default=None, ge=1)
    """Model calls sent in any 60 s, per provider key (provider, base URL, API key), shared by
    every agent of the process (a batch's: by all its tasks); None: no limit of our own, only
    the service's 429s, whose Retry-After pauses every call of the key."""
    tokens_per_minute: int | None = Field(default=None, ge=1)
    """Tokens (prompt estimate plus output limit, then the reply's usage) sent in any 60 s,
    per provider key, shared as `requests_per_minute` is; None: no limit."""
    max_output_tokens: int = Field(default=4096, ge=1)
    """Upper bound of tokens the model may produce per turn."""
    temperature: float | None = None
    """Sampling temperature passed to the model; None keeps the provider's default."""
    stream: bool = False
    """Stream text deltas from the model (emitted as `text_delta` events)."""
    session_dir: Path | None = None
    """Root folder of session directories; None uses the per-user data dir."""
    system_prompt: str | None = None
    """Replaces the built-in system prompt when given."""
    system_prompt_shared_chars: int = Field(default=0, ge=0)
    """How many leading characters of `system_prompt` other runs send too, byte for byte (a
    swarm sets it to its workers' shared prefix); providers with explicit prompt-cache
    breakpoints (Anthropic) cache that part on its own so those runs share it. 0: none."""
    snapshot_messages: int = Field(default=6, ge=1)
    """How many trailing messages a `no_progress` result carries for diagnosis."""
    permissions: PermissionsConfig | None = None
    """Permission mode and allow/ask/deny rules; None runs every call (the library default,
    the embedding program decides); the command line always sets it."""
    compaction: CompactionSettings | None = Field(default_factory=CompactionSettings)
    """When to shrink the conversation near the context window; None turns compaction off."""
    hooks: list[ShellHookConfig] = []
    """Shell commands run at lifecycle events (Python hooks are added through the API)."""
    sandbox: SandboxKind = SandboxKind.AUTO
    """Where run_command runs: auto (bubblewrap when it works, else local), local, bubblewrap
    or docker; one asked for by name that cannot start is a configuration error."""
    sandbox_image: str | None = None
    """Image the docker sandbox's containers are made from (None: python:3.12-slim); a batch
    task's `image` sets it, with the docker sandbox."""
    allow_network: bool = False
    """Let commands use the network under bubblewrap and docker (local cannot cut it)."""
    sandbox_hidden: list[Path] = []
    """Host paths commands must not see, besides the session store and the user's config:
    bubblewrap shows each folder empty and each file unreadable wherever it lies (a path
    holding the workspace still shows the workspace); docker mounts nothing of the host but
    the workspace; local cannot hide anything. Only the user sets them (user config,
    JOURNEYMAN_SANDBOX_HIDDEN with paths separated by `:`, a batch's `--hide`); a batch adds
    its --out, its tasks file and the hidden tests of its graded tasks."""
    pass_env: list[str] = []
    """Environment variables commands get besides the built-in allow-list (PATH, HOME, the
    locale, ...): names, or prefixes ending in `*`; never the run's own provider key. Only
    the user chooses them (user config, JOURNEYMAN_PASS_ENV, `--pass-env`)."""
    edit_tool: EditToolChoice = EditToolChoice.AUTO
    """The tool the model edits files with: auto (apply_patch for OpenAI-compatible providers,
    whose models are trained on its format; edit_file for the others), edit_file, apply_patch
    or both."""
    tool_set: ToolSetChoice = ToolSetChoice.AUTO
    """How many tools the model is offered: full (every built-in tool, with the language-server,
    MCP and skill tools the run has), minimal (read_file, the edit tools, run_command and
    finish), or auto: minimal for a tiny model (the embedded provider's, or one whose name
    gives a size under a billion parameters, such as smollm2-135m), full for the others."""
    journal_commands: bool = True
    """Snapshot the workspace around each run_command so that undo and diff also cover the
    files commands change (a shadow git repository outside the workspace; tens of ms a command
    on a large tree)."""
