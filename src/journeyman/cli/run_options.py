"""The options of `run` and `fork` alone (typer `Annotated` types); those the commands share
are in `options`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

TaskArg = Annotated[str, typer.Argument(help="What the agent should do, in plain words.")]
ContinueOpt = Annotated[
    str | None,
    typer.Option(
        "--continue",
        metavar="SESSION",
        help="Send TASK as a follow-up message to this session (id or unique prefix): the "
        "agent goes on with its history, budgets and undo journal and its stored settings.",
    ),
]

ForkSessionArg = Annotated[str, typer.Argument(help="Session id (or a unique prefix) to fork.")]
AtStepOpt = Annotated[int, typer.Option("--at-step", min=0, help="Keep the first K steps.")]
ForkTaskOpt = Annotated[
    str | None, typer.Option(help="A new instruction to continue with (default: go on).")
]
IntoOpt = Annotated[
    Path | None,
    typer.Option(help="Folder for the fork's copy of the workspace (default: a sibling)."),
]
InPlaceOpt = Annotated[
    bool,
    typer.Option(
        help="Roll the original workspace back instead of copying it; refused, naming the "
        "files, when one was edited after the agent's change (like undo)."
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(help="With --in-place: roll back files edited since the agent's change too."),
]
ForkWorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="For an imported session: the folder whose files the fork starts from "
        "(default: the one named when importing, else the current folder).",
    ),
]
