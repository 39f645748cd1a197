"""`journeyman replay SESSION`: play a stored session's model replies back with the tools
running for real, and report each step whose tool results differ from the recorded ones."""

from __future__ import annotations

import asyncio
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from journeyman.cli.exits import EXIT_CANCELLED, EXIT_CONFIG, EXIT_FAILED, EXIT_OK, fail
from journeyman.cli.options import SessionDirOpt
from journeyman.core.errors import ConfigurationError
from journeyman.loop.replay import ReplayScript
from journeyman.session.store import HISTORY_START, SessionRecord, SessionStore, short_id
from journeyman.tools.choices import EditToolChoice


class ReplayFormat(StrEnum):
    """How `replay` reports: lines of text, or one JSON object."""

    TEXT = "text"
    JSON = "json"


def replay(
    session: Annotated[
        str, typer.Argument(help="The session to replay (its id, or its beginning or end).")
    ],
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="Replay in this folder, as it is, instead of a fresh copy of the session's "
            "workspace as it was at its start (needed for an imported session, which has no "
            "file history). The replay changes its files.",
        ),
    ] = None,
    keep_going: Annotated[
        bool,
        typer.Option(
            "--keep-going", help="Go on after a differing step and report every one of them."
        ),
    ] = False,
    output_format: Annotated[
        ReplayFormat, typer.Option("--output-format", "-o", help="text or json.")
    ] = ReplayFormat.TEXT,
    session_dir: SessionDirOpt = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Approve every call the replay makes that would need asking (commands still "
            "run in the sandbox, and deny rules still refuse): for replaying a recording in CI.",
        ),
    ] = False,
) -> None:
    """Re-execute SESSION's model replies in order, without calling a model, and check that
    every tool gives the result it gave then.

    The workspace is a fresh copy of the session's folder rolled back to the session's start
    (made beside it, named ...-replay-ID-N, and kept for you to look at), or --workspace DIR.
    The tools run for real, in the sandbox and under the permissions the session's settings
    say (an imported session's settings reduced by the trust rules, as for resume and fork);
    a call that needed your approval then is refused now unless the session ran with --yes
    (or you pass --yes to the replay).

    Results are compared with timings, temporary paths and the workspace's path masked. Each
    differing step is reported with its number, its tool and a short diff; the replay stops at
    the first one unless --keep-going.

    The replay is stored as a session of its own, a fork of SESSION at step 0 (its parent is
    SESSION, its settings say replay_of), so what it did can be read with `sessions show` or
    `inspect` like any run and told apart from the original; a replay of an imported session
    stays marked as imported.

    Exit codes: 0 every step reproduced, 1 a step differed, 2 bad input (an unknown session,
    one with no steps, a workspace that is not a folder).
    """
    from journeyman.cli.sessions_cmd import open_store, resolve_session

    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
        script = _script(store, record, keep_going)
        target = _workspace(store, record, workspace, session_dir)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    except OSError as error:  # the copy could not be made (a read-only parent folder, a full disk)
        fail(EXIT_CONFIG, f"cannot make the replay's copy of the workspace: {error}")
    finally:
        store.close()
    script.workspaces.append(target)
    _run(record, script, target, session_dir, output_format, yes)


def _recorded_edit_tool(script: ReplayScript) -> EditToolChoice | None:
    """The edit tool the recorded replies call, so an imported session (whose settings are not
    trusted) is replayed with the tool set it was recorded with; None leaves the setting."""
    called = {call.name for reply in script.replies for call in reply.tool_calls}
    for choice in (EditToolChoice.EDIT_FILE, EditToolChoice.APPLY_PATCH):
        if choice.value in called:
            return choice
    return None


def _script(store: SessionStore, record: SessionRecord, keep_going: bool) -> ReplayScript:
    if int(store.checkpoint(record.id)[1].get(HISTORY_START, 0)):
        raise ConfigurationError(
            f"session {record.id} had its history compacted: the replies before the "
            "compaction are not all stored in order, so it cannot be replayed"
        )
    workspaces = [Path(record.workspace)]
    recorded = record.settings.get("recorded_workspace")  # an imported session's first folder
    if isinstance(recorded, str) and recorded:
        workspaces.append(Path(recorded))  # only masked in results, never used as a folder
    script = ReplayScript.from_history(
        store.messages(record.id), workspaces, keep_going=keep_going
    )
    if not script.replies:  # an imported session stores its messages as one step: count replies
        raise ConfigurationError(f"session {record.id} has no steps to replay")
    return script


def _workspace(
    store: SessionStore, record: SessionRecord, given: Path | None, session_dir: Path | None
) -> Path:
    """DIR when given (checked as an imported session's folder is), else a fresh copy of the
    session's workspace rolled back to step 0."""
    from journeyman.cli.sessions_cmd import session_folder, workspace_problem
    from journeyman.session.fork import prepare_fork

    if given is not None:
        if not given.is_dir():
            raise ConfigurationError(f"workspace {given} is not a folder")
        problem = workspace_problem(given, session_folder(session_dir))
        if problem:
            raise ConfigurationError(problem)
        return given.resolve()
    if record.settings.get("imported_from"):
        raise ConfigurationError(
            f"session {record.id} was imported and has no file history, so its starting "
            "files are unknown here; name the folder to replay in with --workspace DIR"
        )
    source = Path(record.workspace)
    into = source
    for attempt in range(1, 1000):
        into = source.with_name(f"{source.name}-replay-{short_id(record.id)}-{attempt}")
        if not into.exists():
            break
    return prepare_fork(store, record.id, 0, into=into).workspace


def _run(
    record: SessionRecord,
    script: ReplayScript,
    target: Path,
    session_dir: Path | None,
    output_format: ReplayFormat,
    assume_yes: bool,
) -> NoReturn:
    from journeyman.cli.run_cmd import say
    from journeyman.cli.sessions_cmd import session_folder
    from journeyman.loop.launch import LaunchRequest, Surface, launch, settle

    request = LaunchRequest(
        target,
        flags={"edit_tool": _recorded_edit_tool(script)},
        session_dir=session_folder(session_dir),
        record=record,
        assume_yes=True if assume_yes else None,
    )
    text = output_format is ReplayFormat.TEXT
    try:
        settled = settle(request)
        for item in settled.ignored:
            typer.echo(f"journeyman: warning: {item.message}", err=True)
        provider = script.provider(
            str(record.settings.get("provider") or "replay"),
            str(record.settings.get("model") or "replay"),
        )
        surface = Surface(notice=say, start_servers=False)
        agent = launch(settled, surface, provider=provider)
    except ConfigurationError as error:
        fail(EXIT_CONFIG, error.message)
    if text:
        typer.echo(f"replaying {record.id} ({len(script.replies)} steps) in {target}")
    try:
        # a fork at step 0 that replays the rest: never listed as a subagent of the original
        run = agent.run(record.task, parent_session_id=record.id, forked_at_step=0)
        result = asyncio.run(run)
    except ConfigurationError as error:  # e.g. another run holds the workspace
        fail(EXIT_CONFIG, error.message)
    except KeyboardInterrupt:
        fail(EXIT_CANCELLED, "replay cancelled")
    finally:
        agent.close()
    replay_store = SessionStore(session_folder(session_dir))
    try:
        history = replay_store.messages(result.session_id)
        replay_store.update_settings(result.session_id, _replay_marks(record))
    finally:
        replay_store.close()
    script.finish(history, len(script.replies) - provider.remaining)
    _report(record, script, result.session_id, target, output_format)
    raise typer.Exit(EXIT_FAILED if script.differences else EXIT_OK)


def _replay_marks(record: SessionRecord) -> dict[str, object]:
    """What the replay's own settings say of it: which session it replays, and (for an
    imported one) where that came from, so the replay is held to the same trust rules later."""
    marks: dict[str, object] = {"replay_of": record.id}
    for key in ("imported_from", "recorded_workspace", "workspace_mapped"):
        if key in record.settings:
            marks[key] = record.settings[key]
    return marks


def _report(
    record: SessionRecord,
    script: ReplayScript,
    replay_id: str,
    target: Path,
    output_format: ReplayFormat,
) -> None:
    if output_format is ReplayFormat.JSON:
        data = {
            "session_id": record.id,
            "replay_session_id": replay_id,
            "workspace": str(target),
            "steps": len(script.replies),
            "reproduced": not script.differences,
            "stopped": script.stopped,
            "differences": [d.to_dict() for d in script.differences],
        }
        typer.echo(json.dumps(data, indent=2))
        return
    for difference in script.differences:
        typer.echo(f"step {difference.step} ({difference.tool}) differs:")
        typer.echo(difference.diff.rstrip("\n"))
    if not script.differences:
        typer.echo(f"all {len(script.replies)} steps reproduced (replay session {replay_id})")
    elif script.stopped:
        typer.echo(
            f"stopped at step {script.differences[0].step}, the first that differed "
            f"(replay session {replay_id}; --keep-going to go on)"
        )
    else:
        steps = sorted({d.step for d in script.differences})
        typer.echo(
            f"{len(steps)} of {len(script.replies)} steps differed (replay session {replay_id})"
        )
