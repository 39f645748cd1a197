"""`preds.json` in SWE-bench's format, for the official harness or sb-cli.

A JSON list of `{"instance_id", "model_name_or_path", "model_patch"}` objects, one per
instance. Both `swebench.harness.run_evaluation --predictions_path` and `sb-cli submit` read a
`.json` file holding such a list (they also accept an object keyed by instance id; the list is
the form both document). `model_patch` is the agent's diff against the instance's
`base_commit`, taken before the hidden test patch is applied; an instance that never ran or
left no diff gets an empty patch, which the harness counts as unresolved.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

PREDS_FILE = "preds.json"
DEFAULT_MODEL_NAME = "journeyman"


class ResultRow(Protocol):
    """What a batch result row offers (`journeyman.batch.results.TaskResult`)."""

    id: str
    grade: dict[str, Any] | None


def predictions(rows: Iterable[ResultRow], model: str | None) -> list[dict[str, str]] | None:
    """One prediction per row, or None when no row came from a SWE-bench instance."""
    rows = list(rows)
    if not any(_patch_of(row.grade) is not None for row in rows):
        return None
    name = model or DEFAULT_MODEL_NAME
    return [
        {
            "instance_id": row.id,
            "model_name_or_path": name,
            "model_patch": _patch_of(row.grade) or "",
        }
        for row in rows
    ]


def write_preds(out: Path, rows: Iterable[ResultRow], model: str | None) -> Path | None:
    """Write `out/preds.json` (atomically); None, and nothing written, for non-SWE-bench runs."""
    preds = predictions(rows, model)
    if preds is None:
        return None
    path = out / PREDS_FILE
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(preds, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, path)
    return path


def _patch_of(grade: Mapping[str, Any] | None) -> str | None:
    if not grade:
        return None
    patch = grade.get("model_patch")
    return patch if isinstance(patch, str) else None
