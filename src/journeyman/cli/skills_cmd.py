"""`journeyman skills`: the skills a run in the workspace would offer the model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from journeyman.cli.exits import EXIT_CONFIG, fail
from journeyman.cli.options import WorkspaceOpt
from journeyman.context.skills import (
    SkillsLoader,
    SkillSource,
    render_skills_section,
)
from journeyman.core.display import printable, printable_json
from journeyman.loop.config_file import user_skills_folder
from journeyman.providers.pricing import estimate_tokens

SOURCE_LABELS = {SkillSource.USER: "yours", SkillSource.REPOSITORY: "repository"}
"""How the listing says where a skill came from."""


def skills(
    workspace: WorkspaceOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the skills and warnings as one JSON object.")
    ] = False,
) -> None:
    """List the skills a run in the workspace offers the model: the name, where it was found,
    whether it is yours or the repository's, and its description.

    A skill is a folder holding a SKILL.md (front matter with a name and a description, then
    instructions). Yours live in the skills folder beside your config.toml; a repository's in
    .journeyman/skills/, .claude/skills/ or .agents/skills/. Only names and descriptions go into
    the system prompt; the model reads a skill's instructions with the skill tool. When two
    skills share a name, yours wins over the repository's. Skipped skills are listed as warnings,
    with the reason."""
    root = (workspace or Path(".")).resolve()
    if not root.is_dir():
        fail(EXIT_CONFIG, f"workspace {root} is not a directory")
    loader = SkillsLoader(root, user_skills_folder())
    if as_json:
        sys.stdout.write(printable_json(json.dumps(_as_json(loader))) + "\n")
        return
    found = loader.skills
    for skill in found:
        typer.echo(f"{skill.name}  ({SOURCE_LABELS[skill.source]}: {skill.display})")
        typer.echo(f"    {skill.description}")
    for warning in loader.warnings:
        sys.stderr.write(f"journeyman: warning: {printable(warning)}\n")
    if found:
        tokens = estimate_tokens(render_skills_section(found))
        typer.echo(f"{len(found)} skill(s), about {tokens:,} tokens in the system prompt")
    else:
        places = ", ".join(place for place, _ in loader.searched())
        typer.echo(f"no skills found (looked in {places})")


def _as_json(loader: SkillsLoader) -> dict[str, Any]:
    found = loader.skills
    return {
        "skills": [
            {
                "name": skill.name,
                "description": skill.description,
                "source": skill.source.value,
                "folder": skill.display,
                "path": str(skill.folder),
                "size": skill.size,
            }
            for skill in found
        ],
        "searched": [
            {"folder": place, "source": source.value} for place, source in loader.searched()
        ],
        "warnings": loader.warnings,
        "prompt_tokens": estimate_tokens(render_skills_section(found)) if found else 0,
    }
