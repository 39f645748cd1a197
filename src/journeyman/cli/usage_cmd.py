"""`journeyman usage`: tokens and cost from the usage log."""

from __future__ import annotations

from typing import Annotated

import typer

from journeyman.cli.exits import (
    EXIT_FAILED,
    fail,
)
from journeyman.cli.options import (
    SessionDirOpt,
)
from journeyman.cli.sessions_cmd import (
    SESSION_ARG_HELP,
    open_store,
    resolve_session,
    session_folder,
)
from journeyman.session.store import (
    DATABASE_FILE,
)


def usage(
    session: Annotated[
        str | None,
        typer.Option(help=f"Only this session (default: every session). {SESSION_ARG_HELP}"),
    ] = None,
    session_dir: SessionDirOpt = None,
) -> None:
    """Tokens and cost per provider and model, from the usage log."""
    from journeyman.cli.render import usage_table  # rich loads only when a table is printed

    root = session_folder(session_dir)
    path = root / DATABASE_FILE
    if not path.exists():
        fail(EXIT_FAILED, f"no usage recorded yet ({path} does not exist)")
    store = open_store(root)
    try:
        if session is not None:
            session = resolve_session(store, session, False, None).id
        rows = store.usage_summary(session)
    finally:
        store.close()
    if not rows:
        fail(EXIT_FAILED, f"no usage recorded for session {session}" if session else "no usage")
    usage_table(rows)
