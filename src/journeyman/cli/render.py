"""Output of `journeyman run`: compact text (rich), a final JSON result, or a JSON event stream."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from journeyman.cli.live_status import RunProgress, StatusLine, draws_live_lines, wants_colour
from journeyman.cli.options import OutputFormat
from journeyman.context.test_results import TestTally
from journeyman.core import events as ev
from journeyman.core.display import printable, printable_json
from journeyman.core.events import event_to_dict
from journeyman.core.result import CheckEvidence, RunResult
from journeyman.core.text import one_line
from journeyman.economics.usage_log import ModelUsage
from journeyman.loop.verdict import CHECK_CALL_PREFIX
from journeyman.session.redact import Redactor


def _one_line(text: str, limit: int = 120) -> str:
    return one_line(text, limit)


def _last_output_line(content: str) -> str:
    """A command's last line of output (where test runners put their verdict), without the
    bracketed notes the tool appends; the whole text when there is no such line."""
    lines = [line for line in content.splitlines() if line.strip()]
    while lines and lines[-1].startswith("["):
        lines.pop()
    return lines[-1] if lines else content


def _format_args(arguments: dict[str, Any]) -> str:
    parts = []
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        parts.append(f"{key}={_one_line(str(shown), 60)}")
    return " ".join(parts)


def format_cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


class Renderer:
    """Turns events into output in one of the three formats."""

    def __init__(
        self, fmt: OutputFormat, console: Console | None = None, *, live_status: bool = False
    ) -> None:
        self.fmt = fmt
        self.console = console or Console(highlight=False, soft_wrap=True)
        self._redact = Redactor()
        self._streaming_text = False
        self._budget_shown: tuple[str, int] | None = None
        self.sandbox: str | None = None
        """Where commands run, shown in the header line of the text output."""
        self.tool_mode: str | None = None
        """How tools reach the model (OpenAI-compatible servers), shown under the header."""
        self.ignored_settings: list[dict[str, Any]] = []
        """Settings the trust rules left out, added to the JSON result under that name."""
        self.errors_shown: set[str] = set()
        """The error messages printed in the text output (so the exit line need not repeat
        them on the same screen)."""
        self.progress = RunProgress()
        """What the run is doing, for the live status line."""
        self.status_line: StatusLine | None = None
        """The live status line under the text output (`live_status`, on a terminal only)."""
        if live_status and fmt is OutputFormat.TEXT and draws_live_lines(self.console.file):
            self.status_line = StatusLine(
                self.console.file, self.progress.text, colour=wants_colour()
            )

    def _safe(self, text: str) -> str:
        """Data (model text, tool output, paths) as it may appear in the text output: secrets
        redacted, terminal controls shown as escapes, rich markup escaped."""
        return escape(printable(self._redact(text)))

    def __call__(self, event: ev.Event) -> None:
        self._show(event)
        if self.status_line is not None:
            self.status_line.redraw()  # at once, not at the next tick

    def _show(self, event: ev.Event) -> None:
        if self.status_line is not None:
            self._follow(self.status_line, event)
        if isinstance(event, ev.ErrorOccurred) and event.details.get("usage_missing"):
            # said once a run on stderr, whatever the format: the cost shown is a worst case
            sys.stderr.write(f"journeyman: warning: {printable(self._redact(event.message))}\n")
            sys.stderr.flush()
            if self.fmt is not OutputFormat.STREAM_JSON:
                return
        if isinstance(event, ev.RunStarted):
            if event.tool_mode is None and self.tool_mode:
                event = dataclasses.replace(event, tool_mode=self.tool_mode)
            self.tool_mode = event.tool_mode
        if self.fmt is OutputFormat.STREAM_JSON:
            line = json.dumps(event_to_dict(event), ensure_ascii=False, default=str)
            sys.stdout.write(printable_json(self._redact(line)) + "\n")
            sys.stdout.flush()
        elif self.fmt is OutputFormat.TEXT:
            self._text(event)

    def _follow(self, line: StatusLine, event: ev.Event) -> None:
        """The status line's text follows the run; it is hidden while a question waits for
        the user's answer (the lifecycle is paused then)."""
        self.progress.follow(event)
        line.start()
        if isinstance(event, ev.StateChanged):
            if event.to_state == "paused":
                line.hold()
            elif event.from_state == "paused":
                line.release()

    def close(self) -> None:
        """Erase the live status line, if one is drawn, and stop redrawing it (the run ended
        or was interrupted)."""
        if self.status_line is not None:
            self.status_line.close()

    def _text(self, event: ev.Event) -> None:
        out = self.console
        match event:
            case ev.RunStarted():
                out.print(
                    f"[bold]journeyman[/] {self._safe(event.provider)}:{self._safe(event.model)} "
                    f"in {self._safe(event.workspace)}  [dim]session {event.session_id}[/]"
                )
                if self.sandbox:
                    out.print(f"[dim]sandbox: {self._safe(self.sandbox)}[/]")
                if self.tool_mode:
                    out.print(f"[dim]tools: {self._safe(self.tool_mode)}[/]")
            case ev.TextDelta():
                self._streaming_text = True
                out.print(self._safe(event.text), end="")
            case ev.ModelResponseReceived():
                if self._streaming_text:
                    if not (self.status_line and self.status_line.ended_a_row):
                        out.print()
                    self._streaming_text = False
                elif event.text.strip():
                    out.print(f"[cyan]{self._safe(event.text.strip())}[/]")
            case ev.ToolCallStarted() if event.call.id.startswith(CHECK_CALL_PREFIX):
                command = str(event.call.arguments.get("command", ""))
                out.print(f"[bold]→ check by journeyman[/] {self._safe(_one_line(command, 120))}")
            case ev.ToolCallStarted():
                out.print(
                    f"[bold]→ {self._safe(event.call.name)}[/] "
                    f"{self._safe(_format_args(event.call.arguments))}"
                )
            case ev.ToolResultReceived():
                result = event.result
                code = result.metadata.get("exit_code")
                if result.is_error:
                    mark = "[red]✗[/]"
                elif isinstance(code, int) and code != 0:
                    mark = f"[yellow]exit {code}[/]"  # the command ran, and said no
                else:
                    mark = "[green]✓[/]"
                shown = _last_output_line(result.content) if code is not None else result.content
                out.print(f"  {mark} [dim]{self._safe(_one_line(shown))}[/]")
                for warning in result.metadata.get("warnings") or ():
                    out.print(f"  [yellow]! warning: {self._safe(str(warning))}[/]")
            case ev.ErrorOccurred():
                self.errors_shown.add(event.message)
                out.print(f"[yellow]! {self._safe(event.category)}: {self._safe(event.message)}[/]")
            case ev.NudgeInjected():
                out.print(f"[magenta]» {self._safe(event.message)}[/]")
            case ev.BudgetUpdated():
                self._budget_line(event)
            case ev.ExtensionRequested():
                out.print(f"[yellow]$ asking for a budget extension: {self._safe(event.reason)}[/]")
            case ev.ExtensionDecided():
                verdict = "granted" if event.granted else "denied"
                why = f" ({self._safe(event.reason)})" if event.reason else ""
                out.print(f"[yellow]$ extension {verdict}{why}[/]")
            case ev.ContextCompacted():
                out.print(
                    f"[magenta]» context compacted ({event.reason}): "
                    f"~{event.tokens_before:,} → ~{event.tokens_after:,} tokens "
                    f"by {', '.join(event.stages)}[/]"
                )
            case ev.CheckFixed():
                self._check_fixed(event)
            case ev.RunFinished():
                self._summary(event.result)
            case _:
                pass

    def _check_fixed(self, event: ev.CheckFixed) -> None:
        if event.command is None:
            self.console.print(
                "[yellow]! no check: none given (--verify) and no test command found; the run "
                "cannot end verified (--verify CMD names one, --no-verify waives it)[/]"
            )
            return
        before = ""
        if event.before is not None:
            before = f"; before the run: {_check_outcome(event.before)}"
        self.console.print(
            f"[dim]check: {self._safe(_one_line(event.command, 120))} "
            f"(from {self._safe(event.source)}){self._safe(before)}[/]"
        )

    def _budget_line(self, event: ev.BudgetUpdated) -> None:
        """A compact line whenever the level changes or another tenth of the budget is used."""
        if event.driver is None:
            return
        key = (event.level, int(event.fraction * 10))
        if key == self._budget_shown:
            return
        self._budget_shown = key
        colour = {"none": "dim", "warn": "yellow", "restricted": "yellow"}.get(event.level, "red")
        extras = " · text only" if event.text_only else ""
        if event.max_tool_calls is not None:
            extras += f" · {event.max_tool_calls} tool call(s) per turn"
        self.console.print(
            f"[{colour}]budget {event.fraction:.0%} of {event.driver} · "
            f"{event.incremental_tokens:,} tokens · {format_cost(event.cost_usd)} · "
            f"level {event.level}{extras}[/]"
        )

    def _summary(self, result: RunResult) -> None:
        usage = result.usage
        colour = "green" if result.success else "red"
        self.console.print(
            f"[{colour}]■ {result.finish_reason.value}[/] after {result.iterations} turns, "
            f"{result.tool_calls_made} tool calls, {result.duration_s:.1f} s"
        )
        self.console.print(
            f"  tokens: {usage.input_tokens} in, {usage.output_tokens} out, "
            f"{usage.cache_read_tokens} cache read, {usage.cache_write_tokens} cache write; "
            f"cost {format_cost(result.cost_usd)}"
        )
        if result.final_text:
            self.console.print(f"  {self._safe(result.final_text.strip())}")
        self._evidence(result)
        if result.store_path is None:
            self.console.print(
                "  [dim]no session kept: no model call was answered; "
                "run the same command again once the setting is fixed[/]"
            )
            return
        self.console.print(
            f"  [dim]session {result.session_id} — `journeyman sessions show "
            f"{result.session_id}` to inspect, `journeyman resume {result.session_id}` to go on[/]"
        )

    def final(self, result: RunResult) -> None:
        if self.fmt is OutputFormat.JSON:
            data = result.to_dict()
            if self.tool_mode:
                data["tool_mode"] = self.tool_mode
            if self.ignored_settings:
                data["ignored_settings"] = self.ignored_settings
            document = json.dumps(data, indent=2, ensure_ascii=False, default=str)
            sys.stdout.write(printable_json(self._redact(document)) + "\n")

    def _evidence(self, result: RunResult) -> None:
        """What the harness saw: the check it ran, the files changed, the calls refused."""
        out = self.console
        check = result.verification
        if check is not None:
            self._receipt(check, result)
        elif result.files_changed and result.success:
            out.print("  check: none ran (no check command known, or --no-verify)")
        if result.files_changed:
            shown = ", ".join(result.files_changed[:8])
            more = len(result.files_changed) - 8
            more_text = f" and {more} more" if more > 0 else ""
            out.print(
                f"  files changed: {self._safe(shown)}{more_text} "
                f"[dim](`journeyman diff` to see them)[/]"
            )
        attempts = Counter(result.refused_calls)  # a call refused again and again: one line
        for refused, times in attempts.items():
            target = f"({refused.argument})" if refused.argument else ""
            again = f" ({times} times)" if times > 1 else ""
            out.print(
                f"  [red]refused:[/] {self._safe(refused.tool + _one_line(target, 80))}{again} — "
                f"{self._safe(_one_line(refused.reason, 160))}"
            )

    def _receipt(self, check: CheckEvidence, result: RunResult) -> None:
        """The check's receipt: command, outcome before and after, tree, test changes."""
        out = self.console
        if check.not_run:
            ended = f"not run ({check.not_run})"
        elif check.timed_out:
            ended = f"timed out after {check.timeout_s:g} s"
        else:
            ended = _check_outcome({"exit_code": check.exit_code, "tests": check.tests})
        if check.before is not None:
            ended = f"{_check_outcome(check.before)} before → {ended}"
        colour = "green" if check.passed else "red"
        if not check.after_last_change:
            when = "BEFORE later changes"
        else:
            when = "on the final tree" if result.files_changed else "no file changed"
        out.print(
            f"  check: [{colour}]{self._safe(check.command)} → {self._safe(ended)}[/], {when}, "
            f"{check.duration_s:.1f} s"
        )
        if check.problem not in (None, "failed"):
            out.print(f"    [red]{self._safe(PROBLEM_NAMES.get(check.problem or '', ''))}[/]")
        for change in check.test_changes:
            mark = "[dim]new test[/]" if change.get("allowed") else "[red]changed[/]"
            out.print(
                f"    {mark} {self._safe(str(change.get('path')))} "
                f"({self._safe(str(change.get('role')))} {self._safe(str(change.get('change')))})"
            )
        if not check.passed and check.output_tail.strip():
            tail = check.output_tail.strip().splitlines()[-5:]
            for line in tail:
                out.print(f"    [dim]{self._safe(_one_line(line, 160))}[/]")


PROBLEM_NAMES = {
    "no_tests": "no test ran: a check that tests nothing proves nothing",
    "no_summary": "no test summary in the output: nothing shows a test ran",
    "tests_removed": "fewer tests ran than before the run",
    "test_changes": "the tests or their settings were changed by the run",
    "new_tests_interfere": "the old tests pass only together with the new test files",
}


def _check_outcome(record: dict[str, Any]) -> str:
    """ "exit 0, 2 passed" from a check's exit code and test counts."""
    code = record.get("exit_code")
    text = f"exit {code}" if code is not None else "no exit code"
    tests = record.get("tests")
    if isinstance(tests, dict):
        text += f", {TestTally.from_dict(tests).describe()}"
    return text


def usage_table(rows: list[ModelUsage], console: Console | None = None) -> None:
    table = Table(
        "provider", "model", "calls", "input", "output", "cache read", "cache write", "cost"
    )
    for row in rows:
        u = row.usage
        table.add_row(
            row.provider,
            row.model,
            str(row.calls),
            f"{u.input_tokens:,}",
            f"{u.output_tokens:,}",
            f"{u.cache_read_tokens:,}",
            f"{u.cache_write_tokens:,}",
            format_cost(row.cost_usd),
        )
    (console or Console()).print(table)
