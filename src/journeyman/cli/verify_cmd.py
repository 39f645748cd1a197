"""`journeyman verify [SESSION]`: run a session's check again on the tree as it is now, and say
whether its receipt still holds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from journeyman.cli.exits import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, fail
from journeyman.cli.options import (
    AllowTestEditsOpt,
    OutputFormat,
    OutputOpt,
    SandboxOpt,
    SessionDirOpt,
    WorkspaceOpt,
)
from journeyman.cli.sessions_cmd import open_store, resolve_session
from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError
from journeyman.core.result import CheckEvidence
from journeyman.loop.check_runner import (
    CHECK_CALL_PREFIX,
    CheckRun,
    CheckRunner,
    assess,
    explain,
    output_tail,
)
from journeyman.loop.fixed_check import FixedCheck, stored_check
from journeyman.session.store import SessionRecord, SessionStore


def verify(
    session: Annotated[
        str | None,
        typer.Argument(
            help="Session id, or its end or beginning (default: the latest of the workspace)."
        ),
    ] = None,
    workspace: WorkspaceOpt = None,
    session_dir: SessionDirOpt = None,
    sandbox: SandboxOpt = None,
    allow_test_edits: AllowTestEditsOpt = False,
    output_format: OutputOpt = OutputFormat.TEXT,
) -> None:
    """Run a session's check again on the workspace as it is now.

    The check is the one fixed before the session's first turn, run the way a run runs it
    (the sandbox of your settings or --sandbox, the allow-listed environment, its time limit),
    against the test files and settings as they were when the session started. It says
    whether the check passes now and whether the tree is the one the session's receipt was
    for. Exit status: 0 the check passes now (ran at least one test, tests unchanged), 1 it
    does not, 2 no such session or no check to run.
    """
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, session is None, workspace)
        fixed, receipt = _stored(store, record)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    finally:
        store.close()
    root = (workspace or Path(record.workspace)).resolve()
    if not root.is_dir():
        fail(EXIT_CONFIG, f"the workspace {root} of session {record.id} is not a folder")
    run, sandbox_text = _run(fixed, root, sandbox, allow_test_edits)
    same_tree = receipt is not None and receipt.final_fingerprint == run.workspace_fingerprint
    _report(record, fixed, run, receipt, sandbox_text, same_tree, output_format)
    raise typer.Exit(EXIT_OK if run.passed else EXIT_FAILED)


def _stored(store: SessionStore, record: SessionRecord) -> tuple[FixedCheck, CheckEvidence | None]:
    fixed = stored_check(store, record.id)
    if fixed is None or fixed.command is None:
        raise ConfigurationError(
            f"session {record.id} has no check to run again (it ran with --no-verify, in the "
            "ask mode, with no test command found, or before checks were recorded)"
        )
    receipt: CheckEvidence | None = None
    for event in store.events(record.id):
        if isinstance(event, dict) and event.get("type") == "run_finished":
            data = (event.get("result") or {}).get("verification")
            if isinstance(data, dict):
                receipt = _evidence(data)
    return fixed, receipt


def _evidence(data: dict[str, Any]) -> CheckEvidence | None:
    try:
        return CheckEvidence(
            command=str(data["command"]),
            passed=bool(data["passed"]),
            exit_code=data.get("exit_code"),
            after_last_change=bool(data.get("after_last_change")),
            duration_s=float(data.get("duration_s") or 0.0),
            output_tail=str(data.get("output_tail") or ""),
            final_fingerprint=data.get("final_fingerprint"),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _run(
    fixed: FixedCheck, root: Path, sandbox_kind: Any, allow_test_edits: bool
) -> tuple[CheckRun, str]:
    from journeyman.context.test_infra import take_manifest
    from journeyman.loop.agent import sandbox_for
    from journeyman.loop.launch import LaunchRequest, settle
    from journeyman.tools.registry import ToolRegistry
    from journeyman.tools.shell import RunCommandTool

    assert fixed.command is not None
    try:
        config = settle(LaunchRequest(root, flags={"sandbox": sandbox_kind})).config
        box = sandbox_for(config, root)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    runner = CheckRunner(root, ToolRegistry([RunCommandTool(sandbox=box)]))

    async def go() -> CheckRun:
        try:
            call_id = f"{CHECK_CALL_PREFIX}again"
            return await runner.check(fixed.command or "", config.verify_timeout_s, call_id)
        finally:
            await box.close()

    run = asyncio.run(go())
    if not (run.cannot_run or run.timed_out):
        run = assess(run, fixed, take_manifest(root), allow_test_edits=allow_test_edits)
    return run, runner.sandbox


def _report(
    record: SessionRecord,
    fixed: FixedCheck,
    run: CheckRun,
    receipt: CheckEvidence | None,
    sandbox: str,
    same_tree: bool,
    output_format: OutputFormat,
) -> None:
    if output_format is not OutputFormat.TEXT:
        document = {
            "session_id": record.id,
            "command": run.command,
            "passed": run.passed,
            "problem": run.problem,
            "exit_code": run.exit_code,
            "tests": None if run.tally is None else run.tally.to_dict(),
            "sandbox": sandbox,
            "same_tree_as_receipt": same_tree,
            "receipt_passed": None if receipt is None else receipt.passed,
            "test_changes": [change.to_dict() for change in run.test_changes],
            "fingerprint": run.workspace_fingerprint,
            "output_tail": output_tail(run.output),
        }
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    tests = run.tally.describe() if run.tally is not None else "no test summary"
    typer.echo(printable(f"check: {run.command} (from {fixed.source})"))
    typer.echo(printable(f"  now: exit {run.exit_code}, {tests}, {run.duration_s:.1f} s"))
    typer.echo(printable(f"  sandbox: {sandbox}"))
    if receipt is None:
        typer.echo("  the session ended without a receipt (no check ran at its end)")
    elif same_tree:
        typer.echo("  the tree is the one the session's receipt was for")
    else:
        typer.echo("  the tree changed since the session's receipt")
    if run.passed:
        holds = receipt is not None and receipt.passed and same_tree
        typer.echo("the receipt still holds" if holds else "the check passes on this tree")
    else:
        typer.echo(printable(f"not passing: {explain(run, fixed.tests_before)}"))
