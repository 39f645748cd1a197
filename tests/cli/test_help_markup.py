"""Help texts survive rich markup: a bracketed word in an option's help (an extra such as
`journeyman[otel]`, a `[y]es` choice) is shown, not taken for a style and dropped."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from journeyman.cli.app import app
from tests.support.cli import clean_env, jm

COMMANDS_WITH_OTEL = [["run"], ["resume"], ["chat"], ["batch"], ["acp"], ["mcp", "serve"]]


def one_line(text: str) -> str:
    """Help output without its panel borders, its words joined by single spaces."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_run_help_names_the_otel_extra() -> None:
    done = jm("run", "--help", env=clean_env(COLUMNS="400", TERM="dumb"), timeout=60)
    assert done.returncode == 0, done.stderr
    shown = one_line(done.stdout)
    assert "Needs journeyman[otel]." in shown
    assert "Needs journeyman." not in shown


@pytest.mark.parametrize("command", COMMANDS_WITH_OTEL, ids=" ".join)
def test_every_otel_flag_names_the_extra(command: list[str]) -> None:
    done = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    assert "journeyman[otel]" in one_line(done.output)
