"""`preds.json` in SWE-bench's format, for the official harness or sb-cli.

A JSON list of `{"instance_id", "model_name_or_path", "model_patch"}` objects, one per
instance. Both `swebench.harness.run_evaluation --predictions_path` and `sb-cli submit` read a
`.json` file holding such a list (they also accept an object keyed by instance id; the list is
the form both document). `model_patch` is the agent's diff against the instance's
`base_commit` as it was graded: the hidden test patch not in it, and its changes to test
infrastructure (a `conftest.py`, pytest's settings...) left out (`batch.tampering`); an instance
that never ran or left no diff gets an empty patch, which the harness counts as unresolved.

Beside it, `preds.tampering.json` lists what was left out, per instance: an object keyed by
instance id, each a list of `{"path", "why"}` (empty for an instance with nothing left out).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

PREDS_FILE = "preds.json"
TAMPERING_FILE = "preds.tampering.json"
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


def tampering(rows: Iterable[ResultRow]) -> dict[str, list[dict[str, str]]]:
    """Each instance's changes to test infrastructure left out of its patch."""
    found: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        flags = row.grade.get("tampering") if row.grade else None
        found[row.id] = [
            {"path": str(flag.get("path", "")), "why": str(flag.get("why", ""))}
            for flag in (flags if isinstance(flags, list) else [])
            if isinstance(flag, dict)
        ]
    return found


def write_preds(out: Path, rows: Iterable[ResultRow], model: str | None) -> Path | None:
    """Write `out/preds.json` and `out/preds.tampering.json` (atomically); None, and nothing
    written, for non-SWE-bench runs."""
    rows = list(rows)
    preds = predictions(rows, model)
    if preds is None:
        return None
    _write_json(out / TAMPERING_FILE, tampering(rows))
    path = out / PREDS_FILE
    _write_json(path, preds)
    return path


def _write_json(path: Path, data: object) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, path)


def _patch_of(grade: Mapping[str, Any] | None) -> str | None:
    if not grade:
        return None
    patch = grade.get("model_patch")
    return patch if isinstance(patch, str) else None
