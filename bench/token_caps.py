"""Token caps under random runs: how far past its cap does a run's token count go?

Scope
    Counts, not time: how far past its token cap a run's own count goes, with a scripted
    model billing honest prompt counts; no SDK or wire format.

Runs the trials of `tests/support/cap_trials.py` (the real `Agent` on a scripted model that
bills honest prompt counts for what it was sent, in English, code, Chinese, emoji or a mix,
under strict budgets and hard grants, with and without compaction) and prints, per language
and overall, how many runs passed their cap and by how much. Run from the repository root:

    .venv/bin/python bench/token_caps.py [--trials 200] [--seed 0] [--json]

`--src PATH` measures the journeyman sources at PATH instead of this checkout's (the trials only
use the public `Agent`, `AgentConfig` and `ScriptedProvider`, so an older main works too).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="seed of the first trial")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--src", type=Path, default=REPO_ROOT / "src", help="journeyman sources")
    args = parser.parse_args()
    sys.path[:0] = [str(args.src.resolve()), str(REPO_ROOT)]
    from tests.support.cap_trials import run_trials, summarise

    logging.getLogger("journeyman").setLevel(logging.ERROR)  # skipped summaries are expected
    started = time.monotonic()
    results = run_trials(args.trials, args.seed)
    summary = summarise(results)
    if args.json:
        print(json.dumps(dataclasses.asdict(summary), indent=2))
        return
    print(f"{summary.trials} runs in {time.monotonic() - started:.0f} s, {summary.calls} calls")
    print(f"runs past their cap: {summary.over}")
    print(f"largest overshoot: {summary.worst_tokens:,} tokens, {summary.worst_share:.1%} of a cap")
    for language, (runs, over) in summary.by_language.items():
        print(f"  {language:8} {runs:4} runs, {over:3} past their cap")
    print(f"closing reports (calls without tools): {summary.closing_calls}")
    print("endings: " + ", ".join(f"{k} {v}" for k, v in summary.endings.most_common()))


if __name__ == "__main__":
    main()
