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
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from journeyman.cli.exits import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, fail
from journeyman.core.display import printable, printable_json

SUITE_FILE = "suite.jsonl"
COMPARE = "compare"

SuiteArg = Annotated[
    str,
    typer.Argument(
        help="`micro` (the bundled micro-suite), a SWE-bench JSONL file, a folder of exercise "
        "folders, or `compare` followed by two --out folders.",
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
    a folder of exercise folders (instructions, a stub and tests: the tests are the grader).

    Hidden tests are never in the agent's workspace while it works. A task is resolved when
    every FAIL_TO_PASS test passes and every PASS_TO_PASS test still passes (for exercises:
    every test passes). eval.md, report.md and report.html give the resolved rate with a 95 %
    (Wilson) interval and the dollars and tokens spent per resolved task; tasks the budget left
    unstarted are counted apart ("N not run"), outside the rate. A plain batch tasks file is a
    suite only when every task has a `grading` object.

    `journeyman eval compare RUN_A RUN_B` compares two eval runs (their --out folders): both
    rates, the tasks B resolved and A did not (wins) and the reverse (losses), and the cost
    difference.

    Exit status as for `journeyman batch`: 0 only when every task ran to success (a task can
    succeed without being resolved: see eval.md), 1 otherwise, 2 bad input (unknown suite,
    malformed or hostile suite file, bad options), 130 interrupted. `compare` exits 0, or 2
    when a folder is not an eval run.
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
    from journeyman.batch.evaluation import EvalInputError, write_eval_report
    from journeyman.batch.suites import SuiteError, load_suite
    from journeyman.cli.batch_cmd import batch
    from journeyman.cli.options import OutputFormat

    out: Path = options.pop("out", None) or Path(f"{_suite_name(suite)}.eval")
    if out.exists() and not out.is_dir():
        fail(EXIT_CONFIG, f"--out {out} is a file; give a folder")
    test_cmds = _read_test_cmds(options.pop("test_cmds", None))
    if test_cmds is not None:
        _check_test_cmds_apply(suite)
    try:
        # Exercise folders are split into the agent's copy and the hidden tests inside --out.
        tasks = load_suite(suite, staging=out.resolve() / "exercises", test_cmds=test_cmds)
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
    code = EXIT_FAILED
    try:
        batch(tasks=suite_file, out=out, **options)
    except typer.Exit as ended:
        code = ended.exit_code
    if code not in (EXIT_OK, EXIT_FAILED):
        raise typer.Exit(code)
    try:
        summary = write_eval_report(out, suite, options.get("model"))
    except (EvalInputError, OSError) as error:
        fail(EXIT_FAILED, f"the batch ran but its eval report could not be written: {error}")
    output_format = options.get("output_format", OutputFormat.TEXT)
    if output_format is OutputFormat.TEXT:
        typer.echo(printable(f"eval: {summary.line()}"))
        typer.echo(f"eval report: {out / 'eval.md'}")
        if (out / "preds.json").is_file():
            typer.echo(f"SWE-bench predictions: {out / 'preds.json'}")
    else:
        line = {"type": "eval_finished", "suite": suite, "out": str(out), **summary.__dict__}
        sys.stdout.write(printable_json(json.dumps(line)) + "\n")
    raise typer.Exit(code)


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
    ]
    params += [p for name, p in batch_params.items() if name not in ("tasks", "out")]
    return inspect.Signature(params)


eval_command.__signature__ = _signature()  # type: ignore[attr-defined]
