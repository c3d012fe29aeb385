"""``low_value``: a working-layer observation older than ``low_value_days`` with importance at most
``low_value_importance`` is forgotten."""

from __future__ import annotations

from datetime import datetime
from functools import partial

from memlens.config import StoreSettings
from memlens.models import Memory
from memlens.rules.base import MemoryRow, RowRule, RuleSetting, SweepDecision, SweepView


class LowValueRule(RowRule):
    """Forgets old, unimportant observations (found through ``memories_by_layer``)."""

    name = "low_value"
    label = "Low value"
    description = "A working-layer observation older than the age limit with importance at most the importance limit is forgotten."
    settings: tuple[RuleSetting, ...] = (
        RuleSetting("low_value_days", "Older than (days)", maximum=36500.0),
        RuleSetting("low_value_importance", "Importance at most"),
    )

    def candidates(self, view: SweepView, settings: StoreSettings, now_ts: float, cutoff: float) -> list[MemoryRow]:
        """Old enough, unimportant enough working memories, the oldest first."""
        age_limit = now_ts - settings.low_value_days * 86400.0
        return view.memories(layer="working", created_by=min(age_limit, cutoff), max_importance=settings.low_value_importance)

    def decide(self, row: MemoryRow, settings: StoreSettings, now_ts: float) -> SweepDecision | None:
        """Forget an old, low-importance observation."""
        days = (now_ts - row.created_at) / 86400.0
        if row.layer != "working" or now_ts - row.created_at < settings.low_value_days * 86400.0 or row.importance > settings.low_value_importance:
            return None
        # The numbers and the sentence are worked out when read (see SweepDecision).
        facts = (days, row.importance, settings.low_value_days, settings.low_value_importance)
        return SweepDecision(row.id, self.name, "forget", partial(_numbers, *facts), partial(_reason, *facts), row.title)

    def sentence(self, decision: SweepDecision, memory: Memory, settings: StoreSettings, now: datetime) -> str:
        """The age and the importance against their limits."""
        age = (now.timestamp() - memory.created_at.timestamp()) / 86400.0
        return (
            f"An observation {age:.0f} days old with importance {memory.importance:.2f} (at most "
            f"{settings.low_value_importance:g}): low value, so the next sweep forgets it."
        )


def _numbers(days: float, importance: float, max_days: float, max_importance: float) -> dict[str, float]:
    return {"age_days": round(days, 4), "importance": importance, "max_age_days": max_days, "max_importance": max_importance}


def _reason(days: float, importance: float, max_days: float, max_importance: float) -> str:
    return (
        f"an observation {days:.0f} days old (over {max_days:g}) with importance "
        f"{importance:.2f} (at most {max_importance:g}): low value, so the sweep forgets it"
    )


LOW_VALUE = LowValueRule()
