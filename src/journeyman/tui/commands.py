"""The slash commands: what exists, how each is written, and how a typed line is split."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str
    help: str
    asks: bool = False
    """It waits on the user's answer in a dialog (so it must not hold the app's input)."""


COMMANDS = (
    SlashCommand("undo", "/undo [turn|file PATH]", "undo the last change, turn, or file"),
    SlashCommand("diff", "/diff", "the session's pending changes as a diff"),
    SlashCommand("budget", "/budget", "budget use, limits and enforcement level"),
    SlashCommand("extend", "/extend", "ask for a budget extension now", asks=True),
    SlashCommand("cost", "/cost", "tokens and cost of the session"),
    SlashCommand("mode", "/mode react|phased|plan", "the loop mode of the next message"),
    SlashCommand("plan", "/plan [off]", "plan mode: read-only until you approve the plan"),
    SlashCommand("sessions", "/sessions", "the stored sessions of this workspace"),
    SlashCommand("resume", "/resume ID", "switch to a stored session"),
    SlashCommand("fork", "/fork STEP", "roll back to STEP; the next message starts a fork"),
    SlashCommand("rules", "/rules", "the instruction files in the system prompt"),
    SlashCommand("mcp", "/mcp", "the MCP servers of this app"),
    SlashCommand("lsp", "/lsp", "the language servers of this app"),
    SlashCommand("model", "/model NAME", "the model of the next message"),
    SlashCommand("compact", "/compact", "compact the context before the next turn"),
    SlashCommand("help", "/help", "this list"),
    SlashCommand("quit", "/quit", "leave (the session is saved)"),
)
BY_NAME = {command.name: command for command in COMMANDS}
COMPLETIONS = [f"/{c.name}" for c in COMMANDS] + [
    "/undo turn",
    "/undo file ",
    "/mode react",
    "/mode phased",
    "/mode plan",
    "/plan off",
]
"""What the prompt offers to complete (accept with the right arrow)."""


def parse(line: str) -> tuple[str, list[str]] | None:
    """("undo", ["file", "a.py"]) for "/undo file a.py"; None when the line is a message."""
    stripped = line.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return None
    name, *args = stripped[1:].split()
    return name.lower(), args


def help_text() -> str:
    width = max(len(c.usage) for c in COMMANDS)
    return "\n".join(f"{c.usage.ljust(width)}  {c.help}" for c in COMMANDS)


def unknown(name: str) -> str:
    names = " ".join(f"/{c.name}" for c in COMMANDS)
    return f"unknown command /{name}; the commands are: {names} (/help explains them)"
