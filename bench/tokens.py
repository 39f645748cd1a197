"""Input tokens over a long run: journeyman's react and phased modes next to mini-swe-agent.

Scope
    What a model provider receives over one long run: every request body journeyman's real
    request building sends (kernel, mode, compaction, the OpenAI adapter's prebuilt bodies and
    the official ``openai`` SDK) to a fake Chat Completions server on 127.0.0.1
    (``tests/fakes``), tokenised as sent; mini-swe-agent's requests as the same Chat
    Completions bodies. Summary calls (compaction, the phased mode's memory) count like any
    request. Not measured: output tokens, time, what a real provider's cache bills.

What runs
    One fixed, seeded trajectory of N steps (default 100) on a real repository: a copy of the
    ``rich`` package from the project venv, plus a small unittest file (one of its tests fails,
    so test runs print a real traceback). The steps read windows of real files, grep for real
    identifiers, list directories, now and then append a comment to a line (and run the tests
    right after), and run the tests; the last step finishes. Every step carries the same short
    "thought" text for both agents.

    * journeyman: the real ``Agent`` with ``OpenAIProvider`` pointed at ``FakeOpenAIServer``,
      whose answer to each request is the next scripted tool call (and a fixed summary to a
      summary request). Compaction runs with the settings given (defaults of
      ``CompactionSettings`` unless a flag overrides one).
    * mini-swe-agent: its default config (``mini.yaml``: bash tool calls, JSON observations).
      ``--mini real`` runs its own ``DefaultAgent`` + ``LocalEnvironment`` with a scripted
      tool-call model in ``bench/.venv-mini`` (created by ``overhead.py``'s helper when missing,
      pip from PyPI), on a second copy of the repository, and records the messages its model
      receives. ``--mini reconstruct`` builds the same linear history in this process: its
      system prompt, an instance prompt written here to about the length of the real one, then
      per step the assistant message (thought + ``bash`` call with the equivalent shell command:
      ``nl -ba | sed -n``, ``grep -rn``, ``ls``, ``sed -i``, ``python -m unittest``) and the
      observation rendered like its template (JSON with returncode and output; head and tail
      of 5,000 characters each past 10,000). ``auto`` (default) tries real, else reconstructs.
    * journeyman phased mode: the same agent, scripted steps and compaction settings with
      ``mode=phased``. Each scripted step is one PLAN; the mode adds its own requests' content
      (a context pack at each discovery, the check's failures) and runs its verification after
      every edit, with no model call. Its verification command runs the four tests of
      ``tests/test_render.py`` that pass (``PHASED_VERIFY``): the fifth fails on purpose, as
      the subject of the task, and a failing check would refuse the final ``finish``.

How tokens are counted
    A request body is cut into segments in the order a prompt cache sees them: the ``tools``
    array, then each message (system first), each as the JSON that was sent. Tokens come from
    ``tiktoken`` (o200k_base) when its BPE file is on this machine: tiktoken's cache, or the
    copy that ``litellm`` ships (mini-swe-agent depends on it, so ``bench/.venv-mini`` has it;
    ``TIKTOKEN_CACHE_DIR`` may name a folder holding it). tiktoken's own download is not
    attempted unless ``--tokenizer tiktoken``. Without the file, ``chars/4`` estimates are used
    and the output says so.

    prefix share of request i = (longest common prefix of the token sequences of requests i-1
    and i) / (tokens of request i-1): how much of the previous prompt a prompt cache can reuse.
    The table shows its mean and minimum over requests 2..N, how many requests fall under 90 %,
    and the cacheable share = sum of those common prefixes / sum of all request sizes.

Usage (from the repository root)
    .venv/bin/python bench/tokens.py                     # 100 steps, seed 0
    .venv/bin/python bench/tokens.py --steps 200 --stale-observation-tokens 6000

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
WORK_DIR = BENCH_DIR / ".work"
MINI_VENV = BENCH_DIR / ".venv-mini"
ENCODING = "o200k_base"
TARGET_RATIO = 0.30
TARGET_CACHEABLE = 0.95
TARGET_PREFIX = 0.90
"""Requests whose prefix share is under this are counted in the table's "< 90 %" column."""
FINISH_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
TEST_COMMAND = "python -m unittest -v tests.test_render"
PHASED_VERIFY = "python -m unittest -q tests.test_render -k wraps -k header -k markup -k wide"
"""The phased mode's check: the tests of TEST_FILE that pass (see the module docstring)."""
TASK = (
    "The table renderer in rich drops the last column when the console is narrow. Find where "
    "column widths are computed, explain the cause, and check it with the tests in "
    "tests/test_render.py."
)
SUMMARY_TEXT = (
    "Read rich/table.py, rich/console.py, rich/text.py and rich/segment.py; column widths come "
    "from Table._calculate_column_widths and are collapsed by ratio_reduce when the console is "
    "narrower than the table. Grepped for cell_len, Segment and __rich_console__ callers. "
    "Appended marker comments to a few return lines. tests/test_render.py: every test passes "
    "except test_cell_len_counts_a_trailing_space (expects 6, gets 5). Still open: confirm how "
    "min_width interacts with no_wrap columns."
)

TEST_FILE = '''\
"""Checks of rich's rendering, run by the benchmark's test steps."""

import io
import unittest

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text


def render(renderable, width=40):
    console = Console(width=width, file=io.StringIO(), color_system=None, record=True)
    console.print(renderable)
    return console.export_text()


class RenderTests(unittest.TestCase):
    def test_text_wraps_at_the_console_width(self):
        lines = render(Text("word " * 20), width=20).splitlines()
        self.assertTrue(all(len(line) <= 20 for line in lines))

    def test_table_keeps_its_header(self):
        table = Table("name", "size")
        table.add_row("a.py", "10")
        self.assertIn("name", render(table))

    def test_markup_is_stripped(self):
        self.assertEqual(render("[bold]hi[/bold]").strip(), "hi")

    def test_wide_characters_take_two_cells(self):
        self.assertEqual(cell_len("\\u4e2d\\u6587"), 4)

    def test_cell_len_counts_a_trailing_space(self):
        self.assertEqual(Text("hello").cell_len, 6)


if __name__ == "__main__":
    unittest.main()
'''

GREP_PATTERNS = (
    "def __rich_console__",
    "class .*Error",
    "cell_len",
    "Style.parse",
    "def render",
    "Segment.line",
    "no_wrap",
    "justify",
    "overflow",
    "lru_cache",
    "NamedTuple",
    "def __init__",
    "get_style",
    "ratio_reduce",
    "isinstance",
)

Segments = tuple[str, ...]
"""One request as the prompt cache sees it: tool schemas, system prompt, then each message."""


# --------------------------------------------------------------------------------------------
# The trajectory (stdlib only: the mini-swe-agent driver imports this module too)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One step, as a journeyman tool call and as the equivalent shell command."""

    kind: str
    thought: str
    tool: str
    arguments: dict[str, Any]
    shell: str


def rich_source() -> Path:
    """The installed ``rich`` package (a dependency of journeyman) without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("rich")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the rich package is not installed in this interpreter")
    return Path(next(iter(spec.submodule_search_locations)))


def prepare_repo(dest: Path, source: Path) -> Path:
    """A fresh copy of the package as ``dest/rich`` plus ``dest/tests/test_render.py``."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copytree(source, dest / "rich", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (dest / "tests").mkdir()
    (dest / "tests" / "__init__.py").write_text("")
    (dest / "tests" / "test_render.py").write_text(TEST_FILE)
    return dest


def make_trajectory(repo: Path, steps: int, seed: int) -> list[Action]:
    """`steps` actions on the pristine copy `repo`, then one that finishes (deterministic)."""
    rng = random.Random(seed)
    files = sorted(p.relative_to(repo).as_posix() for p in (repo / "rich").rglob("*.py"))
    lines = {f: (repo / f).read_text(encoding="utf-8").splitlines() for f in files}
    files = [f for f in files if len(lines[f]) >= 40]
    dirs = ["rich", "tests", "."]
    edited: set[tuple[str, int]] = set()
    actions: list[Action] = []
    kinds = ("read", "grep", "list", "test", "edit")
    weights = (45, 25, 5, 15, 10)
    while len(actions) < steps:
        if not actions:
            kind = "list"
        elif actions[-1].kind == "edit":
            kind = "test"  # check an edit right away
        else:
            kind = rng.choices(kinds, weights)[0]
        if kind == "read":
            path = rng.choice(files)
            limit = rng.choice((80, 120, 160, 200))
            offset = rng.randint(1, max(1, len(lines[path]) - limit // 2))
            last = offset + limit - 1
            actions.append(
                Action(
                    kind,
                    f"Let me read {path} around line {offset} to see how it handles this.",
                    "read_file",
                    {"path": path, "offset": offset, "limit": limit},
                    f"nl -ba {path} | sed -n '{offset},{last}p'",
                )
            )
        elif kind == "grep":
            pattern = rng.choice(GREP_PATTERNS)
            actions.append(
                Action(
                    kind,
                    f"Searching the package for `{pattern}` to find the code involved.",
                    "grep",
                    {"pattern": pattern, "path": "rich", "glob": "*.py", "max_results": 50},
                    f"grep -rn -E --include='*.py' '{pattern}' rich | head -n 50",
                )
            )
        elif kind == "list":
            where = rng.choice(dirs) if actions else "rich"
            actions.append(
                Action(
                    kind,
                    f"Listing {where} to see what is there.",
                    "list_files",
                    {"path": where},
                    f"ls -p {where}",
                )
            )
        elif kind == "test":
            actions.append(
                Action(
                    kind,
                    "Running the tests to check.",
                    "run_command",
                    {"command": TEST_COMMAND},
                    TEST_COMMAND,
                )
            )
        else:
            path, number, line = _editable_line(rng, files, lines, edited)
            note = f"  # reviewed at step {len(actions) + 1}"
            actions.append(
                Action(
                    kind,
                    f"Marking line {number} of {path} as reviewed.",
                    "edit_file",
                    {"path": path, "old_string": line, "new_string": line + note},
                    f"sed -i '{number}s/$/{note}/' {path}",
                )
            )
    actions.append(
        Action(
            "finish",
            "Done: the cause is explained above.",
            "finish",
            {"summary": "explained the narrow-table column drop"},
            FINISH_COMMAND,
        )
    )
    return actions


_RETURN_LINE = re.compile(r"^\s+return [\w.()\[\], ]+$")


def _editable_line(
    rng: random.Random,
    files: list[str],
    lines: dict[str, list[str]],
    edited: set[tuple[str, int]],
) -> tuple[str, int, str]:
    """A simple `return ...` line that occurs once in its file and was not edited before."""
    for _ in range(1000):
        path = rng.choice(files)
        text = lines[path]
        candidates = [
            i
            for i, line in enumerate(text, 1)
            if _RETURN_LINE.match(line) and text.count(line) == 1 and (path, i) not in edited
        ]
        if candidates:
            number = rng.choice(candidates)
            edited.add((path, number))
            return path, number, text[number - 1]
    raise RuntimeError("no editable line found")


# --------------------------------------------------------------------------------------------
# Token counting
# --------------------------------------------------------------------------------------------


class Counter:
    """Turns text into a token sequence; cached per segment (messages repeat across requests)."""

    name = "chars/4 estimate"
    exact = False

    def __init__(self) -> None:
        self._cache: dict[str, Sequence[Hashable]] = {}

    def encode(self, text: str) -> Sequence[Hashable]:
        tokens = self._cache.get(text)
        if tokens is None:
            tokens = self._encode(text)
            self._cache[text] = tokens
        return tokens

    def _encode(self, text: str) -> Sequence[Hashable]:
        # one pseudo-token per 4 characters; prefixes compare like the text does
        return [text[i : i + 4] for i in range(0, len(text), 4)]

    def count(self, segments: Segments) -> int:
        return sum(len(self.encode(s)) for s in segments)


class TiktokenCounter(Counter):
    exact = True

    def __init__(self, encoding: Any) -> None:
        super().__init__()
        self._encoding = encoding
        self.name = f"tiktoken {encoding.name}"

    def _encode(self, text: str) -> Sequence[Hashable]:
        tokens: list[int] = self._encoding.encode(text, disallowed_special=())
        return tokens


def _bpe_dirs() -> list[Path]:
    """Folders that may hold tiktoken's cached BPE files (named by the SHA-1 of their URL)."""
    dirs = [os.environ.get("TIKTOKEN_CACHE_DIR"), os.environ.get("DATA_GYM_CACHE_DIR")]
    found = [Path(d) for d in dirs if d]
    found.append(Path(tempfile.gettempdir()) / "data-gym-cache")
    tail = Path("litellm") / "litellm_core_utils" / "tokenizers"
    for site in sys.path:
        found.append(Path(site) / tail)
    found.extend(sorted(MINI_VENV.glob(f"lib/python*/site-packages/{tail}")))
    return found


def make_counter(choice: str) -> tuple[Counter, str]:
    """The counter to use and a line saying where its tokens come from."""
    if choice == "chars":
        return Counter(), "chars/4 estimate (asked for with --tokenizer chars)"
    try:
        import tiktoken
        import tiktoken.load
    except ImportError:
        return Counter(), "chars/4 estimate: tiktoken is not installed (pip install -e '.[dev]')"
    import hashlib

    url = f"https://openaipublic.blob.core.windows.net/encodings/{ENCODING}.tiktoken"
    name = hashlib.sha1(url.encode()).hexdigest()
    for folder in _bpe_dirs():
        if (folder / name).is_file():
            os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
            try:
                return TiktokenCounter(tiktoken.get_encoding(ENCODING)), f"BPE file from {folder}"
            except Exception as error:  # a corrupt copy: try the next folder
                print(f"  ignoring {folder}: {error}", file=sys.stderr)
    if choice == "tiktoken":
        try:  # tiktoken downloads the file itself (needs its host to be reachable)
            return TiktokenCounter(tiktoken.get_encoding(ENCODING)), "BPE file downloaded"
        except Exception as error:
            return Counter(), f"chars/4 estimate: tiktoken could not fetch its BPE file ({error})"
    return Counter(), (
        f"chars/4 estimate: no {ENCODING} BPE file on this machine (none in tiktoken's cache, "
        "no litellm copy; --tokenizer tiktoken tries to download it)"
    )


# --------------------------------------------------------------------------------------------
# Statistics over a sequence of requests
# --------------------------------------------------------------------------------------------


@dataclass
class AgentStats:
    name: str
    requests: int = 0
    total_tokens: int = 0
    peak_tokens: int = 0
    mean_prefix: float | None = None
    min_prefix: float | None = None
    below_target: int = 0
    cacheable_share: float | None = None
    compactions: int = 0
    summary_calls: int = 0
    new_tokens: int = 0
    """Tokens of the segments no earlier request sent: what no prompt cache can have read."""
    sizes: list[int] = field(default_factory=list)
    prefix_shares: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _common_prefix(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def shared_prefix_tokens(previous: Segments, current: Segments, counter: Counter) -> int:
    """Tokens at the start of `current` identical to the start of `previous`.

    Segments are encoded one by one, so identical leading segments are compared as strings
    and only the first differing pair token by token.
    """
    shared = 0
    for old, new in zip(previous, current, strict=False):
        if old == new:
            shared += len(counter.encode(old))
            continue
        return shared + _common_prefix(counter.encode(old), counter.encode(new))
    return shared


def measure(name: str, requests: Sequence[Segments], counter: Counter) -> AgentStats:
    stats = AgentStats(name, requests=len(requests))
    stats.sizes = [counter.count(r) for r in requests]
    stats.total_tokens = sum(stats.sizes)
    stats.peak_tokens = max(stats.sizes, default=0)
    cached = 0
    for i in range(1, len(requests)):
        common = shared_prefix_tokens(requests[i - 1], requests[i], counter)
        cached += common
        stats.prefix_shares.append(common / stats.sizes[i - 1] if stats.sizes[i - 1] else 1.0)
    if stats.prefix_shares:
        stats.mean_prefix = sum(stats.prefix_shares) / len(stats.prefix_shares)
        stats.min_prefix = min(stats.prefix_shares)
        stats.below_target = sum(s < TARGET_PREFIX for s in stats.prefix_shares)
    stats.cacheable_share = cached / stats.total_tokens if stats.total_tokens else None
    sent: set[str] = set()
    for request in requests:
        stats.new_tokens += sum(len(counter.encode(s)) for s in request if s not in sent)
        sent.update(request)
    return stats


def wire_json(value: Any) -> str:
    """`value` encoded the way the OpenAI SDK (and journeyman's prebuilt bodies) send JSON."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def wire_segments(body: dict[str, Any]) -> Segments:
    """A Chat Completions request body as the prompt cache sees it: the `tools` array, then
    each message of `messages` (the system prompt is the first), each as the JSON sent."""
    tools = body.get("tools")
    head = (wire_json(tools),) if tools else ()
    return head + tuple(wire_json(message) for message in body.get("messages", ()))


def wire_tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """A function tool in the Chat Completions format."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


# --------------------------------------------------------------------------------------------
# journeyman (project venv)
# --------------------------------------------------------------------------------------------


@dataclass
class JourneymanRun:
    requests: list[Segments]
    compactions: int
    summary_calls: int
    tool_errors: list[str]


SUMMARY_MARKERS = ("Below is the older part of your work",)
"""How a summary request's last message starts (`context.compaction.SUMMARY_REQUEST`)."""


def is_summary_request(body: dict[str, Any]) -> bool:
    """Whether a request asks for a summary (of old turns or of the phased mode's memory)."""
    messages = body.get("messages") or ()
    last = messages[-1] if messages else {}
    content = last.get("content") if last.get("role") == "user" else None
    if isinstance(content, list):  # content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return isinstance(content, str) and content.startswith(SUMMARY_MARKERS)


def as_offered(action: Action, offered: set[str]) -> tuple[str, dict[str, Any]]:
    """The action's tool call, with an edit sent as an `apply_patch` call when that is the
    edit tool offered (journeyman's default for OpenAI-compatible providers)."""
    if action.tool != "edit_file" or "edit_file" in offered or "apply_patch" not in offered:
        return action.tool, dict(action.arguments)
    args = action.arguments
    patch = (
        f"*** Begin Patch\n*** Update File: {args['path']}\n@@\n-{args['old_string']}\n"
        f"+{args['new_string']}\n*** End Patch"
    )
    return "apply_patch", {"patch": patch}


def run_journeyman(
    actions: Sequence[Action],
    repo: Path,
    workdir: Path,
    counter: Counter,
    compaction: dict[str, Any],
    context_window: int,
    *,
    mode: str = "react",
    verify_command: str | None = None,
) -> JourneymanRun:
    """Play the trajectory through the real OpenAI adapter and SDK against the fake server;
    the request bodies the server receives are what is measured."""
    sys.path.insert(0, str(REPO_ROOT))
    from tests.fakes.openai_server import FakeOpenAIServer
    from tests.fakes.script import FakeToolCall, RecordedRequest, Reply, reply

    from journeyman import Agent, AgentConfig, FinishReason
    from journeyman.context.compaction import CompactionSettings
    from journeyman.context.rules import RulesLoader
    from journeyman.core import events as ev
    from journeyman.loop.config import ModeName
    from journeyman.providers.openai import OpenAIProvider

    position = 0
    summary_calls = 0

    def respond(request: RecordedRequest) -> Reply:
        nonlocal position, summary_calls
        prompt = counter.count(wire_segments(request.json))
        if is_summary_request(request.json):
            summary_calls += 1
            return reply(SUMMARY_TEXT, input_tokens=prompt, output_tokens=300)
        action = actions[position]
        position += 1
        offered = {tool["function"]["name"] for tool in request.json.get("tools", ())}
        name, arguments = as_offered(action, offered)
        call = FakeToolCall(name, arguments, id=f"c{position}")
        return reply(action.thought, [call], input_tokens=prompt, output_tokens=80)

    limit = len(actions) + 50  # summary calls come on top of the steps
    events: list[Any] = []
    with FakeOpenAIServer(default=respond) as server:
        provider = OpenAIProvider(
            "gpt-bench", api_key="sk-bench", base_url=server.base_url, context_window=context_window
        )
        agent = Agent(
            provider,
            workspace=repo,
            config=AgentConfig(
                session_dir=workdir / f"sessions-{mode}",
                mode=ModeName(mode),
                verify_command=verify_command,
                # a replayed trajectory: the react run measures tokens, not whether the tests pass
                verify=verify_command is not None,
                max_iterations=limit if mode == "react" else 4 * limit,
                max_unproductive_iterations=limit,
                max_consecutive_mistakes=limit,
                permissions=None,
                stream=False,
                compaction=CompactionSettings(**compaction),
            ),
            on_event=events.append,
            rules=RulesLoader(repo, home=workdir / "home"),
        )

        async def play() -> Any:
            try:
                return await agent.run(TASK)
            finally:  # the SDK's connections close on the loop they were opened on
                await provider.aclose()

        result = asyncio.run(play())
        bodies = [r.json for r in server.requests]
    if result.finish_reason is not FinishReason.COMPLETED or position != len(actions):
        raise RuntimeError(
            f"journeyman ({mode}) did not follow the script: {result.finish_reason} after "
            f"{position}/{len(actions)} steps: {result.error}"
        )
    errors = [
        f"{e.result.name}: {e.result.content[:120]!r}"
        for e in events
        if isinstance(e, ev.ToolResultReceived) and e.result.is_error
    ]
    if unknown := [e for e in errors if "unknown tool" in e]:
        raise RuntimeError(f"journeyman ({mode}) was not offered a scripted tool: {unknown[0]}")
    return JourneymanRun(
        requests=[wire_segments(body) for body in bodies],
        compactions=sum(isinstance(e, ev.ContextCompacted) for e in events),
        summary_calls=summary_calls,
        tool_errors=errors,
    )


# --------------------------------------------------------------------------------------------
# mini-swe-agent: linear history
# --------------------------------------------------------------------------------------------

MINI_SYSTEM = "You are a helpful assistant that can interact with a computer.\n"
MINI_BASH_TOOL = (
    "bash",
    "Execute a bash command",
    {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
        "required": ["command"],
    },
)

# Written for this benchmark to about the length and shape of mini.yaml's instance prompt
# (task, workflow, rules for commands, an example answer, system information, command examples);
# used only by --mini reconstruct.
MINI_INSTANCE = """\
Please solve this issue: {task}

You can run bash commands and change files to make the needed changes.

## Suggested way of working

Work in small steps so that you can react to what each one shows.

1. Look around the code base: find the files that matter and read them
2. Write a small script that shows the problem
3. Change the source code so the problem goes away
4. Run your script again to confirm the change works
5. Try edge cases to make sure the change holds up
6. When you are done, hand in your work with this command:
   `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`. Run it on its own, never together with another
   command. <important>Once it has run you cannot work on the task any more.</important>

## How commands are run

The setup works like this:

1. You send at least one command
2. The system runs the command(s) in a fresh subshell
3. You get to see the output
4. You decide on your next command(s)

Every reply of yours has:

1. **A short explanation** of what you have found and what you will do next
2. At least one tool call holding your command

**RULES YOU MUST FOLLOW:**

- Your reply SHOULD explain in a few sentences what you are doing
- Your reply MUST hold AT LEAST ONE call of the bash tool
- Changes of directory or of environment variables do not last. Each command starts in a
  new subshell.
- You may still prefix a command, as in `MY_ENV_VAR=MY_VALUE cd /path/to/working/dir && ...`,
  or write environment variables to a file and load them again
- When you are done, hand in your work with this command:
  `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`. Run it on its own, never together with another
  command. <important>Once it has run you cannot work on the task any more.</important>

A GOOD reply looks like this:
<example_response>
First I want to see how the repository is laid out. I will list the current directory to find
out which files it has.

[Calls the bash tool with {{"command": "ls -la"}} as its arguments]
</example_response>

<system_information>
{system}
</system_information>

## Handy commands

### Write a new file:

```bash
cat <<'EOF' > newfile.py
import numpy as np
hello = "world"
print(hello)
EOF
```

### Change files with sed:

```bash
# Replace every match
sed -i 's/old_string/new_string/g' filename.py

# Replace the first match only
sed -i 's/old_string/new_string/' filename.py

# Replace the first match on line 1
sed -i '1s/old_string/new_string/' filename.py

# Replace every match on lines 1-10
sed -i '1,10s/old_string/new_string/g' filename.py
```

### Show part of a file:

```bash
# Lines 10 to 20, numbered
nl -ba filename.py | sed -n '10,20p'
```

### Anything else you need

```bash
anything
```
"""


def mini_observation(returncode: int, output: str) -> str:
    """An observation the way mini.yaml's template renders it (Jinja's ``tojson`` escaping)."""

    def tojson(text: str) -> str:
        dumped = json.dumps(text)
        for char, escape in (
            ("<", "\\u003c"),
            (">", "\\u003e"),
            ("&", "\\u0026"),
            ("'", "\\u0027"),
        ):
            dumped = dumped.replace(char, escape)
        return dumped

    if len(output) < 10_000:
        return f'{{\n  "returncode": {returncode},\n  "output": {tojson(output)}\n}}'
    return (
        f'{{\n  "returncode": {returncode},\n  "output_head": {tojson(output[:5000])},\n'
        f'  "output_tail": {tojson(output[-5000:])},\n  "elided_chars": {len(output) - 10_000},\n'
        f'  "warning": "Output too long."\n}}'
    )


def run_shell(command: str, cwd: Path, timeout: float = 30) -> tuple[int, str]:
    """Run a command like mini-swe-agent's LocalEnvironment: a shell, stderr into stdout."""
    proc = subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
    )
    return proc.returncode, proc.stdout


@dataclass
class MiniRun:
    requests: list[Segments]
    source: str


def _mini_requests(
    tool: dict[str, Any], messages: list[dict[str, Any]], counts: list[int]
) -> MiniRun:
    """Its requests as the Chat Completions bodies its model client sends: the bash tool, then
    the first `count` messages of the final (linear) history."""
    requests = [wire_segments({"tools": [tool], "messages": messages[:n]}) for n in counts]
    return MiniRun(requests, "")


def _bash_call(call_id: str, action: Action) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": action.shell})},
    }


def reconstruct_mini(actions: Sequence[Action], repo: Path) -> MiniRun:
    """mini-swe-agent's linear history built here, with real command outputs from `repo`."""
    import platform

    uname = platform.uname()
    info = f"{uname.system} {uname.release} {uname.version} {uname.machine}"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": MINI_SYSTEM},
        {"role": "user", "content": MINI_INSTANCE.format(task=TASK, system=info)},
    ]
    counts = []
    for i, action in enumerate(actions, 1):
        counts.append(len(messages))
        call = _bash_call(f"c{i}", action)
        messages.append({"role": "assistant", "content": action.thought, "tool_calls": [call]})
        if action.kind == "finish":
            break
        code, output = run_shell(action.shell, repo)
        messages.append(
            {"role": "tool", "tool_call_id": call["id"], "content": mini_observation(code, output)}
        )
    run = _mini_requests(wire_tool(*MINI_BASH_TOOL), messages, counts)
    run.source = "reconstructed in this process (instance prompt approximated)"
    return run


def _drive_mini(actions_file: Path, repo: Path, result_file: Path) -> None:
    """Inside bench/.venv-mini: run mini-swe-agent itself and record what its model receives."""
    os.environ["MSWEA_SILENT_STARTUP"] = "1"
    os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = str(result_file.parent / "mini-config")
    import minisweagent
    import yaml
    from minisweagent.agents.default import AgentConfig, DefaultAgent
    from minisweagent.environments.local import LocalEnvironment, LocalEnvironmentConfig
    from minisweagent.models.test_models import DeterministicToolcallModel, make_toolcall_output
    from minisweagent.models.utils.actions_toolcall import BASH_TOOL

    actions = [Action(**a) for a in json.loads(actions_file.read_text())]
    config = yaml.safe_load((Path(minisweagent.package_dir) / "config" / "mini.yaml").read_text())
    outputs = []
    for i, action in enumerate(actions, 1):
        call = _bash_call(f"c{i}", action)
        actions_spec = [{"command": action.shell, "tool_call_id": call["id"]}]
        outputs.append(make_toolcall_output(action.thought, [call], actions_spec))
    seen: list[list[dict[str, Any]]] = []

    class RecordingModel(DeterministicToolcallModel):  # type: ignore[misc]
        def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
            # what its litellm model would send: every message without the "extra" field
            seen.append([{k: v for k, v in m.items() if k != "extra"} for m in messages])
            self.current_index += 1
            output: dict[str, Any] = outputs[self.current_index]
            return output

    model = RecordingModel(outputs=[], observation_template=config["model"]["observation_template"])
    agent_kwargs = {k: v for k, v in config["agent"].items() if k in AgentConfig.model_fields}
    agent_kwargs.update(step_limit=0, cost_limit=0)
    env_kwargs = {
        k: v
        for k, v in config.get("environment", {}).items()
        if k in LocalEnvironmentConfig.model_fields
    }
    env_kwargs["cwd"] = str(repo)
    agent = DefaultAgent(model, LocalEnvironment(**env_kwargs), **agent_kwargs)
    info = agent.run(TASK)
    if info.get("exit_status") != "Submitted" or len(seen) != len(actions):
        raise RuntimeError(f"mini-swe-agent did not follow the script: {info} {len(seen)}")
    final = seen[-1]
    for request in seen:  # linear history: each request is a prefix of the last one
        if request != final[: len(request)]:
            raise RuntimeError("mini-swe-agent's history was not linear")
    function = BASH_TOOL["function"]
    result = {
        "version": minisweagent.__version__,
        "tool": [function["name"], function["description"], function["parameters"]],
        "messages": final,
        "counts": [len(r) for r in seen],
    }
    result_file.write_text(json.dumps(result))


def run_mini_real(actions: Sequence[Action], repo: Path, workdir: Path) -> MiniRun:
    sys.path.insert(0, str(BENCH_DIR))
    from overhead import MINI_SPEC, ensure_mini_venv

    python = ensure_mini_venv(MINI_SPEC)
    actions_file = workdir / "actions.json"
    actions_file.write_text(json.dumps([asdict(a) for a in actions]))
    result_file = workdir / "mini-result.json"
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [
            str(python),
            str(Path(__file__).resolve()),
            "--driver",
            str(actions_file),
            str(repo),
            str(result_file),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0 or not result_file.exists():
        raise RuntimeError(f"mini-swe-agent driver failed:\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(result_file.read_text())
    name, description, parameters = data["tool"]
    run = _mini_requests(wire_tool(name, description, parameters), data["messages"], data["counts"])
    run.source = f"mini-swe-agent {data['version']} run for real (its mini.yaml, LocalEnvironment)"
    return run


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


@dataclass
class Report:
    steps: int
    seed: int
    tokenizer: str
    tokenizer_source: str
    exact_tokens: bool
    mini_source: str
    compaction: dict[str, Any]
    context_window: int
    ours: AgentStats
    mini: AgentStats
    action_mix: dict[str, int]
    phased: AgentStats | None = None
    phased_verify: str = ""

    @property
    def ratio(self) -> float | None:
        return self.ours.total_tokens / self.mini.total_tokens if self.mini.total_tokens else None


def run_benchmark(
    steps: int,
    seed: int,
    counter: Counter,
    *,
    tokenizer_source: str = "",
    mini_mode: str = "reconstruct",
    compaction: dict[str, Any] | None = None,
    context_window: int = 200_000,
    workdir: Path | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Report:
    """Play the trajectory with both agents and measure their requests (the bench's core)."""
    compaction = dict(compaction or {})
    own_dir = workdir is None
    root = Path(tempfile.mkdtemp(prefix="tokens-")) if workdir is None else workdir
    saved_env = {k: os.environ.get(k) for k in ("PATH", "PYTHONDONTWRITEBYTECODE")}
    # `python` in the test command is this interpreter; no __pycache__ shows up in listings
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        source = rich_source()
        pristine = prepare_repo(root / "pristine", source)
        actions = make_trajectory(pristine, steps, seed)
        mix: dict[str, int] = {}
        for action in actions:
            mix[action.kind] = mix.get(action.kind, 0) + 1

        log(f"journeyman: {len(actions)} scripted turns ...")
        ours_repo = prepare_repo(root / "repo-journeyman", source)
        jm = run_journeyman(actions, ours_repo, root, counter, compaction, context_window)
        ours = measure("journeyman react", jm.requests, counter)
        ours.compactions = jm.compactions
        ours.summary_calls = jm.summary_calls
        ours.notes.extend(jm.tool_errors)

        log(f"journeyman phased: {len(actions)} scripted turns ...")
        phased_repo = prepare_repo(root / "repo-phased", source)
        ph = run_journeyman(
            actions,
            phased_repo,
            root,
            counter,
            compaction,
            context_window,
            mode="phased",
            verify_command=PHASED_VERIFY,
        )
        phased = measure("journeyman phased", ph.requests, counter)
        phased.compactions = ph.compactions
        phased.summary_calls = ph.summary_calls
        phased.notes.extend(ph.tool_errors)

        mini_repo = prepare_repo(root / "repo-mini", source)
        mini_run: MiniRun | None = None
        if mini_mode in ("real", "auto"):
            log("mini-swe-agent: running it in bench/.venv-mini ...")
            try:
                mini_run = run_mini_real(actions, mini_repo, root)
            except Exception as error:
                if mini_mode == "real":
                    raise
                log(f"mini-swe-agent could not run ({error}); reconstructing its requests")
                mini_repo = prepare_repo(root / "repo-mini", source)
        if mini_run is None:
            mini_run = reconstruct_mini(actions, mini_repo)
        mini = measure("mini-swe-agent", mini_run.requests, counter)
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    return Report(
        steps=steps,
        seed=seed,
        tokenizer=counter.name,
        tokenizer_source=tokenizer_source,
        exact_tokens=counter.exact,
        mini_source=mini_run.source,
        compaction=compaction,
        context_window=context_window,
        ours=ours,
        mini=mini,
        action_mix=mix,
        phased=phased,
        phased_verify=PHASED_VERIFY,
    )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def print_report(report: Report) -> None:
    from journeyman.context.compaction import CompactionSettings

    settings = CompactionSettings(**report.compaction)
    changed = ", ".join(f"{k}={v}" for k, v in report.compaction.items()) or "defaults"
    mix = ", ".join(f"{n} {k}" for k, n in sorted(report.action_mix.items()))
    print(f"Input tokens over a {report.steps}-step run (seed {report.seed}): {mix}")
    exact = "" if report.exact_tokens else "  <-- ESTIMATES, not real token counts"
    print(f"Tokens: {report.tokenizer} ({report.tokenizer_source}){exact}")
    print(f"mini-swe-agent: {report.mini_source}")
    print(
        f"journeyman compaction: {changed} (keep_recent_observations="
        f"{settings.keep_recent_observations}, stale_observation_tokens="
        f"{settings.stale_observation_tokens}, trigger {settings.trigger_fraction} of a "
        f"{report.context_window:,}-token window)"
    )
    print(
        "prefix share of request i = common token prefix of requests i-1 and i / tokens of "
        "request i-1;"
    )
    print("cacheable = sum of common prefixes / sum of request sizes")
    print()
    header = (
        f"{'agent':<20} | {'requests':>8} | {'input tokens':>12} | {'peak prompt':>11} | "
        f"{'prefix mean':>11} | {'prefix min':>10} | {'< 90 %':>6} | {'cacheable':>9} | "
        f"{'compactions':>11}"
    )
    print(header)
    print("-" * len(header))
    rows = [report.mini, report.ours] + ([report.phased] if report.phased else [])
    for stats in rows:
        requests = f"{stats.requests}"
        if stats.summary_calls:  # the turns, plus the summary calls
            requests = f"{stats.requests - stats.summary_calls}+{stats.summary_calls}s"
        print(
            f"{stats.name:<20} | {requests:>8} | {stats.total_tokens:>12,} | "
            f"{stats.peak_tokens:>11,} | {_pct(stats.mean_prefix):>11} | "
            f"{_pct(stats.min_prefix):>10} | {stats.below_target:>6} | "
            f"{_pct(stats.cacheable_share):>9} | {stats.compactions:>11}"
        )
    if report.phased is not None:
        print(f"journeyman phased verifies with: {report.phased_verify}")
    print()
    for stats in (report.ours, report.phased):
        if stats is None or not report.mini.total_tokens or stats.cacheable_share is None:
            continue
        ratio = stats.total_tokens / report.mini.total_tokens
        met = ratio <= TARGET_RATIO and stats.cacheable_share >= TARGET_CACHEABLE
        print(
            f"{stats.name}: {ratio:.3f}x mini-swe-agent's input tokens, "
            f"{_pct(stats.cacheable_share)} cacheable (target <= {TARGET_RATIO:.2f}x with >= "
            f"{TARGET_CACHEABLE * 100:.0f} % cacheable: {'met' if met else 'MISSED'})"
        )
        # content sent for the first time cannot come from a cache: at the target ratio, the
        # cacheable share is at most 1 - new / (target ratio x mini's total)
        ceiling = max(0.0, 1 - stats.new_tokens / (TARGET_RATIO * report.mini.total_tokens))
        print(
            f"  {stats.new_tokens:,} tokens were sent for the first time; at {TARGET_RATIO:.2f}x, "
            f"at most {_pct(ceiling)} could be cacheable"
        )
    if report.ours.notes:
        print(f"journeyman tool errors: {len(report.ours.notes)} (the failing test runs)")


def _compaction_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for key in (
        "keep_recent_observations",
        "max_output_chars",
        "trigger_fraction",
        "target_fraction",
        "keep_recent_messages",
    ):
        value = getattr(args, key)
        if value is not None:
            overrides[key] = value
    if args.stale_observation_tokens is not None:
        overrides["stale_observation_tokens"] = (
            None if args.stale_observation_tokens < 0 else args.stale_observation_tokens
        )
    return overrides


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=100, help="tool steps (default: 100)")
    parser.add_argument("--seed", type=int, default=0, help="trajectory seed (default: 0)")
    parser.add_argument(
        "--mini",
        choices=("auto", "real", "reconstruct"),
        default="auto",
        help="run mini-swe-agent itself, or rebuild its requests here (default: auto)",
    )
    parser.add_argument(
        "--tokenizer",
        choices=("auto", "tiktoken", "chars"),
        default="auto",
        help="auto: tiktoken with a BPE file already on this machine, else chars/4; "
        "tiktoken: also let tiktoken download it; chars: chars/4",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        default=200_000,
        help="context window the scripted model reports (default: 200000)",
    )
    group = parser.add_argument_group("journeyman CompactionSettings overrides")
    group.add_argument("--keep-recent-observations", type=int)
    group.add_argument(
        "--stale-observation-tokens",
        type=int,
        help="a negative value means None (mask only by size)",
    )
    group.add_argument("--max-output-chars", type=int)
    group.add_argument("--trigger-fraction", type=float)
    group.add_argument("--target-fraction", type=float)
    group.add_argument("--keep-recent-messages", type=int)
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    parser.add_argument("--driver", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.driver:
        _drive_mini(*args.driver)
        return 0
    if args.steps < 1:
        parser.error("--steps must be positive")
    counter, source = make_counter(args.tokenizer)
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="tokens-", dir=WORK_DIR))
    try:
        report = run_benchmark(
            args.steps,
            args.seed,
            counter,
            tokenizer_source=source,
            mini_mode=args.mini,
            compaction=_compaction_overrides(args),
            context_window=args.context_window,
            workdir=workdir,
            log=lambda line: print(line, file=sys.stderr),
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        data = asdict(report)
        data["ratio"] = report.ratio
        print(json.dumps(data, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
