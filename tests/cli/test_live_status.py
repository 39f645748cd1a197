"""The live status line of the text output, without a process: what it says as the run's events
arrive (on a fake clock), and how it is drawn and erased on a fake terminal around every other
write to stdout and stderr."""

from __future__ import annotations

import io
import re
import sys

import pytest
from rich.console import Console

from journeyman.cli.live_status import (
    ERASE_LINE,
    RunProgress,
    StatusLine,
    draws_live_lines,
    elapsed_text,
    fit,
)
from journeyman.cli.options import OutputFormat
from journeyman.cli.render import Renderer
from journeyman.core import events as ev
from journeyman.core.messages import ToolCall, ToolResult, Usage
from journeyman.loop.verdict import CHECK_CALL_PREFIX

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeTerminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class FakePipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def response(iteration: int, tokens: tuple[int, int], cost: float | None) -> ev.Event:
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1])
    return ev.ModelResponseReceived(iteration, "", (), usage, cost, "stop", 0.5)


def call(name: str, call_id: str = "c1", **arguments: object) -> ToolCall:
    return ToolCall(call_id, name, dict(arguments))


# ---------------------------------------------------------------- what the line says


def test_the_line_says_thinking_with_the_seconds_of_the_current_call() -> None:
    clock = Clock()
    progress = RunProgress(clock)
    assert progress.text() is None  # nothing before the run
    progress.follow(ev.ModelRequestSent(1, 3, 5))
    clock.now += 12.4
    text = progress.text()
    assert text is not None
    assert re.fullmatch(r". thinking · 12 s · turn 1", text), text


def test_the_line_counts_tokens_and_cost_and_names_the_running_tool() -> None:
    clock = Clock()
    progress = RunProgress(clock)
    progress.follow(ev.ModelRequestSent(2, 3, 5))
    progress.follow(response(2, (1200, 34), 0.0125))
    clock.now += 30  # the next activity counts from its own start
    progress.follow(ev.ToolCallStarted(2, call("run_command", command="pytest -q  tests/")))
    clock.now += 3.2
    expected = "run_command pytest -q tests/ · 3 s · turn 2 · 1,234 tokens · $0.0125"
    assert (progress.text() or "")[2:] == expected
    progress.follow(
        ev.BudgetUpdated("none", "none", 0.1, "tokens", 500, 5000, 0.05)
    )  # the budget's count before the next turn replaces the running sum
    assert progress.text() is not None and "5,000 tokens · $0.0500" in (progress.text() or "")


def test_an_unpriced_model_shows_tokens_without_a_cost() -> None:
    progress = RunProgress(Clock())
    progress.follow(ev.ModelRequestSent(1, 3, 5))
    progress.follow(response(1, (10, 5), None))
    text = progress.text() or ""
    assert "15 tokens" in text and "$" not in text


def test_the_tool_argument_is_short_escaped_and_masked() -> None:
    progress = RunProgress(Clock())
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    command = f"echo \x1b]52;c;Zm9v\x07 {secret} " + "x" * 200
    progress.follow(ev.ToolCallStarted(1, call("run_command", command=command)))
    text = progress.text() or ""
    assert not CONTROL.search(text), repr(text)
    assert "\\x1b" in text  # shown, not obeyed
    assert secret not in text
    label = text.split(" · ")[0]
    assert len(label) < 70 and label.endswith("…")


def test_a_multi_line_argument_stays_on_one_line() -> None:
    progress = RunProgress(Clock())
    progress.follow(ev.ToolCallStarted(1, call("write_file", path="a.py\nb.py", content="x")))
    assert "\n" not in (progress.text() or "")


def test_the_check_and_parallel_calls_are_named() -> None:
    clock = Clock()
    progress = RunProgress(clock)
    check = ToolCall(f"{CHECK_CALL_PREFIX}1", "run_command", {"command": "pytest -q"})
    progress.follow(ev.ToolCallStarted(3, check))
    assert (progress.text() or "")[2:] == "check pytest -q · 0 s"
    progress.follow(ev.ToolResultReceived(3, ToolResult(check.id, "run_command", "ok"), 1))
    progress.follow(ev.ToolCallStarted(3, call("read_file", "r1", path="a.py")))
    clock.now += 5
    progress.follow(ev.ToolCallStarted(3, call("read_file", "r2", path="b.py")))
    assert (progress.text() or "")[2:] == "read_file b.py (+1 more) · 0 s"
    clock.now += 2
    progress.follow(ev.ToolResultReceived(3, ToolResult("r2", "read_file", "..."), 2))
    # the call still running keeps its own seconds
    assert (progress.text() or "")[2:] == "read_file a.py · 7 s"
    progress.follow(ev.ToolResultReceived(3, ToolResult("r1", "read_file", "..."), 7))
    assert (progress.text() or "")[2:] == "working · 0 s"


def test_nothing_shows_once_the_run_finished() -> None:
    progress = RunProgress(Clock())
    progress.follow(ev.ModelRequestSent(1, 3, 5))
    progress.follow(ev.RunFinished.__new__(ev.RunFinished))
    assert progress.text() is None


def test_the_spinner_turns_ten_times_a_second() -> None:
    clock = Clock()
    progress = RunProgress(clock)
    progress.follow(ev.ModelRequestSent(1, 3, 5))
    frames = set()
    for _ in range(10):
        clock.now += 0.1
        frames.add((progress.text() or "?")[0])
    assert len(frames) == 10


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.4, "0 s"), (59.9, "59 s"), (65, "1 min 05 s"), (3725, "1 h 02 min")],
)
def test_elapsed_text(seconds: float, shown: str) -> None:
    assert elapsed_text(seconds) == shown


def test_the_line_never_fills_the_row() -> None:
    assert fit("short", 80) == "short"
    cut = fit("界" * 100, 21)  # wide characters count two columns
    assert cut.endswith("…")
    from rich.cells import cell_len

    assert cell_len(cut) <= 20


@pytest.mark.parametrize(
    ("term", "stream", "expected"),
    [
        ("xterm-256color", FakeTerminal(), True),
        ("dumb", FakeTerminal(), False),  # cannot erase a line there
        ("xterm-256color", FakePipe(), False),
    ],
)
def test_where_a_line_may_be_drawn(
    monkeypatch: pytest.MonkeyPatch, term: str, stream: io.StringIO, expected: bool
) -> None:
    monkeypatch.setenv("TERM", term)
    assert draws_live_lines(stream) is expected


# ---------------------------------------------------------------- drawing and erasing


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> FakeTerminal:
    """A fake terminal that `on_screen` makes stdout and stderr."""
    monkeypatch.setenv("TERM", "xterm-256color")
    return FakeTerminal()


def on_screen(monkeypatch: pytest.MonkeyPatch, screen: FakeTerminal) -> None:
    """stdout and stderr are one terminal, as in an interactive shell (set in the test itself:
    pytest's output capture replaces them again after a fixture's setup)."""
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setattr(sys, "stderr", screen)


def line_on(screen: FakeTerminal, text: list[str | None], colour: bool = False) -> StatusLine:
    status = StatusLine(screen, lambda: text[0], colour=colour, columns=lambda: 40)
    status.start(redraw_thread=False)
    return status


def test_a_write_to_stdout_or_stderr_erases_the_line_first(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    status = line_on(terminal, ["⠋ thinking · 1 s"])
    status.redraw()
    assert terminal.getvalue() == ERASE_LINE + "⠋ thinking · 1 s"
    print("→ read_file a.py")
    sys.stderr.write("journeyman: warning: something\n")
    status.redraw()
    assert terminal.getvalue() == (
        ERASE_LINE + "⠋ thinking · 1 s" + ERASE_LINE + "→ read_file a.py\n"
        "journeyman: warning: something\n" + ERASE_LINE + "⠋ thinking · 1 s"
    )
    status.close()


def test_no_line_below_a_partial_line_until_it_ends(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    """Streamed text and a prompt waiting for its answer leave the cursor mid-row."""
    status = line_on(terminal, ["⠋ thinking · 1 s"])
    sys.stdout.write("The answer is")
    status.redraw()
    sys.stdout.write(" forty-two.")
    status.redraw()
    assert terminal.getvalue() == "The answer is forty-two."
    sys.stdout.write("\n")
    status.redraw()
    assert terminal.getvalue().endswith("forty-two.\n" + ERASE_LINE + "⠋ thinking · 1 s")
    status.close()


def test_streamed_text_that_stopped_mid_row_gets_its_row_ended(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    """The model wrote a sentence, then spends a while on a long tool call: the line shows
    below the sentence; a question on stderr is never cut that way."""
    on_screen(monkeypatch, terminal)
    clock = Clock()
    status = StatusLine(
        terminal, lambda: "⠋ thinking · 4 s", colour=False, columns=lambda: 40, clock=clock
    )
    status.start(redraw_thread=False)
    sys.stdout.write("I will write the file.")
    clock.now += 1.9
    status.redraw()
    assert terminal.getvalue() == "I will write the file."
    clock.now += 0.2
    status.redraw()
    assert terminal.getvalue() == "I will write the file.\n" + ERASE_LINE + "⠋ thinking · 4 s"
    assert status.ended_a_row
    status.close()


def test_a_question_is_never_given_a_row_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    screen, errors = FakeTerminal(), FakeTerminal()  # one terminal, two streams, as in a shell
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setattr(sys, "stderr", errors)
    clock = Clock()
    status = StatusLine(screen, lambda: "⠋ run_command x · 4 s", columns=lambda: 40, clock=clock)
    status.start(redraw_thread=False)
    sys.stderr.write("  Allow it? [y]es, [N]o ")
    clock.now += 60
    status.redraw()
    assert screen.getvalue() == "" and errors.getvalue() == "  Allow it? [y]es, [N]o "
    status.close()


def test_a_question_hides_the_line_until_it_is_answered(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    status = line_on(terminal, ["⠋ edit_file a.py · 0 s"])
    status.redraw()
    status.hold()
    sys.stderr.write("  Allow it? [y]es, [N]o ")
    status.redraw()
    assert terminal.getvalue().endswith(ERASE_LINE + "  Allow it? [y]es, [N]o ")
    status.release()  # answered; the row of the question is not complete yet
    status.redraw()
    assert terminal.getvalue().endswith("[N]o ")
    sys.stderr.write("allowed\n")
    status.redraw()
    assert terminal.getvalue().endswith("[N]o allowed\n" + ERASE_LINE + "⠋ edit_file a.py · 0 s")
    status.close()


def test_closing_erases_the_line_and_gives_the_streams_back(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    status = line_on(terminal, ["⠋ thinking · 1 s"])
    assert sys.stdout is not terminal and sys.stderr is not terminal  # wrapped
    status.redraw()
    status.close()
    assert terminal.getvalue().endswith(ERASE_LINE)
    assert sys.stdout is terminal and sys.stderr is terminal
    status.redraw()  # nothing after closing
    assert terminal.getvalue().endswith(ERASE_LINE)


def test_nothing_to_say_erases_the_line(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    text: list[str | None] = ["⠋ thinking · 1 s"]
    status = line_on(terminal, text)
    status.redraw()
    text[0] = None
    status.redraw()
    status.redraw()
    assert terminal.getvalue() == ERASE_LINE + "⠋ thinking · 1 s" + ERASE_LINE
    status.close()


def test_colour_is_dim_and_the_line_is_cut_to_the_width(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    status = line_on(terminal, ["x" * 100], colour=True)
    status.redraw()
    drawn = terminal.getvalue()
    assert drawn.startswith(ERASE_LINE + "\x1b[2m") and drawn.endswith("…\x1b[0m")
    assert len(drawn) - len(ERASE_LINE + "\x1b[2m\x1b[0m") == 39
    status.close()


def test_a_piped_stderr_is_not_wrapped(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    pipe = FakePipe()
    monkeypatch.setattr(sys, "stderr", pipe)
    status = line_on(terminal, ["⠋ thinking · 1 s"])
    assert sys.stderr is pipe
    status.redraw()
    sys.stderr.write("a note\n")  # not on the screen: the line stays
    assert terminal.getvalue() == ERASE_LINE + "⠋ thinking · 1 s"
    status.close()


def test_a_terminal_that_went_away_stops_the_drawing(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)

    class Gone(FakeTerminal):
        def write(self, text: str) -> int:
            raise OSError(5, "Input/output error")

    gone = Gone()
    status = StatusLine(gone, lambda: "⠋ thinking", columns=lambda: 40)
    status.redraw()  # no exception
    status.redraw()
    assert not status.drawn
    status.close()


# ---------------------------------------------------------------- through the renderer


def renderer_on(terminal: FakeTerminal, live_status: bool = True) -> Renderer:
    console = Console(highlight=False, soft_wrap=True, no_color=True)  # writes to sys.stdout
    return Renderer(OutputFormat.TEXT, console, live_status=live_status)


def test_the_renderer_draws_the_line_between_its_lines(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    monkeypatch.setenv("NO_COLOR", "1")
    renderer = renderer_on(terminal)
    assert renderer.status_line is not None
    renderer(ev.ModelRequestSent(1, 3, 5))
    assert "thinking · 0 s · turn 1" in terminal.getvalue()
    renderer(ev.TextDelta("Let me "))
    renderer(ev.TextDelta("look."))
    renderer(response(1, (100, 20), 0.001))
    renderer(ev.ToolCallStarted(1, call("run_command", command="pytest")))
    renderer(ev.StateChanged("running", "paused"))  # a question: nothing drawn meanwhile
    shown = terminal.getvalue()
    renderer(ev.StateChanged("paused", "running"))
    renderer(ev.ToolResultReceived(1, ToolResult("c1", "run_command", "ok"), 0.2))
    renderer.close()
    assert ERASE_LINE + "\x1b[2m" not in terminal.getvalue()  # NO_COLOR: the line is not dim
    out = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())  # the renderer's own styles
    assert shown.endswith(ERASE_LINE)  # the held line is erased
    # every line the renderer printed starts on a clean row: the live line was erased first
    assert "Let me look.\n" in out
    for printed in ("Let me ", "→ run_command", "  ✓ ok"):
        at = out.index(printed)
        assert out[:at].endswith(ERASE_LINE), (printed, out[:at][-40:])
    assert "run_command pytest · 0 s · turn 1 · 120 tokens · $0.0010" in out
    assert out.endswith(ERASE_LINE)  # closing leaves no line behind
    assert sys.stdout is terminal


def test_a_reply_whose_row_the_line_ended_gets_no_second_row_end(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    renderer = renderer_on(terminal)
    assert renderer.status_line is not None
    clock = Clock()
    renderer.status_line.clock = clock
    renderer(ev.ModelRequestSent(1, 3, 5))
    renderer(ev.TextDelta("I will write the file."))
    clock.now += 3  # the model writes a long tool call now
    renderer.status_line.redraw()
    renderer(response(1, (100, 20), 0.001))
    renderer(ev.ToolCallStarted(1, call("write_file", path="big.py", content="...")))
    renderer.close()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    assert "I will write the file.\n" + ERASE_LINE in plain
    assert "file.\n\n" not in plain.replace(ERASE_LINE, "")  # no empty row after the reply


def test_without_live_status_the_renderer_draws_nothing(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    renderer = renderer_on(terminal, live_status=False)
    assert renderer.status_line is None
    renderer(ev.ModelRequestSent(1, 3, 5))
    renderer.close()
    assert terminal.getvalue() == ""
    assert sys.stdout is terminal


def test_json_output_never_has_the_line(
    monkeypatch: pytest.MonkeyPatch, terminal: FakeTerminal
) -> None:
    on_screen(monkeypatch, terminal)
    for fmt in (OutputFormat.JSON, OutputFormat.STREAM_JSON):
        renderer = Renderer(fmt, live_status=True)
        assert renderer.status_line is None
