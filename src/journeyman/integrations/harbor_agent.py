"""journeyman as a Harbor installed agent:
`harbor run -a journeyman.integrations.harbor_agent:JourneymanAgent -m openai/MODEL -p TASKS`.

Harbor (`harbor` on PyPI, Python 3.12 or later) imports this module by its path; journeyman
itself never does, so nothing here runs under journeyman's own tooling (it is left out of
mypy, which runs where `harbor` is not installed). Harbor's process needs journeyman importable
(`pip install journeyman` next to harbor, or PYTHONPATH), the task's environment needs it to run.

What Harbor calls, in order:

- `install` (skipped with `--ak skip_install=true`): nothing when `journeyman --version` already
  answers in the environment; otherwise a virtual environment under `/installed-agent` with
  Python 3.11 or later (the environment's own, else one uv downloads), `pip install` of the
  requirement `--ak package=...` (a version pin, a URL) or of the wheel `--ak wheel=PATH` copied
  from the host, and `journeyman` linked into `/usr/local/bin`.
- `run`: `journeyman run --yes --output-format json` on the instruction, in the environment's
  working folder, its sessions under `/logs/agent/sessions` (so they come back with the logs),
  its stderr in `/logs/agent/journeyman.log`; then `journeyman sessions export ID --format atif`
  writes `/logs/agent/trajectory.json`, the trajectory Harbor reads. Exit 1 (the run did not
  succeed by journeyman's own check, or reached a limit) is not an agent error: the task's
  verifier decides; a run ended by the provider or the setup (`INFRASTRUCTURE`) is one.
- The model: Harbor's `-m provider/model` (`openai/...`, `anthropic/...`, or a bare model name);
  the provider's key and base URL are passed on from Harbor's environment (`OPENAI_API_KEY`,
  `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`) or given with `--ae NAME=VALUE`.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.installed.base import (
    BaseInstalledAgent,
    NonZeroAgentExitCodeError,
    with_prompt_template,
)
from harbor.agents.options import Cli, InstalledAgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from pydantic import Field

INSTALL_DIR = PurePosixPath("/installed-agent/journeyman")
RESULT_FILE = "journeyman-result.json"
TRAJECTORY_FILE = "trajectory.json"
PROVIDERS = ("openai", "anthropic", "local")
PASSED_ON = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
"""Variables of Harbor's own environment handed to journeyman (each only when set)."""
ENDED_BY_THE_TASK = (0, 1)
"""journeyman's exit codes that end a run normally: done, or not done by its own check."""
INFRASTRUCTURE = frozenset(
    {"provider_unavailable", "provider_error", "configuration_error", "internal_error"}
)
"""Finish reasons that say the model or the setup failed, not the agent's work: the trial ends
with an agent error (which Harbor's --max-retries can retry) rather than a reward of 0."""


class JourneymanOptions(InstalledAgentOptions):
    """The `--ak` options of the journeyman agent."""

    package: str | None = Field(
        default=None,
        description="pip requirement to install journeyman from (a version pin, a URL).",
    )
    wheel: str | None = Field(
        default=None,
        description="A journeyman wheel or sdist on the host, copied in and installed.",
    )
    provider: Annotated[str | None, Cli("--provider")] = Field(
        default=None, description="anthropic, openai or local (default: from -m, else detected)."
    )
    mode: Annotated[str | None, Cli("--mode")] = Field(
        default=None, description="react, plan-solve or phased."
    )
    max_iterations: Annotated[int | None, Cli("--max-iterations")] = Field(
        default=None, description="Model turns the run may take."
    )
    max_budget_usd: Annotated[float | None, Cli("--max-budget-usd")] = Field(
        default=None, description="US dollars the run may spend."
    )
    price_per_mtok: Annotated[str | None, Cli("--price-per-mtok")] = Field(
        default=None, description="The model's price IN,OUT in USD per million tokens."
    )
    max_duration: Annotated[str | None, Cli("--max-duration")] = Field(
        default=None, description="Wall-clock limit of the run (600, 10m, 1h)."
    )
    sandbox: Annotated[str | None, Cli("--sandbox")] = Field(
        default=None, description="Where journeyman's commands run inside the environment."
    )
    verify: Annotated[str | None, Cli("--verify")] = Field(
        default=None, description="Shell command journeyman checks its work with."
    )
    no_verify: Annotated[bool | None, Cli("--no-verify")] = Field(
        default=None, description="Run without a check of journeyman's own."
    )


class JourneymanAgent(BaseInstalledAgent):
    """journeyman, installed in the task's environment and run headless."""

    capabilities = AgentCapabilities(atif=True)
    options_model = JourneymanOptions
    options: JourneymanOptions

    @staticmethod
    def name() -> str:
        return "journeyman"

    def get_version_command(self) -> str | None:
        return "journeyman --version"

    def parse_version(self, stdout: str) -> str:
        return stdout.strip().split()[-1] if stdout.strip() else ""

    async def install(self, environment: BaseEnvironment) -> None:
        if await self.is_requested_version_installed(environment):
            return
        requirement = await self._requirement(environment)
        await self.exec_as_root(environment, command=install_script(requirement))

    async def _requirement(self, environment: BaseEnvironment) -> str:
        """What pip installs: the uploaded wheel, the `package` requirement, or a clear error."""
        if self.options.wheel:
            wheel = Path(self.options.wheel).expanduser()
            if not wheel.is_file():
                raise ValueError(f"journeyman agent: --ak wheel={wheel}: no such file")
            target = f"/installed-agent/{wheel.name}"
            await environment.upload_file(wheel, target)
            return target
        if self.options.package:
            return self.options.package
        raise ValueError(
            "journeyman agent: journeyman is not installed in the environment; say where to "
            "install it from (--ak package=REQUIREMENT or --ak wheel=PATH), or bake it into "
            "the image and pass --ak skip_install=true"
        )

    @with_prompt_template
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        logs = PurePosixPath(self.environment_logs_dir)
        with tempfile.TemporaryDirectory(prefix="journeyman-harbor-") as scratch:
            local = Path(scratch) / "instruction.md"
            local.write_text(instruction, encoding="utf-8")
            await environment.upload_file(local, str(logs / "instruction.md"))
        result = await environment.exec(
            command=self.run_command(logs), env=self._provider_env(), timeout_sec=None
        )
        if result.return_code not in ENDED_BY_THE_TASK:
            raise self._classify_exec_error("journeyman run", result)
        outcome = parse_result(result.stdout or "")
        if outcome is None:
            raise NonZeroAgentExitCodeError(
                "journeyman run printed no JSON result; see journeyman.log in the agent logs"
            )
        (self.logs_dir / RESULT_FILE).write_text(json.dumps(outcome, indent=2), encoding="utf-8")
        fill_context(context, outcome)
        await self._export_trajectory(environment, logs, str(outcome.get("session_id") or ""))
        if outcome.get("finish_reason") in INFRASTRUCTURE:
            raise NonZeroAgentExitCodeError(
                f"journeyman run ended with {outcome['finish_reason']}: {outcome.get('error')}"
            )

    def run_command(self, logs: PurePosixPath) -> str:
        """The shell command that runs journeyman on the uploaded instruction."""
        words = ["journeyman", "run", "--yes", "--output-format", "json"]
        words += ["--session-dir", str(logs / "sessions")]
        provider, model = split_model(self.model_name)
        if provider and not self.options.provider:
            words += ["--provider", provider]
        if model:
            words += ["--model", model]
        flags = self.compile_cli_flags()
        instruction = shlex.quote(str(logs / "instruction.md"))
        return (
            f"mkdir -p {shlex.quote(str(logs))} && {shlex.join(words)} {flags} -- "
            f'"$(cat {instruction})" 2> {shlex.quote(str(logs / "journeyman.log"))}'
        )

    def _provider_env(self) -> dict[str, str]:
        env = {}
        for name in PASSED_ON:
            value = self._get_env(name)
            if value:
                env[name] = value
        return env

    async def _export_trajectory(
        self, environment: BaseEnvironment, logs: PurePosixPath, session_id: str
    ) -> None:
        """`trajectory.json` in ATIF through `journeyman sessions export`; a failure is logged
        (the run itself stands)."""
        if not session_id:
            self.logger.warning("journeyman run reported no session id; no trajectory exported")
            return
        words = ["journeyman", "sessions", "export", session_id, "--format", "atif"]
        words += ["-o", str(logs / TRAJECTORY_FILE), "--session-dir", str(logs / "sessions")]
        exported = await environment.exec(command=shlex.join(words))
        if exported.return_code != 0:
            detail = (exported.stderr or exported.stdout or "no output").strip()[-500:]
            self.logger.warning(f"journeyman could not export the ATIF trajectory: {detail}")

    def populate_context_post_run(self, context: AgentContext) -> None:
        path = self.logs_dir / RESULT_FILE
        if path.is_file():
            outcome = parse_result(path.read_text(encoding="utf-8"))
            if outcome is not None:
                fill_context(context, outcome)


def split_model(name: str | None) -> tuple[str | None, str | None]:
    """Harbor's `provider/model` as journeyman's provider and model (a bare name stays whole)."""
    if not name:
        return None, None
    provider, _, model = name.partition("/")
    if model and provider in PROVIDERS:
        return provider, model
    return None, name


def parse_result(stdout: str) -> dict[str, Any] | None:
    """The JSON object `journeyman run --output-format json` printed, if it printed one."""
    start = stdout.find("{")
    if start < 0:
        return None
    try:
        data = json.loads(stdout[start:])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def fill_context(context: AgentContext, outcome: dict[str, Any]) -> None:
    """Harbor's token and cost figures from journeyman's result."""
    usage = outcome.get("usage") or {}
    if isinstance(usage, dict):
        context.n_input_tokens = int(usage.get("input_tokens") or 0)
        context.n_output_tokens = int(usage.get("output_tokens") or 0)
        context.n_cache_tokens = int(usage.get("cache_read_tokens") or 0)
    cost = outcome.get("cost_usd")
    context.cost_usd = float(cost) if isinstance(cost, int | float) else None
    context.metadata = {
        key: outcome.get(key) for key in ("session_id", "finish_reason", "success", "iterations")
    }


def install_script(requirement: str) -> str:
    """Shell that installs `requirement` into its own virtual environment, with the
    environment's Python when it is 3.11 or later, else one uv downloads."""
    venv = shlex.quote(str(INSTALL_DIR))
    spec = shlex.quote(requirement)
    return f"""set -e
mkdir -p /installed-agent
PY=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 \\
     && "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    PY="$candidate"; break
  fi
done
if [ -n "$PY" ] && "$PY" -m venv {venv}; then
  {venv}/bin/python -m pip install --quiet {spec}
else
  if ! command -v uv >/dev/null 2>&1; then
    curl -LsSf https://astral.sh/uv/install.sh | sh
    export PATH="$HOME/.local/bin:$PATH"
  fi
  uv venv --python 3.12 {venv}
  uv pip install --python {venv}/bin/python {spec}
fi
ln -sf {venv}/bin/journeyman /usr/local/bin/journeyman
journeyman --version
"""
