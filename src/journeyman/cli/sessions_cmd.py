"""`journeyman sessions list|show|export|delete|import`, and session lookup for other commands."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from journeyman.core.display import printable
from journeyman.core.errors import ConfigurationError
from journeyman.core.text import clip
from journeyman.loop.config_file import session_root, user_config_file
from journeyman.policy.settings import trusted_from_data
from journeyman.session.store import SessionRecord, SessionStore, SessionSummary, new_session_id
from journeyman.session.trajectory import import_file
from journeyman.tools.snapshot import forget_snapshots

if TYPE_CHECKING:
    from rich.table import Table

sessions_app = typer.Typer(
    help="List, inspect, export, import and delete sessions.", no_args_is_help=True
)

SessionDirOpt = Annotated[
    Path | None,
    typer.Option(
        help="Session root (default: JOURNEYMAN_SESSION_DIR, else session_dir in your user "
        "config, else the per-user data dir)."
    ),
]


SESSION_ARG_HELP = "Session id, or its beginning or its end (the suffix after the last dash)."


def _fail(message: str, code: int = 2) -> NoReturn:
    sys.stderr.write(f"journeyman: {message}\n")
    raise typer.Exit(code)


def session_root_problem(root: Path) -> str | None:
    """Why `root` cannot hold sessions (it is a file, or a file is in its way), or None."""
    for folder in (root, *root.parents):
        if folder.exists():
            if folder.is_dir():
                return None
            where = "" if folder == root else f" ({folder} is a file)"
            return (
                f"session folder {root} cannot be used{where}; pass --session-dir a folder "
                "(it is created if missing)"
            )
    return None


def session_folder(session_dir: Path | None) -> Path:
    """The session folder of a command given `--session-dir` (or not): the one `run` uses."""
    try:
        return session_root(session_dir)
    except ConfigurationError as error:
        _fail(error.message)


def usable_session_folder(session_dir: Path | None) -> Path:
    """`session_folder`, after checking that it can hold sessions (exits 2 when not)."""
    root = session_folder(session_dir)
    problem = session_root_problem(root)
    if problem:
        _fail(problem)
    return root


def open_store(session_dir: Path | None) -> SessionStore:
    """The session store of a command (see `session_folder`), or exit 2 saying why not."""
    root = session_folder(session_dir)
    problem = session_root_problem(root)
    if problem:
        _fail(problem)
    try:
        return SessionStore(root, check_integrity=True)
    except ConfigurationError as error:
        _fail(error.message)
    except OSError as error:
        _fail(f"cannot open the sessions in {root}: {error.strerror or error}")


IMPORT_MAPPED = "workspace_mapped"
"""Set in the settings of a session imported by this version: its workspace is the folder the
user named (or was in) when importing, never the one the file recorded."""


def workspace_problem(where: Path, store_root: Path) -> str | None:
    """Why `where` may not be the workspace of an imported session (the user's home, `/`, a
    folder holding either, the session store or the user's config), or None."""
    try:
        resolved = where.resolve(strict=True)
    except (OSError, RuntimeError):
        return f"workspace {where} is not a folder"
    if not resolved.is_dir():
        return f"workspace {where} is not a folder"
    home = Path.home().resolve()
    config = user_config_file().parent.resolve()
    reason = None
    if resolved == Path(resolved.anchor):
        reason = "it is the root folder"
    elif resolved == home:
        reason = "it is your home folder"
    elif home.is_relative_to(resolved):
        reason = f"it holds your home folder ({home})"
    elif store_root.resolve().is_relative_to(resolved):
        reason = f"it holds the session store ({store_root})"
    elif config.is_relative_to(resolved):
        reason = f"it holds your journeyman config ({config})"
    if reason is None:
        return None
    return (
        f"refusing {printable(str(where))} as the workspace of an imported session: {reason}. "
        "Name the project's folder with --workspace DIR (or run the command from it)"
    )


def imported_workspace(given: Path | None, session_dir: Path | None) -> Path:
    """Where an imported session works: `given`, else the current folder; exits 2 when that
    folder is one `workspace_problem` refuses."""
    where = given if given is not None else Path.cwd()
    problem = workspace_problem(where, session_folder(session_dir))
    if problem:
        _fail(problem)
    return where.resolve()


def workspace_of_import(
    record: SessionRecord, given: Path | None, session_dir: Path | None
) -> Path | None:
    """For resume and fork: `given` for a session of the user's own; for an imported one,
    `given` or the folder it was mapped to at import, checked as `imported_workspace`. One
    imported by an earlier version took its workspace from the file: it needs `given`."""
    if not record.settings.get("imported_from"):
        return given
    if given is None:
        if not record.settings.get(IMPORT_MAPPED):
            _fail(
                f"session {record.id} was imported by an earlier version, which took its "
                f"workspace from the file ({printable(record.workspace)}); say where it works "
                "with --workspace DIR"
            )
        given = Path(record.workspace)
    return imported_workspace(given, session_dir)


def resolve_session(
    store: SessionStore, session: str | None, last: bool, workspace: Path | None
) -> SessionRecord:
    """The session named by its id, or the beginning or end of it (`SessionStore.resolve_id`),
    or with `last` the newest one of the workspace."""
    try:
        if session:
            return store.load_session(store.resolve_id(session))
        if last:
            where = str((workspace or Path(".")).resolve())
            record = store.latest_session(where)
            if record is None:
                _fail(f"no session for workspace {where} in {store.path}")
            return record
    except ConfigurationError as error:
        _fail(error.message)
    _fail("name a session id, or pass --last for the latest session of this workspace")


@sessions_app.command("list")
def list_sessions(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", "-w", help="Only sessions of this workspace.")
    ] = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Every stored session, oldest first, with its whole id (type its end to name it)."""
    from rich.console import Console

    store = open_store(session_dir)
    try:
        rows = store.list_sessions(str(workspace.resolve()) if workspace else None)
    finally:
        store.close()
    console = Console()
    table = session_table(rows, console.width)
    if table is not None:
        console.print(table)
        return
    for row in rows:  # narrower than an id: the ids alone, which the terminal wraps
        typer.echo(printable(row.record.id))


_LISTED = ("created", "steps", "status", "model", "workspace", "task")
"""The columns of `sessions list` after the id, in the order they are shown."""
_KEPT_FIRST = ("status", "task", "created", "steps", "model", "workspace")
"""The same columns in the order they are kept when the terminal is too narrow for all of
them: the first that does not fit is left out, and every one after it."""
_LEAST_WIDTH = {"status": 10, "steps": 5, "created": 16, "task": 10, "model": 8, "workspace": 12}
_ROOM = {"task": 50, "workspace": 40, "model": 24, "status": 19}
"""How wide these columns may grow, in the order the room left over goes to them."""
_CELL_EDGES = 3
"""What a column adds to a table's width besides its text: a border and two spaces."""


def session_table(rows: Sequence[SessionSummary], width: int) -> Table | None:
    """The table of `sessions list` in `width` columns: every id whole (never cut), with as
    many other columns as still fit; None when not even the ids fit."""
    from rich.table import Table

    id_width = max((len(printable(row.record.id)) for row in rows), default=2)
    used = 1 + id_width + _CELL_EDGES
    if used > width:
        return None
    widths: dict[str, int] = {}
    for name in _KEPT_FIRST:
        if used + _LEAST_WIDTH[name] + _CELL_EDGES > width:
            break
        widths[name] = _LEAST_WIDTH[name]
        used += _LEAST_WIDTH[name] + _CELL_EDGES
    spare = width - used
    for name, widest in _ROOM.items():
        if name in widths:
            grown = min(spare, widest - widths[name])
            widths[name] += grown
            spare -= grown
    shown = [name for name in _LISTED if name in widths]
    table = Table()
    table.add_column("id", no_wrap=True, min_width=id_width)
    for name in shown:
        table.add_column(name, overflow="fold", max_width=widths[name])
    for row in rows:
        cells = _session_cells(row)
        table.add_row(_safe(row.record.id), *(cells[name] for name in shown))
    return table


def _session_cells(row: SessionSummary) -> dict[str, str]:
    rec = row.record  # an imported session's fields are data: escaped, every one
    return {
        "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(rec.created_at)),
        "steps": str(row.steps),
        "status": _safe(row.finish_reason or "unfinished"),
        "model": _safe(str(rec.settings.get("model") or rec.settings.get("model_name") or "?")),
        "workspace": _safe(rec.workspace),
        "task": _safe(clip(rec.task, 50)),
    }


@sessions_app.command("show")
def show(
    session: Annotated[str, typer.Argument(help=SESSION_ARG_HELP)],
    session_dir: SessionDirOpt = None,
) -> None:
    """A session's settings, outcome, messages and file changes."""
    from rich.console import Console

    from journeyman.swarm.tree import session_tree  # the swarm layer loads only when used

    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
        summary = store.summary(record.id)
        messages = store.messages(record.id)
        changes = store.file_changes(record.id)
        tree = session_tree(store, record.id)
    finally:
        store.close()
    out = Console(highlight=False)
    out.print(
        f"[bold]session {record.id}[/]"
        + (
            f"  (forked from {record.parent_id} at step {record.forked_at_step})"
            if record.parent_id and record.forked_at_step is not None
            else f"  (task of batch {record.parent_id})"
            if record.parent_id and record.settings.get("batch")
            else f"  (subagent of {record.parent_id})"
            if record.parent_id
            else ""
        )
    )
    out.print(f"workspace {_safe(record.workspace)}")
    settings = record.settings
    if settings.get("model"):
        provider = f"{settings['provider']}:" if settings.get("provider") else ""
        out.print(f"model {_safe(provider + str(settings['model']))}")
    elif settings.get("model_name"):
        out.print(f"model {_safe(str(settings['model_name']))} (recorded by the imported run)")
    if settings.get("imported_from"):
        facts = [f"imported from {settings['imported_from']}"]
        facts += [
            f"{label} {settings[key]}"
            for key, label in (("exit_status", "exit status"), ("cost_usd", "cost $"))
            if settings.get(key) not in (None, "")
        ]
        out.print(_safe(", ".join(facts)).replace("$ ", "$") + "; no file history")
    out.print(
        f"steps {summary.steps}, status {summary.finish_reason or 'unfinished'}"
        + (f" — {_safe(summary.error)}" if summary.error else "")
    )
    out.print(f"task: {_safe(record.task)}")
    for message in messages:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        text = message.content.strip().replace("\n", " ")
        shown = clip(text, 160)
        out.print(
            f"[dim]{message.role.value:>9}[/] {_safe(shown)}"
            + (f" [bold]→ {_safe(calls)}[/]" if calls else "")
        )
    for change in changes:
        state = "undone" if change.undone else "pending"
        out.print(
            f"[dim]change[/] step {change.step} {change.kind} {_safe(change.path)} "
            f"({change.tool}, {state})"
        )
    if tree.children:
        children = "tasks" if settings.get("kind") == "batch" else "subagents"
        out.print(f"[bold]{children}[/] (tree cost {_cost(tree.tree_cost_usd)})")
        for depth, node in tree.walk():
            rec, status = node.summary.record, node.summary.finish_reason or "unfinished"
            task = clip(rec.task, 60)
            out.print(
                f"{'  ' * depth}{'└ ' if depth else ''}{rec.id}  {status}  "
                f"{node.tokens:,} tokens  {_cost(node.cost_usd)}  {_safe(task)}"
            )


def _cost(usd: float | None) -> str:
    return "cost unknown" if usd is None else f"${usd:.4f}"


def _safe(text: str) -> str:
    """Stored text (model replies, tool output, imported data) as it may reach the terminal."""
    from rich.markup import escape

    return escape(printable(text))


@sessions_app.command("export")
def export(
    session: Annotated[
        str | None,
        typer.Argument(help=SESSION_ARG_HELP + " Left out with --batch.", show_default=False),
    ] = None,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="jsonl (journeyman's own, which `sessions import` reads back), atif (an ATIF "
            "v1.8 trajectory, subagents embedded) or mini-traj (a mini-swe-agent .traj.json).",
        ),
    ] = "jsonl",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="File (default stdout); a folder gets <session id>.jsonl (.json for atif, "
            ".traj.json for mini-traj) inside it. With --batch, the folder for the files "
            "(default OUT/trajectories).",
        ),
    ] = None,
    batch: Annotated[
        Path | None,
        typer.Option(
            "--batch",
            help="A batch or eval output folder (their --out): one file per task, named after "
            "the task's id. Give the --session-dir the batch ran with.",
        ),
    ] = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Write a session in a format other tools read, or every task of a batch or eval.

    jsonl is a header, then every message and event; atif and mini-traj hold the conversation
    with each turn's tokens and cost. Secrets are redacted in every format."""
    from journeyman.cli.session_export import FORMATS

    if format not in FORMATS:
        _fail(f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")
    if batch is not None:
        if session:
            _fail("name a session or pass --batch OUT, not both")
        _export_batch(batch, format, output, session_dir)
        return
    if not session:
        _fail("name the session to export, or pass --batch OUT for every task of a batch")
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
        text, said = _rendered(store, record.id, format)
    finally:
        store.close()
    if output is None:
        sys.stdout.write(text)
        return
    from journeyman.cli.session_export import output_path

    path = output_path(output, record.id, format)
    _write_file(path, text)
    sys.stderr.write(f"wrote {said} to {printable(str(path))}\n")


def _rendered(store: SessionStore, session_id: str, format: str) -> tuple[str, str]:
    from journeyman.cli.session_export import rendered

    try:
        return rendered(store, session_id, format)
    except ConfigurationError as error:  # a damaged store, said as such
        _fail(error.message)


def _write_file(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        _fail(f"cannot write {printable(str(path))}: {error.strerror or error}")


def _export_batch(out: Path, format: str, output: Path | None, session_dir: Path | None) -> None:
    """One file per task of the batch or eval in `out`, from the session of its last attempt."""
    from journeyman.batch.results import RESULTS_FILE, read_results
    from journeyman.cli.session_export import FORMATS, TRAJECTORIES_DIR, task_file_name

    if not (out / RESULTS_FILE).is_file():
        _fail(f"{printable(str(out))} holds no {RESULTS_FILE}; pass the --out of a batch or eval")
    try:
        results = read_results(out)
    except ConfigurationError as error:
        _fail(error.message)
    folder = output if output is not None else out / TRAJECTORIES_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        _fail(f"cannot create {printable(str(folder))}: {error.strerror or error}")
    store = open_store(session_dir)
    written, not_run, missing = 0, [], []
    taken: set[str] = set()
    try:
        for task_id, result in results.items():
            if not result.session_id:
                not_run.append(task_id)
                continue
            try:
                store.load_session(result.session_id)
            except ConfigurationError:
                missing.append(task_id)
                continue
            text, _ = _rendered(store, result.session_id, format)
            name = task_file_name(task_id, taken) + FORMATS[format].suffix
            _write_file(folder / name, text)
            written += 1
    finally:
        store.close()
    _say_batch_export(written, folder, not_run, missing, store.path)
    if missing and not written:
        raise typer.Exit(2)


def _say_batch_export(
    written: int, folder: Path, not_run: list[str], missing: list[str], store_path: Path
) -> None:
    sys.stderr.write(
        f"wrote {written} task file{'s' if written != 1 else ''} to {printable(str(folder))}\n"
    )
    if not_run:
        sys.stderr.write(
            f"journeyman: {len(not_run)} task(s) never started, so nothing to export: "
            f"{printable(clip(', '.join(not_run), 200))}\n"
        )
    if missing:
        sys.stderr.write(
            f"journeyman: the sessions of {len(missing)} task(s) are not in {store_path} "
            f"({printable(clip(', '.join(missing), 200))}); pass the --session-dir the batch "
            "ran with\n"
        )


@sessions_app.command("import")
def import_(
    file: Annotated[
        Path,
        typer.Argument(
            help="A journeyman JSONL export or a mini-swe-agent trajectory (.traj.json)."
        ),
    ],
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="The folder the session works in when resumed or forked (default: the "
            "current folder). The folder the file names is never used; your home folder, / "
            "and folders holding the session store or your config are refused.",
        ),
    ] = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Store a session from a file so it can be inspected and forked.

    The file is data: of its settings only the descriptive ones are kept (model, loop mode,
    exit status, cost), and it does not choose where the session works (you do, with
    --workspace, else the current folder). Hooks, permissions, approvals, the sandbox, MCP and
    the provider's endpoint come from you when the session is forked or resumed. An import has
    no file history, so forks start from the workspace's files as they are now."""
    if not file.is_file():
        _fail(f"{file} is not a file")
    where = imported_workspace(workspace, session_dir)
    store = open_store(session_dir)
    try:
        imported = import_file(
            store,
            file,
            new_session_id(),
            trust=trusted_from_data,
            workspace=where,
            mark={IMPORT_MAPPED: True},
        )
    except ConfigurationError as error:
        _fail(error.message)
    finally:
        store.close()
    for message in imported.ignored:
        sys.stderr.write(f"journeyman: warning: {printable(message)}\n")
    for note in imported.notes:
        sys.stderr.write(f"journeyman: note: {printable(note)}\n")
    typer.echo(imported.session_id)


@sessions_app.command("delete")
def delete(
    session: Annotated[str, typer.Argument(help=SESSION_ARG_HELP)],
    session_dir: SessionDirOpt = None,
) -> None:
    """Remove a session and everything stored for it (files on disk are not touched)."""
    store = open_store(session_dir)
    try:
        record = resolve_session(store, session, False, None)
        store.delete_session(record.id)
        last = not store.list_sessions(record.workspace)
        forget_snapshots(Path(record.workspace), record.id, last_session=last)
    finally:
        store.close()
    typer.echo(f"deleted {record.id}")
