"""`journeyman eval`: `journeyman batch` on a suite, plus grading and the eval report.

A thin wrapper. The suite is loaded (`journeyman.batch.suites.load_suite`) and written to
`--out/suite.jsonl` as ordinary batch tasks carrying their grading specs; `journeyman batch`
runs them with every one of its options (the signature below is the batch command's, with the
suite in place of the tasks file), each task graded by `run_job` once its agent stops; then
`eval.md` / `eval.json` are written from the batch's results. `journeyman eval compare A B`
compares two such runs.
"""

from __future__ import annotations

import inspect
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from journeyman.cli.exits import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, fail
from journeyman.core.display import printable, printable_json
from journeyman.core.errors import ConfigurationError

if TYPE_CHECKING:
    from journeyman.batch.evaluation import EvalSummary
    from journeyman.tools.sandbox import SandboxKind

SUITE_FILE = "suite.jsonl"
COMPARE = "compare"

SuiteArg = Annotated[
    str,
    typer.Argument(
        help="`micro` (the bundled micro-suite), a SWE-bench JSONL file, a folder of exercise "
        "folders, a Harbor task folder (or a folder of them), or `compare` followed by two "
        "--out folders.",
        show_default=False,
    ),
]
RunsArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="With `compare`: the --out folders of run A and run B.",
        metavar="[RUN_A RUN_B]",
        show_default=False,
    ),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Folder for results.jsonl, eval.md, eval.json, report.md, report.html, preds.json "
        "(SWE-bench suites) and each task's workspace (default: <suite name>.eval in the current "
        "folder). Running again on the same folder resumes the eval.",
    ),
]

AllowUnsandboxedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-unsandboxed",
        help="Run even though the agent's commands would run without a sandbox (--sandbox "
        "local, or auto where bubblewrap cannot start), where they can read the hidden tests "
        "and the other tasks' workspaces. eval.json, eval.md, report.md and the summary line "
        "then say the run was unsandboxed. Without it such an eval refuses to start.",
    ),
]
FailUnderOpt = Annotated[
    str | None,
    typer.Option(
        "--fail-under",
        help="Exit 1 unless the resolved rate (resolved of the tasks that ran) is at least "
        "RATE and every task ran: a fraction from 0 to 1 (0.8) or a percentage with % "
        "(80%). A task the agent failed counts as unresolved, not as a reason to exit 1.",
        metavar="RATE",
        show_default=False,
    ),
]

TestCmdsOpt = Annotated[
    Path | None,
    typer.Option(
        "--test-cmds",
        help="SWE-bench suites only (refused for others): a JSON file mapping each instance's "
        "`repo` to its test command, or to a map from `version` to command (a line's own "
        "test_cmd wins).",
    ),
]


def eval_command(suite: str, runs: list[str] | None = None, **options: Any) -> None:
    """Run the agent on every task of SUITE as `journeyman batch` does, grade each task with its
    hidden tests once the agent has stopped, and report the resolved rate.

    Suites: `micro` (twelve small Python bug fixes bundled with journeyman; its tests run with
    journeyman's own interpreter, which needs pytest); a SWE-bench JSONL file (instance_id,
    repo as a local git repository, base_commit, problem_statement, FAIL_TO_PASS, PASS_TO_PASS,
    optional test_patch and test_cmd), which also writes preds.json for the SWE-bench harness;
    a folder of exercise folders (instructions, a stub and tests: the tests are the grader); a
    Harbor task folder or a folder of them (instruction.md, task.toml, tests/test.sh writing the
    reward; a task whose environment needs a container engine is named at the start and not
    run).

    Hidden tests are never in the agent's workspace while it works. A task is resolved when
    every FAIL_TO_PASS test passes and every PASS_TO_PASS test still passes (for exercises:
    every test passes). eval.md, report.md and report.html give the resolved rate with a 95 %
    (Wilson) interval and the dollars and tokens spent per resolved task; tasks the budget left
    unstarted are counted apart ("N not run"), outside the rate. A plain batch tasks file is a
    suite only when every task has a `grading` object.

    `journeyman eval compare RUN_A RUN_B` compares two eval runs (their --out folders): both
    rates, the tasks B resolved and A did not (wins) and the reverse (losses), and the cost
    difference.

    The agent's commands never see the hidden tests, the suite, --out nor the other tasks'
    workspaces: bubblewrap hides them, docker never mounts them. Local hides nothing, so an
    eval whose sandbox is local (asked for, or auto where bubblewrap cannot start) refuses to
    start unless --allow-unsandboxed is given, and its reports then say so.

    Killed at any point, even while grading, the same command (or --resume) goes on: tasks
    whose agent finished but that were never graded are graded without running the agent
    again.

    Exit status as for `journeyman batch`: 0 only when every task ran to success (a task can
    succeed without being resolved: see eval.md), 1 otherwise, 2 bad input (unknown suite,
    malformed or hostile suite file, bad options, a local sandbox without
    --allow-unsandboxed), 130 interrupted. With --fail-under RATE: 0 when the resolved rate
    is at least RATE and every task ran, else 1. `compare` exits 0, or 2 when a folder is not
    an eval run.
    """
    if suite == COMPARE:
        _compare(runs or [])
        return
    if runs:
        fail(
            EXIT_CONFIG,
            f"unexpected argument(s) after the suite: {' '.join(runs)}; "
            "give one suite (or `compare RUN_A RUN_B`)",
        )
    _run_eval(suite, options)


def _compare(runs: list[str]) -> None:
    from journeyman.batch.compare import compare_runs, render_comparison
    from journeyman.batch.evaluation import EvalInputError

    if len(runs) != 2:
        fail(EXIT_CONFIG, f"compare takes two run folders (RUN_A RUN_B), got {len(runs)}")
    try:
        comparison = compare_runs(Path(runs[0]), Path(runs[1]))
    except EvalInputError as error:
        fail(EXIT_CONFIG, str(error))
    typer.echo(printable(render_comparison(comparison, runs[0], runs[1])))
    raise typer.Exit(EXIT_OK)


def _run_eval(suite: str, options: dict[str, Any]) -> None:
    from journeyman.batch.evaluation import (
        EvalInputError,
        mark_unsandboxed,
        write_eval_report,
    )
    from journeyman.batch.suites import SuiteError, load_suite, suite_source
    from journeyman.batch.suites.micro import micro_root
    from journeyman.cli.batch_cmd import batch

    out: Path = options.pop("out", None) or Path(f"{_suite_name(suite)}.eval")
    if out.exists() and not out.is_dir():
        fail(EXIT_CONFIG, f"--out {out} is a file; give a folder")
    fail_under = _fail_under(options.pop("fail_under", None))
    why_unsandboxed = _sandbox_or_refusal(options, out)
    test_cmds = _read_test_cmds(options.pop("test_cmds", None))
    if test_cmds is not None:
        _check_test_cmds_apply(suite)
    left_out: list[str] = []

    def say_left_out(text: str) -> None:
        left_out.append(text)
        typer.echo(printable(f"eval: {text}"), err=True)

    try:
        # Exercise and Harbor folders are split into the agent's copy and the hidden tests
        # inside --out; a Harbor task that needs a container engine is said here, before any run.
        tasks = load_suite(
            suite,
            staging=out.resolve() / _staging_name(suite),
            test_cmds=test_cmds,
            note=say_left_out,
        )
    except SuiteError as error:
        fail(EXIT_CONFIG, error.message)
    from journeyman.batch.runner import TasksChangedError, check_same_tasks
    from journeyman.batch.workspaces import OutFolderError, check_out_folder

    try:
        check_out_folder(out, tasks)
        check_same_tasks(out, tasks, suite)
    except (TasksChangedError, OutFolderError) as error:
        fail(EXIT_CONFIG, error.message)
    try:
        out.mkdir(parents=True, exist_ok=True)
        suite_file = out / SUITE_FILE
        suite_file.write_text(
            "".join(task.model_dump_json() + "\n" for task in tasks), encoding="utf-8"
        )
    except OSError as error:
        fail(EXIT_CONFIG, f"cannot write the suite's tasks to {out}: {error.strerror or error}")
    if why_unsandboxed is not None:
        mark_unsandboxed(out, why_unsandboxed)
    # the bundled micro-suite too, whatever the suite: a copy of it is graded by the same tests
    options["hide"] = [*(options.get("hide") or []), suite_source(suite), micro_root()]
    code = EXIT_FAILED
    try:
        batch(tasks=suite_file, out=out, **options)
    except typer.Exit as ended:
        code = ended.exit_code
    if code not in (EXIT_OK, EXIT_FAILED):
        raise typer.Exit(code)
    try:
        summary = write_eval_report(out, suite, options.get("model"), left_out)
    except (EvalInputError, OSError) as error:
        fail(EXIT_FAILED, f"the batch ran but its eval report could not be written: {error}")
    _print_summary(summary, suite, out, left_out, options.get("output_format"))
    if fail_under is not None:
        code = _gate(summary, fail_under)
    raise typer.Exit(code)


def _sandbox_or_refusal(options: dict[str, Any], out: Path) -> str | None:
    """Settle every task's sandbox (into `options`); exit 2 when it would be local and
    --allow-unsandboxed was not given. Returns why it is unsandboxed (None: it is not)."""
    allow_unsandboxed = bool(options.pop("allow_unsandboxed", False))
    options["sandbox"], why_unsandboxed = _settled_sandbox(options.get("sandbox"), out)
    if why_unsandboxed is not None and not allow_unsandboxed:
        fail(
            EXIT_CONFIG,
            f"eval refused: {why_unsandboxed}, so the agent's commands could read the hidden "
            "tests and the other tasks' workspaces; use --sandbox bubblewrap (or docker), or "
            "add --allow-unsandboxed to run anyway (the reports then say it was unsandboxed)",
        )
    return why_unsandboxed


def _print_summary(
    summary: EvalSummary, suite: str, out: Path, left_out: list[str], output_format: Any
) -> None:
    from journeyman.batch.evaluation import rounded
    from journeyman.cli.options import OutputFormat

    if output_format in (None, OutputFormat.TEXT):
        typer.echo(printable(f"eval: {summary.line()}"))
        if left_out:
            typer.echo(f"eval: {len(left_out)} task(s) of the suite not run (named at the start)")
        typer.echo(f"eval report: {out / 'eval.md'}")
        if (out / "preds.json").is_file():
            typer.echo(f"SWE-bench predictions: {out / 'preds.json'}")
    else:
        line = {"type": "eval_finished", "suite": suite, "out": str(out), **rounded(summary)}
        sys.stdout.write(printable_json(json.dumps(line)) + "\n")


def _fail_under(text: str | None) -> float | None:
    """--fail-under as a fraction 0-1 (given as one, or as a percentage ending in %)."""
    if text is None:
        return None
    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw.removesuffix("%").strip())
    except ValueError:
        value = math.nan
    if percent:
        value /= 100
    if not 0 <= value <= 1:  # nan too
        fail(
            EXIT_CONFIG,
            f"--fail-under {text!r}: give a fraction from 0 to 1 (0.8) or a percentage "
            "from 0% to 100% (80%)",
        )
    return value


def _gate(summary: EvalSummary, threshold: float) -> int:
    """Exit 0 when the rate reaches `threshold` and every task ran, else 1 (said on stderr)."""
    wanted = f"--fail-under {threshold * 100:g} %"
    if summary.rate + 1e-12 < threshold:
        typer.echo(
            printable(f"eval: resolved rate {summary.rate_text()} is below {wanted}"), err=True
        )
        return EXIT_FAILED
    if summary.not_run:
        ran = f"eval: {summary.not_run} of {summary.tasks} tasks did not run"
        typer.echo(f"{ran} ({wanted} needs every task to run)", err=True)
        return EXIT_FAILED
    return EXIT_OK


def _settled_sandbox(asked: SandboxKind | None, out: Path) -> tuple[SandboxKind, str | None]:
    """The sandbox every task gets, decided once before any runs (the flag, else the user's
    settings, else auto; auto becomes the kind it resolves to here, so that no task falls
    back on its own), and why it is unsandboxed when it is local."""
    from journeyman.loop.launch import LaunchRequest, settle
    from journeyman.tools.sandbox import SandboxKind, open_sandbox

    source = "--sandbox"
    try:
        with tempfile.TemporaryDirectory(prefix="journeyman-probe-") as probe:
            if asked is None:  # the user's file and JOURNEYMAN_SANDBOX (no project file there)
                asked = settle(LaunchRequest(Path(probe))).config.sandbox
                source = "the sandbox of your settings"
            box = open_sandbox(asked, Path(probe), hidden=(out.resolve(),))
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    if box.kind is not SandboxKind.LOCAL:
        return box.kind, None
    if asked is SandboxKind.LOCAL:
        return box.kind, f"{source} is local, which hides nothing"
    note = getattr(box, "note", "") or "bubblewrap unusable"
    return box.kind, f"the sandbox is auto and fell back to local ({note})"


def _read_test_cmds(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        fail(EXIT_CONFIG, f"--test-cmds {path}: cannot read it as JSON ({error})")
    valid = isinstance(data, dict) and all(
        isinstance(value, str)
        or (isinstance(value, dict) and all(isinstance(v, str) for v in value.values()))
        for value in data.values()
    )
    if not valid:
        fail(
            EXIT_CONFIG,
            f"--test-cmds {path}: expected an object of repo -> command, "
            "or repo -> {version: command}",
        )
    commands: dict[str, Any] = data
    return commands


SUITE_KINDS = {
    "micro": "the bundled micro-suite",
    "micro-folder": "a folder of micro-suite tasks",
    "exercises": "a folder of exercises (their own tests grade them)",
    "harbor": "a folder of Harbor tasks (their tests/test.sh writes the reward)",
    "tasks": "a tasks file (each task's grading.test_cmd is its command)",
}


def _check_test_cmds_apply(suite: str) -> None:
    """--test-cmds only means something to a SWE-bench suite: refuse it elsewhere rather than
    let it be silently ignored."""
    from journeyman.batch.suites import SuiteError, suite_kind

    try:
        kind = suite_kind(suite)
    except SuiteError:
        return  # loading the suite says what is wrong with it
    if kind != "swebench":
        fail(
            EXIT_CONFIG,
            f"--test-cmds applies to SWE-bench suites only; {suite} is "
            f"{SUITE_KINDS.get(kind, 'not one')}, whose test commands come with its tasks. "
            "Drop --test-cmds",
        )


def _staging_name(suite: str) -> str:
    from journeyman.batch.suites import SuiteError, suite_kind

    try:
        return "harbor" if suite_kind(suite) == "harbor" else "exercises"
    except SuiteError:
        return "exercises"  # loading the suite says what is wrong with it


def _suite_name(suite: str) -> str:
    path = Path(suite)
    return path.stem or path.resolve().name or "suite"


def _signature() -> inspect.Signature:
    """The batch command's parameters, the suite in place of its tasks file, our own --out."""
    from journeyman.cli.batch_cmd import batch

    batch_params = inspect.signature(batch, eval_str=True).parameters
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [
        inspect.Parameter("suite", keyword, annotation=SuiteArg),
        inspect.Parameter("runs", keyword, annotation=RunsArg, default=None),
        inspect.Parameter("out", keyword, annotation=OutOpt, default=None),
        inspect.Parameter("test_cmds", keyword, annotation=TestCmdsOpt, default=None),
        inspect.Parameter("fail_under", keyword, annotation=FailUnderOpt, default=None),
        inspect.Parameter(
            "allow_unsandboxed", keyword, annotation=AllowUnsandboxedOpt, default=False
        ),
    ]
    params += [p for name, p in batch_params.items() if name not in ("tasks", "out")]
    return inspect.Signature(params)


eval_command.__signature__ = _signature()  # type: ignore[attr-defined]
