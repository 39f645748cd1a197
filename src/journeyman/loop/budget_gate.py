"""The kernel's budget gate: turns the economics verdict into events, nudges, extension
requests and capacity stops. Its memory (last level, last nudge, extension asked) is part of
the checkpoint so a resumed run behaves as the uninterrupted one would."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict
from typing import Any

from journeyman.core import events as ev
from journeyman.core.errors import BudgetExhaustedError, ConfigurationError
from journeyman.core.result import FinishReason
from journeyman.economics.approval import ExtensionApprover
from journeyman.economics.budget import (
    BudgetKind,
    BudgetStatus,
    EnforcementLevel,
    ExecutionEconomics,
)
from journeyman.loop import prompts
from journeyman.loop.config import AgentConfig
from journeyman.loop.observer import Nudge

log = logging.getLogger(__name__)

CAPACITY_REASONS = {
    BudgetKind.TOKENS: FinishReason.MAX_TOKENS,
    BudgetKind.USD: FinishReason.MAX_BUDGET_USD,
    BudgetKind.ITERATIONS: FinishReason.MAX_ITERATIONS,
    BudgetKind.DURATION: FinishReason.MAX_DURATION,
}


class BudgetGate:
    def __init__(
        self,
        economics: ExecutionEconomics,
        config: AgentConfig,
        approver: ExtensionApprover,
        emit: Callable[[ev.Event], None],
        priced: Callable[[], str],
        paused: Callable[[], AbstractAsyncContextManager[None]] = contextlib.nullcontext,
    ) -> None:
        self.economics = economics
        self.config = config
        self.approver = approver
        self.emit = emit
        self._model_name = priced
        self.paused = paused
        """Holds the lifecycle in PAUSED while the approver decides."""
        self.last_level = EnforcementLevel.NONE
        self.last_nudge: str | None = None
        self.extension_asked_for: dict[str, Any] | None = None

    async def check(self) -> tuple[BudgetStatus, list[Nudge]]:
        """The verdict for this turn (after an extension, if one was granted) and its nudges."""
        status = self.economics.check()
        extendable = status.driver in (BudgetKind.TOKENS, BudgetKind.USD)
        if (status.stop or status.text_only) and extendable and await self._try_extension(status):
            status = self.economics.check()
        self.emit(
            ev.BudgetUpdated(
                level=status.level.value,
                previous_level=self.last_level.value,
                fraction=round(status.fraction, 4),
                driver=status.driver.value if status.driver else None,
                incremental_tokens=self.economics.incremental_tokens,
                total_tokens=self.economics.total_tokens,
                cost_usd=self.economics.cost_usd,
                text_only=status.text_only,
                max_tool_calls=status.max_tool_calls,
            )
        )
        self.last_level = status.level
        nudges: list[Nudge] = []
        if status.nudge and status.nudge != self.last_nudge and not status.stop:
            self.last_nudge = status.nudge
            nudges.append(("budget", status.nudge))
        if status.text_only:
            nudges.append(("budget", prompts.TEXT_ONLY))
        return status, nudges

    async def _try_extension(self, status: BudgetStatus) -> bool:
        """Ask the approver once per limit setting; True when the budget was extended."""
        limits = asdict(self.economics.limits)
        if self.extension_asked_for == limits:
            return False
        self.extension_asked_for = limits
        share = self.config.extension_share
        add_tokens = int((self.config.max_total_tokens or 0) * share)
        add_usd = (self.config.max_budget_usd or 0.0) * share
        reason = f"the {status.driver.noun if status.driver else ''} budget is nearly spent"
        request = self.economics.request_extension(
            additional_tokens=add_tokens, additional_usd=add_usd, reason=reason
        )
        if not request.can_request:
            self.emit(ev.ExtensionDecided(False, add_tokens, add_usd, request.refusal or ""))
            return False
        self.emit(
            ev.ExtensionRequested(
                add_tokens, add_usd, reason, request.extensions_granted, request.max_extensions
            )
        )
        try:
            async with self.paused():
                granted = bool(await self.approver(request))
        except Exception:  # an approver failure is a denial, never a crash
            log.exception("budget extension approver failed")
            granted = False
        self.emit(ev.ExtensionDecided(granted, add_tokens, add_usd))
        if granted:
            self.economics.record_extension(add_tokens, add_usd)
            self.last_nudge = None
        return granted

    def hard_limit(self) -> BudgetKind | None:
        """The configured iteration, USD or duration limit this run has reached, in every
        budget mode (the budget modes govern only the token budget and the nudges)."""
        eco = self.economics
        limits = eco.limits
        if limits.max_iterations is not None and eco.iterations >= limits.max_iterations:
            return BudgetKind.ITERATIONS
        spent = eco.cost_usd
        if limits.max_usd is not None and spent is not None and spent >= limits.max_usd:
            return BudgetKind.USD
        if limits.max_duration_s is not None and eco.elapsed_s >= limits.max_duration_s:
            return BudgetKind.DURATION
        return None

    def exhausted(self, kind: BudgetKind | None) -> BudgetExhaustedError:
        """The error that ends the run at the `kind` limit."""
        reason = CAPACITY_REASONS.get(kind or BudgetKind.TOKENS, FinishReason.MAX_TOKENS)
        return BudgetExhaustedError(
            self.capacity_message(kind), details={"finish_reason": reason.value}
        )

    def require_price(self, priced: bool) -> None:
        """Refuse a USD limit that cannot be enforced because the model's price is unknown."""
        if self.config.max_budget_usd is not None and not priced:
            raise ConfigurationError(
                f"the price of {self._model_name()} is unknown, so the "
                f"${self.config.max_budget_usd:g} limit cannot be enforced; give its price in "
                "US dollars per million input and output tokens with --price-per-mtok IN,OUT "
                "(config: price_per_mtok = [IN, OUT]), or drop --max-budget-usd"
            )

    def capacity_message(self, kind: BudgetKind | None) -> str:
        eco, cfg = self.economics, self.config
        match kind:
            case BudgetKind.TOKENS:
                return (
                    f"used {eco.incremental_tokens:,} of {eco.limits.max_total_tokens:,} "
                    "budgeted tokens"
                )
            case BudgetKind.USD:
                return f"spent ${eco.cost_usd or 0:.4f} of the ${eco.limits.max_usd:g} limit"
            case BudgetKind.DURATION:
                return f"ran {eco.elapsed_s:.0f} s of the {cfg.max_duration_s:g} s limit"
            case _:
                return f"reached the limit of {eco.limits.max_iterations} iterations"

    def snapshot(self) -> dict[str, Any]:
        return {
            "last_level": self.last_level.value,
            "last_nudge": self.last_nudge,
            "extension_asked_for": self.extension_asked_for,
        }

    def restore(self, data: dict[str, Any]) -> None:
        self.last_level = EnforcementLevel(data["last_level"])
        self.last_nudge = data["last_nudge"]
        self.extension_asked_for = data["extension_asked_for"]


def capacity_reason(status: BudgetStatus | None) -> FinishReason:
    """The finish reason for the limit that drives `status`."""
    driver = status.driver if status is not None else None
    return CAPACITY_REASONS.get(driver or BudgetKind.TOKENS, FinishReason.MAX_TOKENS)
