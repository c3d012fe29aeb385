"""Time travel: show the store as it will be at a later date (read-only), and what a sweep then would forget."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from memlens.gui import format as fmt
from memlens.gui.dialogs import TimeTravelDialog
from memlens.gui.operations import OpChanges, OpHost, StoreOp, WindowHost
from memlens.gui.operations.lifecycle import preview_sweep
from memlens.sweep import SweepReport

#: The dates the toolbar offers, as offsets from now (None: now).
TRAVEL_CHOICES: tuple[tuple[str, timedelta | None], ...] = (
    ("Now", None),
    ("In 1 day", timedelta(days=1)),
    ("In 1 week", timedelta(days=7)),
    ("In 1 month", timedelta(days=30)),
    ("In 3 months", timedelta(days=91)),
    ("In 1 year", timedelta(days=365)),
)

#: Moving the shown date writes nothing but changes strengths, expiry, so the lists and counts, and the detail.
TIME_MOVED = OpChanges(memory_list=True, counts=True, strengths=True)

_RULE_WORDS = {"ttl": "expired", "weak": "faded below the threshold", "low_value": "old and low-value", "duplicate": "near-duplicates", "capacity": "over capacity"}


def preview_at(host: OpHost, when: datetime) -> StoreOp[SweepReport]:
    """What a sweep at ``when`` would forget (a dry run)."""
    op = preview_sweep(host, at=when, name="travel-preview")
    op.title = "Could not preview that date"
    return op


def forecast(report: SweepReport) -> str:
    """A clause saying what a sweep at the report's date would forget, by rule ("a sweep then would forget 3 memories (2 expired, …)")."""
    if not report.decisions:
        return "a sweep then would forget nothing"
    forget = [d for d in report.decisions if d.action == "forget"]
    by_rule: dict[str, int] = {}
    for d in report.decisions:
        by_rule[d.rule] = by_rule.get(d.rule, 0) + 1
    detail = ", ".join(f"{n} {_RULE_WORDS.get(rule, rule)}" for rule, n in by_rule.items())
    return f"a sweep then would forget {fmt.plural(len(forget), 'memory', 'memories')}" + (f" ({detail})" if detail else "")


def closest_choice(when: datetime, now: datetime) -> int | None:
    """The index in :data:`TRAVEL_CHOICES` within two minutes of ``when`` (None: a date picked by hand)."""
    delta = when - now
    return next((i for i, (_l, d) in enumerate(TRAVEL_CHOICES) if d is not None and abs((d - delta).total_seconds()) < 120), None)


def open_time_travel_dialog(host: WindowHost, chosen: Callable[[datetime], Any], cancelled: Callable[[], Any]) -> None:
    """Pick a date to preview the store at: ``chosen`` gets it, or ``cancelled`` is called."""
    if host.path is None:
        return
    dialog = TimeTravelDialog(host.clock(), host.travel, host.dialog_parent())
    dialog.accepted.connect(lambda: chosen(dialog.value()))
    dialog.rejected.connect(cancelled)
    host.open_dialog(dialog)
