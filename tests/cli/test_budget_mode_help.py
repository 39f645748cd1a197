"""What `journeyman run --help` says about the budget modes is what the runs do: the limits it
names as stopping the run in every mode stop it in each mode, and the token budget stops it only
under strict."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from journeyman import FinishReason
from journeyman.core.events import Event
from journeyman.core.messages import Usage
from journeyman.economics.budget import BudgetMode
from tests.fakes.agents import budget_agent, call, turn
from tests.support.cli import clean_env, jm


@pytest.fixture(scope="module")
def budget_mode_help() -> str:
    """The --budget-mode entry of `run --help`, on one line."""
    done = jm("run", "--help", env=clean_env(COLUMNS="400", TERM="dumb"), timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [re.sub(r"[│╭╮╰╯─]", " ", line).strip() for line in done.stdout.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("--budget-mode"))
    entry = [lines[start]]
    for line in lines[start + 1 :]:
        if not line or line.startswith("-"):  # the next option, or the end of the panel
            break
        entry.append(line)
    return " ".join(" ".join(entry).split())


def every_mode_limits(help_text: str) -> list[str]:
    said = re.search(r"In every mode (.+?) stop the run", help_text)
    assert said, help_text
    return re.findall(r"--[a-z-]+", said.group(1))


def test_the_help_names_the_hard_limits_and_the_token_rule(budget_mode_help: str) -> None:
    assert every_mode_limits(budget_mode_help) == [
        "--max-iterations",
        "--max-budget-usd",
        "--max-duration",
    ]
    assert "--max-total-tokens stops it only under strict" in budget_mode_help
    assert "do not end the run" not in budget_mode_help  # what it used to say, wrongly
    for mode in BudgetMode:
        assert mode.value in budget_mode_help


REASONS = {
    "--max-iterations": FinishReason.MAX_ITERATIONS,
    "--max-budget-usd": FinishReason.MAX_BUDGET_USD,
    "--max-duration": FinishReason.MAX_DURATION,
    "--max-total-tokens": FinishReason.MAX_TOKENS,
}
PRICEY = Usage(input_tokens=100_000, output_tokens=1_000)  # about $0.32 a call


async def run_under(tmp_path: Path, flag: str, mode: BudgetMode) -> FinishReason:
    """A run of six turns that passes the `flag` limit after two or three, in `mode`."""
    limit: dict[str, Any] = {
        "--max-iterations": {"max_iterations": 3},
        "--max-budget-usd": {"max_budget_usd": 1.0},
        "--max-duration": {"max_duration_s": 10.0},
        "--max-total-tokens": {"max_total_tokens": 10_000, "max_output_tokens": 10_000},
    }[flag]
    usage = PRICEY if flag == "--max-budget-usd" else Usage(0, 4_000)
    script = [turn(call("echo", "c0", text="0"), usage=Usage())]  # its prompt: the baseline
    script += [turn(call("echo", f"c{i}", text=str(i)), usage=usage) for i in range(1, 6)]
    script.append(turn(text="finished"))
    priced = {"name": "anthropic", "model": "claude-sonnet-4-5"}
    events: list[Event] = []
    options = {"provider_options": priced} if flag == "--max-budget-usd" else {}
    agent, _ = budget_agent(tmp_path, script, events, budget_mode=mode, **limit, **options)
    if flag == "--max-duration":
        now = [0.0]
        agent.economics.clock = lambda: now[0]

        def tick(event: Event) -> None:
            if event.type == "tool_result":
                now[0] += 4

        agent.on_event = tick
    result = await agent.run("keep echoing")
    return result.finish_reason


@pytest.mark.parametrize("mode", list(BudgetMode))
@pytest.mark.parametrize("flag", list(REASONS))
async def test_the_runs_do_what_the_help_says(
    tmp_path: Path, budget_mode_help: str, flag: str, mode: BudgetMode
) -> None:
    stops = flag in every_mode_limits(budget_mode_help) or mode is BudgetMode.STRICT
    reason = await run_under(tmp_path, flag, mode)
    assert reason is (REASONS[flag] if stops else FinishReason.ANSWERED)
