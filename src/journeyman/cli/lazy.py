"""Commands whose modules load only when a command line names them.

typer builds every registered command (and so imports its module, with everything that module
imports) before it reads the arguments. `lazy_group` gives a group class that takes its
commands as ``"module:attribute"`` paths instead: `journeyman --version` imports no command
module, `journeyman run --help` imports only `run`'s, and `journeyman --help` (which lists
every command with its summary) imports none when each command comes with its summary
(`LazyCommand`): the first paragraph of its help, which a test holds equal to the real one.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:
    from typer._click import Command, Context, HelpFormatter  # typer's own copy of click


class LazyCommand(NamedTuple):
    """A command of a lazy group: where it is, and what the group's help says of it."""

    target: str
    """``"module:attribute"``: a command function or a `typer.Typer` of subcommands."""
    summary: str
    """The first paragraph of the command's help, as the group's help lists it."""


def lazy_group(targets: Mapping[str, str | LazyCommand]) -> type[TyperGroup]:
    """A `TyperGroup` class (for ``typer.Typer(cls=...)``) whose commands are `targets`: name ->
    ``"module:attribute"`` (or a `LazyCommand`, which the group's help lists by its summary
    without importing it), the attribute a command function or a `typer.Typer` of subcommands.
    Commands registered on the app the usual way are kept, listed first. The app needs a
    callback (`@app.callback()`): without one, typer makes an app of a single registered
    command that command itself, and no group."""
    paths = {name: _target(entry) for name, entry in targets.items()}
    summaries = {
        name: entry.summary for name, entry in targets.items() if isinstance(entry, LazyCommand)
    }

    class LazyGroup(TyperGroup):
        def __init__(self, **attrs: Any) -> None:
            super().__init__(**attrs)
            self._lazy = LazyCommands(dict(self.commands), paths, self._build)
            self.commands = self._lazy
            self._listing = False

        def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
            self._listing = True  # the list of commands needs their summaries, not the commands
            try:
                super().format_help(ctx, formatter)
            finally:
                self._listing = False

        def list_commands(self, ctx: Context) -> list[str]:
            return list(self._lazy)  # names only: typer's own lists (name, command) pairs

        def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
            if self._listing and cmd_name in summaries and not self._lazy.is_built(cmd_name):
                return TyperCommand(cmd_name, help=summaries[cmd_name])
            return super().get_command(ctx, cmd_name)

        def get_help_option(self, ctx: Context) -> TyperOption | None:
            option = super().get_help_option(ctx)
            if option is not None and option.default is None:
                # typer checks an absent flag's None through pydantic (~50 ms to import) but
                # takes a bool as it is: `journeyman run --help` then never loads pydantic
                option.default = False
            return option

        def _build(self, name: str, target: object) -> Command:
            if isinstance(target, typer.Typer):
                command: Command = typer.main.get_group(target)
                command.name = name
            elif callable(target):
                single = typer.Typer(add_completion=False, rich_markup_mode=self.rich_markup_mode)
                single.command(name)(target)
                command = typer.main.get_command(single)
            else:
                raise TypeError(f"command {name!r}: {target!r} is not a function or a Typer")
            _unwrap_help(command)
            return command

    return LazyGroup


def _target(entry: str | LazyCommand) -> str:
    return entry.target if isinstance(entry, LazyCommand) else entry


_LIST_LINE = re.compile(r"\s|[-*•]\s|\d+[.)]\s|\x08")  # \x08: click's no-rewrap mark


def _unwrap_help(command: Command) -> None:
    """Join the hard-wrapped lines of each help paragraph (docstrings are wrapped for the source
    file; typer keeps their line breaks, so help printed at another width came out ragged).
    Paragraphs holding list items or indented lines keep their breaks."""
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(
            paragraph
            if any(_LIST_LINE.match(line) for line in paragraph.splitlines()[1:])
            else " ".join(paragraph.split("\n"))
            for paragraph in paragraphs
        )
    for sub in getattr(command, "commands", {}).values():
        _unwrap_help(sub)


class LazyCommands(MutableMapping[str, "Command"]):
    """The commands of a group: those already built, then those built on first lookup."""

    def __init__(
        self,
        built: dict[str, Command],
        targets: Mapping[str, str],
        build: Callable[[str, object], Command],
    ) -> None:
        self._built = built
        self._targets = targets
        self._build = build

    def is_built(self, name: str) -> bool:
        """Whether the command `name` is built already (its module imported)."""
        return name in self._built

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            path = self._targets[name]  # KeyError: no such command
            module, _, attribute = path.partition(":")
            self._built[name] = self._build(
                name, getattr(importlib.import_module(module), attribute)
            )
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        self._built.pop(name, None)
        if name in self._targets:
            self._targets = {k: v for k, v in self._targets.items() if k != name}

    def __iter__(self) -> Iterator[str]:
        yield from self._built
        yield from (name for name in self._targets if name not in self._built)

    def __len__(self) -> int:
        return len(self._built.keys() | self._targets.keys())

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in self._targets
