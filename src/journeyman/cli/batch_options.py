"""The options of `journeyman batch` alone (typer `Annotated` types); those it shares with
`run` are in `options`. `eval` takes them too: its signature is built from `batch`'s."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

TasksArg = Annotated[
    Path,
    typer.Argument(
        help='A JSONL file, one task a line: {"id", "task", "workspace"} plus optional '
        '"base_commit" (workspace is then a git repository), "verify", "setup", '
        '"limits" ({max_iterations, max_budget_usd, max_total_tokens, max_duration_s}) and '
        '"image" (a container image its commands and check run in; without a container engine '
        "such a task is not run). Or an eval suite's folder.",
        show_default=False,
    ),
]
BatchOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Folder for results.jsonl, report.md, report.html, preds.json and each task's "
        "workspace (default: <TASKS name>.batch in the current folder). Running again on "
        "the same folder resumes the batch.",
    ),
]
ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="local (default): worker processes on this machine; ray: Ray tasks on the "
        "cluster of --ray-address (needs Ray: install the ray extra of journeyman).",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        help="Address (host:port) of the Ray cluster for --executor ray. Without it: the "
        "cluster in RAY_ADDRESS, else a private Ray instance started on this machine for "
        "the batch and stopped when it ends. See docs/distributed.md."
    ),
]
CpusPerTaskOpt = Annotated[
    float | None,
    typer.Option(
        "--cpus-per-task",
        help="With --executor ray: the CPUs each task asks the cluster for (more than 0; "
        "default 1; e.g. 2 for tasks whose tests run in parallel, 0.5 to pack two on a CPU). "
        "Refused with the local executor.",
        show_default=False,
    ),
]
MaxParallelOpt = Annotated[
    int, typer.Option(min=1, help="Tasks running at the same time (default 4).")
]
GlobalBudgetUsdOpt = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        help="Cap on the whole batch's spending in USD. Each task's allocation is reserved "
        "before it starts; when what is left cannot cover one, no new task starts, running "
        "ones finish within theirs, and the batch ends 'budget exhausted' (exit 1).",
    ),
]
GlobalBudgetTokensOpt = Annotated[
    int | None,
    typer.Option(min=1, help="Cap on the whole batch's tokens (input + output)."),
]
PerTaskBudgetUsdOpt = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        help="Each task's allocation in USD (all its attempts together), granted whole or "
        "not at all. Without it, under a global cap, the first task runs alone allowed what is "
        "left, and later ones start when what is left covers what finished tasks needed.",
    ),
]
PerTaskBudgetTokensOpt = Annotated[
    int | None, typer.Option(min=1, help="Each task's allocation in tokens.")
]
LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Share the global budget with other batches and evals: redis://host:port/N "
        "(a ledger in Redis; add #NAME for another ledger than 'default' on that server), or "
        "a NAME for a ledger in a Ray actor of the cluster (--executor ray). Every batch "
        "naming it draws on one cap, which must be the same global budget: a batch giving "
        "another cap is refused (exit 2), naming both. Needs --global-budget-usd or "
        "--global-budget-tokens. A named ledger keeps what was spent through it (Redis: until "
        "its key is deleted; Ray: until the cluster stops). See docs/distributed.md.",
        show_default=False,
    ),
]
ResumeBatchOpt = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue the batch in --out (an error if there is none): finished tasks are "
        "kept, interrupted ones continue from their last saved step. Re-running the same "
        "command does the same.",
    ),
]
RetryFailedOpt = Annotated[
    bool,
    typer.Option(
        "--retry-failed",
        help="Give tasks that failed (the agent did not succeed) a fresh attempt in a fresh "
        "copy. Infrastructure errors are always retried; agent failures only with this.",
    ),
]


class KeepChoice(StrEnum):
    """Which tasks' workspace copies stay once they end (`batch.workspaces.KEEP_CHOICES`)."""

    ALL = "all"
    FAILED = "failed"
    NONE = "none"


KeepOpt = Annotated[
    KeepChoice,
    typer.Option(
        "--keep",
        help="Which tasks' workspace copies stay in --out/workspaces once they end: failed "
        "(default: every task that did not succeed, and an eval's unresolved ones), all, or "
        "none. A task that ended in an infrastructure error keeps its copy whatever this says "
        "(running the batch again resumes it there). results.jsonl and the report name the "
        "kept ones.",
        show_default=False,
    ),
]
MaxRetriesOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="Retries of a task whose attempt ended with an infrastructure error (provider "
        "unavailable, worker died), from its last saved step (default 2).",
    ),
]
HideOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--hide",
        help="A file or folder of this machine the tasks' commands must not see (repeat for "
        "more): under bubblewrap it looks empty or unreadable, docker never mounts it, local "
        "cannot hide it. Always hidden besides: --out (except the task's own workspace), the "
        "tasks file or suite, graded tasks' hidden tests, the session store, your config.",
        show_default=False,
    ),
]
RpmOpt = Annotated[
    int | None,
    typer.Option(
        "--rpm",
        min=1,
        help="Model calls per minute, shared by every task of the batch on the same provider "
        "key (provider, base URL, API key; on Ray, by every batch on the cluster). A 429 "
        "pauses those calls for its Retry-After whether or not this is set. Config: "
        "requests_per_minute.",
        show_default=False,
    ),
]
TpmOpt = Annotated[
    int | None,
    typer.Option(
        "--tpm",
        min=1,
        help="Tokens per minute (prompt and output), shared as --rpm is; a call counts its "
        "prompt estimate and output limit until its reply reports usage. Config: "
        "tokens_per_minute.",
        show_default=False,
    ),
]
