"""Agent state and memory: rendering, the render cache, the compression stages, persistence."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journeyman.context.memory import (
    DEFAULT_FORMATTER,
    SUMMARY_REQUEST,
    Artifacts,
    Attempt,
    DecisionNote,
    FileSnapshot,
    LastError,
    Memory,
    MemoryFormatter,
    MemorySettings,
    MemorySummary,
    Milestone,
    PhasedState,
    ResponseNote,
    StepDecision,
    ToolRecord,
    apply_rules,
    compress,
    drop_near_duplicates,
    error_signature,
    near_duplicate,
    remove_duplicates,
    summarise_earlier,
)

SECRET = "RAW-MODEL-RESPONSE-SENTINEL"


class CountingFormatter(MemoryFormatter):
    def __init__(self, settings: MemorySettings | None = None) -> None:
        super().__init__(settings)
        self.calls = 0

    def format(self, state: PhasedState) -> MemorySummary:
        self.calls += 1
        return super().format(state)


class FakeSummariser:
    def __init__(self, answer: str = "they tried three fixes; the parser test still fails") -> None:
        self.answer = answer
        self.prompts: list[str] = []

    async def __call__(self, text: str) -> str:
        self.prompts.append(text)
        return self.answer


def busy_state() -> PhasedState:
    state = PhasedState(phase="ACT")
    state.memory.long_term.task_summary = "Make the CSV parser accept quoted newlines."
    state.set_plan("read parser.py\nfix the quoting branch\nrun the tests")
    state.add_decision("keep the public API", reason="callers depend on it")
    state.add_milestone("found the bug in _split_row")
    state.add_learning("tests live in tests/test_parser.py")
    state.record_created_file("tests/test_quotes.py")
    state.advance()
    state.record_tool_result("read_file", '{"path": "parser.py"}', "def parse(text): ...")
    state.record_attempt("edit parser.py", "patched _split_row", success=True)
    state.record_file_content("parser.py", "def parse(text):\n    return []\n")
    state.record_model_response(f"I will now edit the file {SECRET}")
    state.advance("VERIFY")
    state.last_error = LastError.from_failure(
        "pytest failed: 1 test",
        repro_command="pytest tests/test_parser.py -x",
        stderr="Traceback...\n  File 'parser.py', line 3\nAssertionError: expected 2 rows",
    )
    state.artifacts = Artifacts("--- a/parser.py\n+++ b/parser.py", "1 failed, 4 passed", False)
    return state


# --- rendering --------------------------------------------------------------------------


def test_rendering_shows_every_section_in_reading_order() -> None:
    text = busy_state().memory_summary(DEFAULT_FORMATTER).text
    titles = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert titles == [
        "Warnings",
        "Task",
        "Plan",
        "Key context",
        "Recent activity",
        "Tool results",
        "Modified files",
        "Current state",
        "Next step",
    ]
    assert "2. fix the quoting branch" in text
    assert "keep the public API because callers depend on it" in text
    assert "read_file" in text and "def parse(text)" in text
    assert "last error: pytest failed: 1 test" in text
    assert "pytest tests/test_parser.py -x" in text  # the next step names the repro command
    assert "verification: failed" in text


def test_an_empty_state_renders_only_its_current_state_and_next_step() -> None:
    summary = PhasedState().memory_summary(DEFAULT_FORMATTER)
    assert [s.title for s in summary.sections] == ["Current state", "Next step"]
    assert "Write a short plan" in summary.text


def test_a_recorded_plan_is_never_asked_for_again() -> None:
    state = PhasedState()
    state.set_plan("read parser.py\nfix it")
    state.set_task_summary("  fix the parser  ")
    text = state.memory_summary(DEFAULT_FORMATTER).text
    assert "Write a short plan" not in text
    assert "1. read parser.py" in text and "fix the parser" in text
    state.artifacts.verification_success = True
    assert "Write a short plan" not in state.memory_summary(DEFAULT_FORMATTER).text


def test_the_workflow_decision_log_is_debug_only_and_persisted() -> None:
    state = busy_state()
    state.record_step_decision("plan -> act (next) LOGGED-ONLY")
    assert "LOGGED-ONLY" not in state.memory_summary(DEFAULT_FORMATTER).text
    restored = PhasedState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored.memory.debug.decisions == state.memory.debug.decisions
    assert restored.memory.debug.decisions[0].phase == "VERIFY"


async def test_compression_drops_the_oldest_logged_decisions() -> None:
    state = busy_state()
    for n in range(5):
        state.record_step_decision(f"decision {n}")
    await compress(state, MemorySettings(compress_above_chars=0, keep_step_decisions=2))
    assert [d.text for d in state.memory.debug.decisions] == ["decision 3", "decision 4"]
    assert not any("decision 0" in line for line in state.memory.long_term.earlier_work)


def test_debug_only_responses_are_never_rendered() -> None:
    state = busy_state()
    for _ in range(30):
        state.record_model_response(SECRET)
    assert SECRET not in state.memory_summary(DEFAULT_FORMATTER).text
    assert SECRET not in MemoryFormatter().format(state).text
    assert state.memory.debug.model_responses[0].text.endswith(SECRET)


async def test_debug_only_responses_stay_out_after_compression() -> None:
    state = busy_state()
    state.record_model_response(SECRET)
    await compress(state, MemorySettings(compress_above_chars=0), FakeSummariser())
    assert SECRET not in state.memory_summary(DEFAULT_FORMATTER).text
    assert SECRET not in " ".join(state.memory.long_term.earlier_work)


def test_a_recurring_error_signature_raises_a_warning() -> None:
    state = busy_state()
    assert state.last_error is not None
    for _ in range(2):
        state.record_attempt(
            "edit", "same failure", success=False, error_signature=state.last_error.signature
        )
    assert "The same error has come back 2 times" in state.memory_summary(DEFAULT_FORMATTER).text


def test_long_tool_outputs_and_files_are_clipped_in_the_rendering() -> None:
    state = PhasedState()
    state.record_tool_result("run_command", "pytest", "x" * 10_000)
    state.record_file_content("big.py", "y" * 10_000)
    text = state.memory_summary(MemoryFormatter(MemorySettings(tool_output_chars=300))).text
    assert "characters cut" in text and "more characters" in text
    assert text.count("x") < 400 and text.count("y") < 3_100


def test_a_file_modified_twice_keeps_only_its_latest_content() -> None:
    state = PhasedState()
    state.record_file_content("a.py", "first")
    state.record_file_content("b.py", "other")
    state.advance()
    state.record_file_content("a.py", "second")
    assert [(s.path, s.content, s.step) for s in state.memory.facts.modified_files] == [
        ("b.py", "other", 0),
        ("a.py", "second", 1),
    ]


# --- the render cache -------------------------------------------------------------------


def test_a_second_render_without_a_change_does_not_recompute() -> None:
    state, formatter = busy_state(), CountingFormatter()
    first = state.memory_summary(formatter)
    second = state.memory_summary(formatter)
    assert formatter.calls == 1
    assert second is first


def test_another_formatter_is_not_served_from_the_cache() -> None:
    state, a, b = busy_state(), CountingFormatter(), CountingFormatter()
    state.memory_summary(a)
    state.memory_summary(b)
    assert (a.calls, b.calls) == (1, 1)


MUTATIONS: dict[str, Callable[[PhasedState], None]] = {
    "advance": lambda s: s.advance(),
    "phase": lambda s: setattr(s, "phase", "PLAN"),
    "step": lambda s: setattr(s, "step", 99),
    "last_error cleared": lambda s: setattr(s, "last_error", None),
    "last_error replaced": lambda s: setattr(s, "last_error", LastError("other")),
    "attempt": lambda s: s.record_attempt("run tests", "ok", success=True),
    "tool result": lambda s: s.record_tool_result("grep", "quote", "parser.py:3"),
    "created file": lambda s: s.record_created_file("new.py"),
    "file content": lambda s: s.record_file_content("parser.py", "fixed"),
    "plan": lambda s: s.set_plan(["just one step"]),
    "task summary": lambda s: setattr(s.memory.long_term, "task_summary", "new task"),
    "decision": lambda s: s.add_decision("rewrite the tokenizer"),
    "milestone": lambda s: s.add_milestone("tests pass"),
    "learning": lambda s: s.add_learning("the CI uses Python 3.11"),
    "earlier summary": lambda s: setattr(s.memory.long_term, "earlier_summary", "before"),
    "earlier work": lambda s: setattr(s.memory.long_term, "earlier_work", ("did a thing",)),
    "facts replaced": lambda s: setattr(
        s.memory, "facts", replace(s.memory.facts, created_files=("z.py",))
    ),
    "memory replaced": lambda s: setattr(s, "memory", Memory()),
    "artifacts field": lambda s: setattr(s.artifacts, "verification_success", True),
    "diff": lambda s: setattr(s.artifacts, "current_diff", "+ new line"),
    "test results": lambda s: setattr(s.artifacts, "test_results", "5 passed"),
    "artifacts replaced": lambda s: setattr(s, "artifacts", Artifacts()),
}


@pytest.mark.parametrize("mutate", MUTATIONS.values(), ids=list(MUTATIONS))
def test_every_change_to_what_is_rendered_invalidates_the_cache(
    mutate: Callable[[PhasedState], None],
) -> None:
    state, formatter = busy_state(), CountingFormatter()
    before = state.memory_summary(formatter)
    mutate(state)
    after = state.memory_summary(formatter)
    assert formatter.calls == 2
    assert after == formatter.format(state)  # the recomputed rendering is the fresh one
    state.memory_summary(formatter)
    assert formatter.calls == 3  # (the check above called format once more)
    assert after is not before


def test_debug_only_changes_keep_the_cached_rendering() -> None:
    state, formatter = busy_state(), CountingFormatter()
    state.memory_summary(formatter)
    state.record_model_response("thinking out loud")
    state.memory_summary(formatter)
    assert formatter.calls == 1


# --- compression: stage 1, rules --------------------------------------------------------


def crowded_state(n: int = 12) -> PhasedState:
    state = PhasedState()
    for i in range(n):
        state.advance()
        state.record_attempt(f"attempt {i}", f"outcome {i}", success=i % 2 == 0)
        state.record_tool_result("read_file", f'{{"path": "f{i}.py"}}', f"body {i}")
        state.record_file_content(f"f{i}.py", f"content {i}")
        state.add_decision(f"decision number {i} about module {chr(97 + i)}")
        state.add_learning(f"learning {chr(97 + i) * 3} is distinct")
        state.record_model_response(f"response {i}")
    return state


def test_rules_keep_the_newest_entries_of_each_category_and_digest_the_rest() -> None:
    state = crowded_state(12)
    config = MemorySettings(
        keep_attempts=3,
        keep_tool_results=2,
        keep_modified_files=4,
        keep_decisions=5,
        keep_learnings=6,
        keep_model_responses=1,
    )
    moved = apply_rules(state, config)
    facts, long_term = state.memory.facts, state.memory.long_term
    assert [a.action for a in facts.attempts] == ["attempt 9", "attempt 10", "attempt 11"]
    assert [r.output for r in facts.tool_results] == ["body 10", "body 11"]
    assert [s.path for s in facts.modified_files] == ["f8.py", "f9.py", "f10.py", "f11.py"]
    assert len(long_term.decisions) == 5 and len(long_term.learnings) == 6
    assert [r.text for r in state.memory.debug.model_responses] == ["response 11"]
    assert moved == 9 + 10 + 8 + 7 + 6 + 11
    digests = long_term.earlier_work
    assert len(digests) == moved - 11  # debug-only responses are dropped, not digested
    dated = [d for d in digests if d.startswith("step ")]
    assert dated[0] == "step 1: attempt 0 -> ok"  # learnings carry no step: they come first
    assert "step 2: attempt 1 -> failed: outcome 1" in digests
    assert 'step 1: read_file({"path": "f0.py"}) ok, 6 characters' in digests
    assert "step 1: modified f0.py" in digests
    assert all("response" not in d for d in digests)
    steps = [int(d.split(":")[0].split()[1]) for d in dated]
    assert steps == sorted(steps)  # oldest first


def test_rules_leave_categories_under_their_limit_untouched() -> None:
    state = crowded_state(3)
    attempts, decisions = state.memory.facts.attempts, state.memory.long_term.decisions
    formatter = CountingFormatter()
    state.memory_summary(formatter)
    assert apply_rules(state, MemorySettings()) == 0
    assert state.memory.facts.attempts is attempts
    assert state.memory.long_term.decisions is decisions
    state.memory_summary(formatter)
    assert formatter.calls == 1


# --- compression: stage 2, the model ----------------------------------------------------


async def test_the_model_summarises_digests_once_they_pass_the_threshold() -> None:
    state = crowded_state(12)
    config = MemorySettings(keep_attempts=2, summarise_above_chars=100)
    apply_rules(state, config)
    digests = state.memory.long_term.earlier_work
    fake = FakeSummariser()
    assert await summarise_earlier(state, config, fake)
    assert len(fake.prompts) == 1
    assert fake.prompts[0].startswith(SUMMARY_REQUEST)
    assert all(d in fake.prompts[0] for d in digests)
    assert state.memory.long_term.earlier_summary == fake.answer
    assert state.memory.long_term.earlier_work == ()
    assert fake.answer in state.memory_summary(DEFAULT_FORMATTER).text


async def test_the_previous_summary_is_folded_into_the_next() -> None:
    state = PhasedState()
    state.memory.long_term.earlier_summary = "OLD SUMMARY"
    state.memory.long_term.earlier_work = tuple(f"step {i}: ran thing {i}" for i in range(40))
    fake = FakeSummariser("NEW SUMMARY")
    assert await summarise_earlier(state, MemorySettings(summarise_above_chars=10), fake)
    assert "OLD SUMMARY" in fake.prompts[0]
    assert state.memory.long_term.earlier_summary == "NEW SUMMARY"


async def test_digests_under_the_threshold_are_not_sent_to_the_model() -> None:
    state = PhasedState()
    state.memory.long_term.earlier_work = ("step 1: short",)
    fake = FakeSummariser()
    assert not await summarise_earlier(state, MemorySettings(summarise_above_chars=1_000), fake)
    assert fake.prompts == []
    assert state.memory.long_term.earlier_work == ("step 1: short",)


async def test_an_empty_summary_keeps_the_digests() -> None:
    state = PhasedState()
    state.memory.long_term.earlier_work = tuple(f"step {i}: x" for i in range(50))
    assert not await summarise_earlier(
        state, MemorySettings(summarise_above_chars=10), FakeSummariser("   ")
    )
    assert len(state.memory.long_term.earlier_work) == 50


# --- compression: stage 3, near-duplicates ----------------------------------------------


def test_near_duplicates_go_and_the_newest_of_each_group_stays() -> None:
    state = PhasedState()
    for text in [
        "Tests live in tests/unit",
        "the CLI is built with Typer",
        "tests live in tests/unit.",
        "  TESTS live   in tests/unit ",
    ]:
        state.add_learning(text)
    state.add_decision("pin the parser to version 2")
    state.add_decision("build the wheel with hatch")
    state.advance()
    state.add_decision("Pin the parser to version 2!")
    state.add_milestone("parser fixed")
    state.memory.long_term.earlier_work = ("step 1: ran pytest -> ok", "step 7: ran pytest -> ok")
    removed = remove_duplicates(state, MemorySettings())
    long_term = state.memory.long_term
    assert long_term.learnings == ("the CLI is built with Typer", "  TESTS live   in tests/unit ")
    assert [d.text for d in long_term.decisions] == [
        "build the wheel with hatch",
        "Pin the parser to version 2!",
    ]
    assert long_term.earlier_work == ("step 7: ran pytest -> ok",)
    assert long_term.milestones == (Milestone(1, "parser fixed"),)
    assert removed == 4


def test_similarity_threshold_decides_what_counts_as_a_duplicate() -> None:
    a = "always use the fast path for small inputs in the parser"
    b = "always use the fast path for large inputs in the parser"
    assert near_duplicate(a, b, similarity=0.9)
    assert not near_duplicate(a, b, similarity=0.99)
    assert near_duplicate("Error: at line 10.", "error at LINE 10")
    assert not near_duplicate("edit f1.py", "edit f2.py")  # a different file is not a duplicate
    assert not near_duplicate("install numpy", "remove the cache directory")


@given(st.lists(st.text(max_size=30), max_size=12))
@settings(max_examples=80, deadline=None)
def test_deduplication_keeps_order_and_leaves_no_pair_of_duplicates(items: list[str]) -> None:
    kept = drop_near_duplicates(items, lambda s: s)
    assert set(kept) <= set(items)
    positions = [max(i for i, x in enumerate(items) if x == k) for k in kept]
    assert positions == sorted(positions)
    for i, x in enumerate(kept):
        for y in kept[i + 1 :]:
            assert not near_duplicate(x, y)


# --- compression: the pipeline ----------------------------------------------------------


async def test_compression_below_its_threshold_does_nothing() -> None:
    state = crowded_state(12)
    fake = FakeSummariser()
    report = await compress(state, MemorySettings(compress_above_chars=1_000_000), fake)
    assert not report.changed and fake.prompts == []
    assert len(state.memory.facts.attempts) == 12


async def test_compression_runs_rules_then_the_model_then_deduplication() -> None:
    state = crowded_state(20)
    for _ in range(3):
        state.add_learning("the fixture lives in conftest.py")
    config = MemorySettings(
        compress_above_chars=500, keep_attempts=2, keep_tool_results=2, summarise_above_chars=200
    )
    fake = FakeSummariser("SUMMARY OF EARLIER STEPS")
    report = await compress(state, config, fake)
    assert report.digested > 0 and report.summarised and report.duplicates == 2
    assert report.size_after < report.size_before
    assert len(fake.prompts) == 1 and "attempt 0" in fake.prompts[0]
    assert state.memory.long_term.earlier_summary == "SUMMARY OF EARLIER STEPS"
    assert state.memory.long_term.learnings.count("the fixture lives in conftest.py") == 1
    assert "SUMMARY OF EARLIER STEPS" in state.memory_summary(DEFAULT_FORMATTER).text


async def test_compression_without_a_summariser_keeps_the_digests() -> None:
    state = crowded_state(12)
    report = await compress(state, MemorySettings(keep_attempts=2), None, force=True)
    assert report.digested and not report.summarised
    assert any("attempt 0" in d for d in state.memory.long_term.earlier_work)


async def test_a_failing_summariser_leaves_the_rule_stage_applied() -> None:
    async def broken(text: str) -> str:
        raise RuntimeError("model unavailable")

    state = crowded_state(12)
    config = MemorySettings(keep_attempts=2, summarise_above_chars=10)
    with pytest.raises(RuntimeError):
        await compress(state, config, broken, force=True)
    assert len(state.memory.facts.attempts) == 2
    assert state.memory.long_term.earlier_work


# --- errors -----------------------------------------------------------------------------


def test_error_signatures_ignore_line_numbers_and_addresses() -> None:
    one = "Traceback\n  File 'a.py', line 3\nValueError: bad row 7 at 0x7f3a"
    two = "Traceback\n  File 'a.py', line 90\nValueError: bad row 12 at 0x10b2"
    assert error_signature(one) == error_signature(two)
    assert error_signature(one) != error_signature("KeyError: 'name'")


def test_last_error_keeps_the_tail_of_stderr() -> None:
    stderr = "a" * 5_000 + "\nKeyError: 'x'"
    error = LastError.from_failure("boom", stderr=stderr, tail_chars=100)
    assert len(error.stderr_tail) == 100 and error.stderr_tail.endswith("KeyError: 'x'")
    assert error.signature == error_signature("KeyError: 'x'")


# --- persistence ------------------------------------------------------------------------


def test_the_state_round_trips_through_json() -> None:
    state = busy_state()
    state.memory.long_term.earlier_work = ("step 0: something",)
    state.memory.long_term.earlier_summary = "summary"
    restored = PhasedState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored == state
    rendered = state.memory_summary(DEFAULT_FORMATTER).text
    assert restored.memory_summary(DEFAULT_FORMATTER).text == rendered
    assert restored.memory.debug.model_responses == state.memory.debug.model_responses


def test_a_state_saved_before_the_decision_log_existed_still_loads() -> None:
    data = busy_state().to_dict()
    del data["memory"]["debug"]["decisions"]
    restored = PhasedState.from_dict(json.loads(json.dumps(data)))
    assert restored.memory.debug.decisions == ()
    assert restored.memory.debug.model_responses[0].text.endswith(SECRET)


def test_an_unknown_state_format_is_refused_with_a_reason() -> None:
    data = PhasedState().to_dict() | {"format": 99}
    with pytest.raises(ValueError, match="format 99 is not supported"):
        PhasedState.from_dict(data)


texts = st.text(max_size=20)
steps = st.integers(min_value=0, max_value=1_000)
states = st.builds(
    PhasedState,
    step=steps,
    phase=texts,
    last_error=st.none() | st.builds(LastError, texts, texts, texts, texts),
    memory=st.builds(
        Memory,
        facts=st.builds(
            lambda created, attempts, tools, files: replace(
                PhasedState().memory.facts,
                created_files=tuple(created),
                attempts=tuple(attempts),
                tool_results=tuple(tools),
                modified_files=tuple(files),
            ),
            st.lists(texts, max_size=3),
            st.lists(st.builds(Attempt, steps, texts, texts, st.booleans(), texts), max_size=3),
            st.lists(st.builds(ToolRecord, steps, texts, texts, texts, st.booleans()), max_size=3),
            st.lists(st.builds(FileSnapshot, steps, texts, texts), max_size=3),
        ),
    ),
    artifacts=st.builds(Artifacts, texts, texts, st.none() | st.booleans()),
)


@given(
    states,
    st.lists(texts, max_size=3),
    st.lists(texts, max_size=3),
    st.lists(st.builds(DecisionNote, steps, texts, texts), max_size=3),
)
@settings(max_examples=60, deadline=None)
def test_any_state_round_trips(
    state: PhasedState, learnings: list[str], plan: list[str], decisions: list[DecisionNote]
) -> None:
    state.memory.long_term.learnings = tuple(learnings)
    state.memory.long_term.decisions = tuple(decisions)
    state.memory.long_term.plan = tuple(plan)
    state.memory.debug.model_responses = tuple(ResponseNote(1, "PLAN", t) for t in learnings)
    state.memory.debug.decisions = tuple(StepDecision(2, "act", t) for t in plan)
    data = json.loads(json.dumps(state.to_dict()))
    restored = PhasedState.from_dict(data)
    assert restored == state
    assert restored.to_dict() == data
