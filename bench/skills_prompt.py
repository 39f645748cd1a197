"""What installed skills cost every prompt: the system prompt and tool definitions of a run with
50 skills, next to the same run with none.

Scope
    Only the fixed part of a request is measured: the system prompt the agent builds
    (`prompts.system_prompt` with the rules and skills sections, as `Agent` passes them) and
    the tool definitions sent with it (the built-in tools, plus the skill tool when there is a
    skill). Nothing is sent to a model. The skills are real SKILL.md folders under
    `.claude/skills/` of a temporary workspace, read by the real `SkillsLoader`; each body is a
    few kilobytes of instructions, which must cost nothing until the model asks for them.

    Three sets of 50 descriptions: short (about 60 characters), typical (about 120 to 330,
    written like the descriptions of published skills: what the skill does, then when to use
    it) and the longest the format allows (1,024 characters each). The issue's target: fewer
    than 2,000 tokens for 50 skills.

How tokens are counted
    With the project's estimator (`providers.pricing.estimate_fixed_tokens`: characters / 4 over
    the system prompt and the tool specs), and with tiktoken's o200k_base when its BPE file is on
    this machine (found as bench/tokens.py finds it; never downloaded). "Uncut" is what the
    skill lines would cost if the section printed every description whole.

Run: `.venv/bin/python bench/skills_prompt.py [--skills 50] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tokens import make_counter

from journeyman.context.skills import SkillsLoader, render_skills_section
from journeyman.core.messages import ToolSpec
from journeyman.loop import prompts
from journeyman.providers.pricing import estimate_fixed_tokens, estimate_tokens
from journeyman.tools.base import tool_spec
from journeyman.tools.builtin import default_tools
from journeyman.tools.skill import SkillTool

WHAT = [
    "Extract text and tables from PDF files, fill in forms and merge documents",
    "Write release notes from the merged pull requests since the last tag",
    "Review a change for security problems: injection, secrets in code, unsafe deserialisation",
    "Profile a slow Python function with cProfile and suggest where the time goes",
    "Create and update Alembic database migrations for SQLAlchemy models",
    "Format and lint the code base with the project's configured tools",
    "Build a small command line tool with Typer, with tests and a help text",
    "Turn a CSV export into a cleaned pandas DataFrame with typed columns",
    "Bump the version, update the changelog and tag a release",
    "Write docstrings in the project's style for public functions that lack them",
]
WHEN = [
    "Use when the user mentions PDFs, forms or document extraction.",
    "Use when asked for a changelog entry, release notes or a summary of recent work.",
    "Use before merging code that handles user input, files or network data.",
    "Use when a test or a command is slow and the user asks why.",
    "Use when a model changes or the user asks for a migration. Check the generated script by "
    "reading it before running it, and never edit a migration that has already been applied.",
]


def descriptions(kind: str, count: int, rng: random.Random) -> list[str]:
    if kind == "short":
        return [f"{rng.choice(WHAT)[:50]}." for _ in range(count)]
    if kind == "longest":
        long = [(f"{rng.choice(WHAT)}. {rng.choice(WHEN)} " * 12) for _ in range(count)]
        return [text[:1024].strip() for text in long]
    return [f"{rng.choice(WHAT)}. {rng.choice(WHEN)}" for _ in range(count)]


def install(workspace: Path, texts: list[str]) -> None:
    body = "## Steps\n\n" + "\n".join(f"{n}. Do step {n} carefully." for n in range(1, 120))
    for number, text in enumerate(texts):
        folder = workspace / ".claude/skills" / f"skill-{number:03d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{number:03d}\ndescription: {json.dumps(text)}\n---\n{body}\n"
        )
        (folder / "scripts").mkdir()
        (folder / "scripts/run.py").write_text("print('hello')\n")


def fixed_part(workspace: Path, loader: SkillsLoader) -> tuple[str, list[ToolSpec]]:
    """The system prompt and tool specs a run in `workspace` with `loader`'s skills sends."""
    tools = default_tools(provider="anthropic")
    if loader.skills:
        tools.append(SkillTool(loader.skills))
    names = [tool.name for tool in tools]
    system = prompts.system_prompt(workspace, names, None, "", render_skills_section(loader))
    return system, [tool_spec(tool) for tool in tools]


def measure(kind: str, count: int, counter: Any) -> dict[str, Any]:
    rng = random.Random(f"{kind}-{count}")
    texts = descriptions(kind, count, rng)
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder) / "ws"
        workspace.mkdir()
        none_system, none_specs = fixed_part(workspace, SkillsLoader(workspace, None))
        install(workspace, texts)
        loader = SkillsLoader(workspace, None)
        assert len(loader.skills) == count, loader.warnings
        system, specs = fixed_part(workspace, loader)
        body_chars = sum(len(s.body) for s in loader.skills)

    def bpe(system: str, specs: list[ToolSpec]) -> int | None:
        if not counter.exact:
            return None
        texts = [system, *(json.dumps(s.parameters) + s.description for s in specs)]
        return int(counter.count(texts))

    uncut = sum(len(f"- skill-000: {text}\n") for text in texts)
    return {
        "descriptions": kind,
        "skills": count,
        "mean_description_chars": round(sum(map(len, texts)) / count),
        "estimated_tokens": estimate_fixed_tokens(system, specs)
        - estimate_fixed_tokens(none_system, none_specs),
        "bpe_tokens": _difference(bpe(system, specs), bpe(none_system, none_specs)),
        "uncut_line_tokens": estimate_tokens("x" * uncut),
        "bodies_not_sent_tokens": estimate_tokens("x" * body_chars),
    }


def _difference(with_skills: int | None, without: int | None) -> int | None:
    return None if with_skills is None or without is None else with_skills - without


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skills", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    counter, source = make_counter("auto")
    rows = [measure(kind, options.skills, counter) for kind in ("short", "typical", "longest")]
    if options.json:
        print(json.dumps({"tokenizer": counter.name, "rows": rows}, indent=2))
        return
    print(f"prompt cost of {options.skills} skills (tokenizer: {counter.name}; {source})")
    print(
        f"{'descriptions':<13}{'mean chars':>11}{'est. tokens':>13}{'BPE tokens':>12}"
        f"{'uncut lines':>13}{'bodies kept out':>17}"
    )
    for row in rows:
        print(
            f"{row['descriptions']:<13}{row['mean_description_chars']:>11}"
            f"{row['estimated_tokens']:>13,}{_shown(row['bpe_tokens']):>12}"
            f"{row['uncut_line_tokens']:>13,}{row['bodies_not_sent_tokens']:>17,}"
        )


def _shown(tokens: int | None) -> str:
    return "n/a" if tokens is None else f"{tokens:,}"


if __name__ == "__main__":
    main()
