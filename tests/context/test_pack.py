"""Context pack: rendering within a size by priority, the cut markers, one build per step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journeyman.context.memory import (
    DEFAULT_FORMATTER,
    PRIORITY_ACTIVITY,
    PRIORITY_EARLIER,
    PRIORITY_PLAN,
    PRIORITY_TASK,
    Artifacts,
    LastError,
    MemorySection,
    PhasedState,
)
from journeyman.context.pack import (
    CUT_MARKER,
    SECTION_ORDER,
    ContextPack,
    ContextPackBuilder,
    FileIndex,
    FileSnippet,
    PackSettings,
    ProjectDescription,
    render_error,
)

GOAL = "Make parse() accept quoted newlines"
ERROR = "AssertionError: expected 2 rows, got 3"


def sample_pack(**overrides: object) -> ContextPack:
    fields: dict[str, object] = {
        "goal": GOAL,
        "step": 3,
        "project_profile": "python, uv, test with: pytest -q",
        "relevant_files": (
            FileSnippet("src/parser.py", "FILE-ONE " * 40),
            FileSnippet("src/rows.py", "FILE-TWO " * 40),
            FileSnippet("README.md", "FILE-THREE " * 40),
        ),
        "recent_error": ERROR,
        "current_diff": "DIFF " * 40,
        "test_results": "TESTHEAD " * 30 + "TESTTAIL: 1 failed",
        "verification_success": False,
        "memory": (
            MemorySection("Task", "TASK-MEMORY " * 10, PRIORITY_TASK),
            MemorySection("Plan", "PLAN-MEMORY " * 10, PRIORITY_PLAN),
            MemorySection("Earlier work", "EARLIER-MEMORY " * 30, PRIORITY_EARLIER),
            MemorySection("Recent activity", "ACTIVITY-MEMORY " * 20, PRIORITY_ACTIVITY),
        ),
    }
    fields.update(overrides)
    return ContextPack(**fields)  # type: ignore[arg-type]


def whole(pack: ContextPack) -> dict[str, str]:
    """Each cuttable part of `sample_pack` by name, as it appears when nothing is cut."""
    parts = {f"file:{s.path}": s.text.rstrip() for s in pack.relevant_files}
    parts |= {f"memory:{s.title}": s.body for s in pack.memory}
    parts |= {"diff": pack.current_diff.rstrip(), "tests": pack.test_results.rstrip()}
    parts["profile"] = pack.project_profile
    return parts


# --- rendering ----------------------------------------------------------------------------


def test_the_whole_pack_renders_every_section_in_order() -> None:
    text = sample_pack().to_string()
    headings = [line[2:] for line in text.splitlines() if line.startswith("# ")]
    assert headings == list(SECTION_ORDER)
    assert CUT_MARKER not in text
    assert "### src/parser.py" in text and "## Earlier work" in text
    assert text.endswith("# Verification\nfailed")
    assert sample_pack().to_string(len(text)) == text


def test_an_empty_pack_still_says_its_goal_and_that_nothing_was_verified() -> None:
    assert ContextPack("do it").to_string() == "# Goal\ndo it\n\n# Verification\nnot run yet"


def test_the_least_relevant_file_is_cut_first() -> None:
    pack = sample_pack()
    full = pack.to_string()
    text = pack.to_string(len(full) - 100)
    assert len(text) <= len(full) - 100
    assert CUT_MARKER in text
    parts = whole(pack)
    assert parts["file:src/parser.py"] in text and parts["file:src/rows.py"] in text
    assert parts["file:README.md"] not in text
    assert all(v in text for k, v in parts.items() if not k.startswith("file:"))


def test_parts_give_way_in_priority_order() -> None:
    """For each part, the largest size at which it no longer fits whole: earlier in the cut
    order means it starts losing content at a larger size."""
    pack = sample_pack()
    parts = whole(pack)
    full = len(pack.to_string())
    first_cut: dict[str, int] = {}
    for size in range(full, -1, -1):
        text = pack.to_string(size)
        assert GOAL in text and ERROR in text
        for name, body in parts.items():
            if body not in text:
                first_cut.setdefault(name, size)
    order = sorted(first_cut, key=lambda name: -first_cut[name])
    assert order == [
        "file:README.md",
        "file:src/rows.py",
        "file:src/parser.py",
        "memory:Earlier work",
        "memory:Recent activity",
        "tests",
        "diff",
        "profile",
        "memory:Plan",
        "memory:Task",
    ]


def test_test_results_keep_their_tail() -> None:
    pack = sample_pack(relevant_files=(), memory=())
    full = pack.to_string()
    text = pack.to_string(len(full) - 120)
    assert "TESTTAIL: 1 failed" in text
    assert f"{CUT_MARKER}: " in text and "characters of test results left out" in text
    assert "DIFF" in text


def test_a_cut_section_says_what_was_left_out() -> None:
    pack = sample_pack()
    snippets = sum(len(s.text) for s in pack.relevant_files)
    text = pack.to_string(len(pack.to_string()) - snippets)
    assert text.endswith(f"{CUT_MARKER}: left out files src/parser.py, src/rows.py, README.md]")
    assert "# Relevant files" not in text


def test_goal_and_error_survive_any_size() -> None:
    pack = sample_pack()
    essentials = pack.essential_text()
    for size in (0, 1, 10, 50, len(essentials) - 1):
        text = pack.to_string(size)
        assert text.startswith(essentials)
        assert text.endswith(
            f"{CUT_MARKER}: left out the project profile; files src/parser.py, src/rows.py, "
            "README.md; memory sections Task, Plan, Earlier work, Recent activity; the diff; "
            "the test results]"
        )
    # room for the essentials but not for the note: the note goes
    assert pack.to_string(len(essentials)) == essentials


def test_essentials_are_goal_error_and_verification() -> None:
    assert sample_pack().essential_text() == (
        f"# Goal\n{GOAL}\n\n# Recent error\n{ERROR}\n\n# Verification\nfailed"
    )


# --- properties ---------------------------------------------------------------------------

CUTTABLE = "QJXZ \n"  # letters that appear in no heading and no marker
essential = st.text(alphabet="abcdefgh ", min_size=1, max_size=60).filter(str.strip)
cuttable = st.text(alphabet=CUTTABLE, max_size=300)


@st.composite
def packs(draw: st.DrawFn) -> ContextPack:
    files = draw(st.lists(cuttable, max_size=4))
    sections = draw(st.lists(st.tuples(st.integers(0, 8), cuttable.filter(str.strip)), max_size=5))
    return ContextPack(
        goal=draw(essential),
        project_profile=draw(cuttable),
        relevant_files=tuple(FileSnippet(f"f{i}.py", t) for i, t in enumerate(files)),
        recent_error=draw(st.just("") | essential),
        current_diff=draw(cuttable),
        test_results=draw(cuttable),
        verification_success=draw(st.none() | st.booleans()),
        memory=tuple(MemorySection(f"s{i}", b, p) for i, (p, b) in enumerate(sections)),
    )


@given(packs(), st.integers(min_value=0, max_value=3_000))
@settings(max_examples=300, deadline=None)
def test_the_size_limit_holds_unless_the_essentials_alone_break_it(
    pack: ContextPack, size: int
) -> None:
    text = pack.to_string(size)
    assert pack.goal.strip() in text
    assert pack.recent_error.strip() in text
    if len(pack.essential_text()) <= size:
        assert len(text) <= size
    else:
        assert text.startswith(pack.essential_text())
        assert not set(text) & set("QJXZ")  # nothing else remains


@given(packs(), st.integers(min_value=0, max_value=3_000))
@settings(max_examples=300, deadline=None)
def test_a_marker_shows_wherever_something_was_cut(pack: ContextPack, size: int) -> None:
    full, text = pack.to_string(), pack.to_string(size)
    if text == full:
        assert len(full) <= size or full == pack.essential_text()
    elif text != pack.essential_text():  # (the one case with no room left for a note)
        assert CUT_MARKER in text


# --- error and paths ----------------------------------------------------------------------


def test_the_error_is_rendered_with_its_repro_command_and_output_tail() -> None:
    error = LastError("tests failed", "pytest -x", "line 1\nValueError: bad", "sig")
    assert render_error(error) == "tests failed\nReproduce with: pytest -x\nline 1\nValueError: bad"
    assert render_error(error, stderr_chars=3) == "tests failed\nReproduce with: pytest -x\nbad"
    assert render_error(None) == ""


# --- the builder --------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeSnippet:
    path: str
    text: str

    def render(self) -> str:
        return f"{self.path}:\n{self.text}"


class FakeIndex:
    """Ranks files named in an error first, then by how many keywords they contain."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = dict(files)
        self.rankings: list[tuple[str, list[str]]] = []
        self.reads: list[list[str]] = []

    def extract_keywords(self, text: str) -> Sequence[str]:
        return [w.strip(".,:()'\"").lower() for w in text.split() if len(w) > 3]

    def rank_files(self, goal: str, errors: Sequence[str]) -> Sequence[str]:
        self.rankings.append((goal, list(errors)))
        named = [p for p in self.files if any(p in e for e in errors)]
        keywords = self.extract_keywords(goal + " " + " ".join(errors))
        hits = {p: sum(k in body for k in keywords) for p, body in self.files.items()}
        rest = sorted((p for p in self.files if p not in named), key=lambda p: -hits[p])
        return named + rest

    def read_snippets(self, paths: Sequence[str], keywords: Sequence[str]) -> list[FakeSnippet]:
        self.reads.append(list(paths))
        out = []
        for path in paths:
            lines = self.files[path].split(";")
            out += [FakeSnippet(path, line.strip()) for line in lines]
        return out


class FakeProfile:
    def to_text(self) -> str:
        return "python project, run tests with pytest"


def workspace() -> FakeIndex:
    return FakeIndex(
        {
            "src/parser.py": "def parse(text): quoted newlines are split here",
            "src/rows.py": "rows are joined; quoted fields with newlines",
            "docs/intro.md": "nothing relevant",
            "src/broken.py": "raise error",
        }
    )


def test_the_builder_assembles_goal_profile_files_error_artifacts_and_memory() -> None:
    state = PhasedState(step=2)
    state.memory.long_term.task_summary = "parser work"
    state.last_error = LastError.from_failure(
        "pytest failed", repro_command="pytest -x", stderr='File "src/broken.py", line 1\nBoom'
    )
    state.artifacts = Artifacts("+ fix", "1 failed", False)
    builder = ContextPackBuilder("parse quoted newlines", files=workspace(), profile=FakeProfile())
    pack = builder.for_step(state)
    assert pack.goal == "parse quoted newlines" and pack.step == 2
    assert pack.project_profile == "python project, run tests with pytest"
    # the file named in the error first, then by keyword hits
    paths = [s.path for s in pack.relevant_files]
    assert paths == ["src/broken.py", "src/parser.py", "src/rows.py", "docs/intro.md"]
    # a file's excerpts stay together, in the order the index gave them
    assert pack.relevant_files[2].text == (
        "src/rows.py:\nrows are joined\nsrc/rows.py:\nquoted fields with newlines"
    )
    assert pack.recent_error.startswith("pytest failed\nReproduce with: pytest -x")
    assert (pack.current_diff, pack.test_results, pack.verification_success) == (
        "+ fix",
        "1 failed",
        False,
    )
    assert pack.memory == state.memory_summary(DEFAULT_FORMATTER).sections
    assert "parser work" in pack.memory_summary


def test_the_pack_is_built_once_per_step() -> None:
    index, state = workspace(), PhasedState(step=1)
    builder = ContextPackBuilder("parse quoted newlines", files=index)
    first = builder.for_step(state)
    assert len(index.rankings) == 1 and len(index.reads) == 1
    state.add_learning("changed within the step")
    assert builder.for_step(state) is first  # DISCOVER and PLAN of one step share the pack
    assert len(index.rankings) == 1 and len(index.reads) == 1
    state.advance()
    second = builder.for_step(state)
    assert second is not first and second.step == 2
    assert len(index.reads) == 2
    assert "changed within the step" in second.memory_summary


def test_the_file_limit_and_a_missing_index_are_respected() -> None:
    state = PhasedState()
    limited = ContextPackBuilder(
        "parse quoted newlines", files=workspace(), settings=PackSettings(max_files=1)
    )
    assert [s.path for s in limited.for_step(state).relevant_files] == ["src/parser.py"]
    bare = ContextPackBuilder("goal").for_step(state)
    assert bare.relevant_files == () and bare.project_profile == ""


def test_the_real_index_and_profile_fit_the_builder(tmp_path: Path) -> None:
    index_module = pytest.importorskip("journeyman.context.index")
    profile_module = pytest.importorskip("journeyman.context.profile")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "csvkit"\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    )
    (tmp_path / "csvkit").mkdir()
    (tmp_path / "csvkit" / "reader.py").write_text(
        "def split_row(line):\n    return line.split(',')\n\n\n"
        "def quoted_newlines(text):\n    raise NotImplementedError\n"
    )
    (tmp_path / "csvkit" / "writer.py").write_text("def write(rows):\n    pass\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_reader.py").write_text("def test_split():\n    assert True\n")
    files: FileIndex = index_module.WorkspaceIndexer(tmp_path)
    profile: ProjectDescription = profile_module.detect_profile(tmp_path)
    state = PhasedState(step=1)
    state.last_error = LastError.from_failure(
        "pytest failed",
        stderr='File "csvkit/reader.py", line 6, in quoted_newlines\nNotImplementedError',
    )
    pack = ContextPackBuilder(
        "support quoted newlines when splitting rows", files=files, profile=profile
    ).for_step(state)
    assert "python" in pack.project_profile.lower() and "pytest" in pack.project_profile
    assert pack.relevant_files[0].path == "csvkit/reader.py"
    assert "quoted_newlines" in pack.relevant_files[0].text
    assert "NotImplementedError" in pack.to_string(2_000)
