"""/fork's errors speak of the app's command, not of the command line's flags."""

from __future__ import annotations

from pathlib import Path

from journeyman.tui.slash import in_app_words
from journeyman.tui.widgets import Note
from tests.fakes.agents import call, finish, turn
from tests.tui.harness import finish_turn, scripted_app, submit


async def test_a_step_out_of_range_is_said_in_the_apps_words(tmp_path: Path) -> None:
    script = [turn(call("write_file", "w1", path="a.txt", content="one\n")), finish("wrote a")]
    app, _ = scripted_app(tmp_path, script)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write a.txt")
        await finish_turn(pilot)
        await submit(pilot, "/fork 999")
        said = str(list(app.query(Note))[-1].render())
    assert said.startswith("/fork: the step must be between 0 and ")
    assert "--at-step" not in said


def test_a_suggested_step_becomes_a_fork_command() -> None:
    message = "Fork at its last step (--at-step 4) to continue."
    assert in_app_words(message) == "Fork at its last step (/fork 4) to continue."
