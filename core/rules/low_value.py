"""``low_value``: a working-layer observation older than ``low_value_days`` with importance at most
``low_value_importance`` is forgotten."""

from __future__ import annotations

from datetime import datetime

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
        return _LowValue(row, days, settings.low_value_days, settings.low_value_importance)

    def sentence(self, decision: SweepDecision, memory: Memory, settings: StoreSettings, now: datetime) -> str:
        """The age and the importance against their limits."""
        age = (now.timestamp() - memory.created_at.timestamp()) / 86400.0
        return (
            f"An observation {age:.0f} days old with importance {memory.importance:.2f} (at most "
            f"{settings.low_value_importance:g}): low value, so the next sweep forgets it."
        )


class _LowValue(SweepDecision):
    """A low-value decision, its numbers and reason worked out when first read (see SweepDecision)."""

    __slots__ = ("days", "importance", "max_days", "max_importance")

    def __init__(self, row: MemoryRow, days: float, max_days: float, max_importance: float) -> None:
        super().__init__(row.id, LowValueRule.name, "forget", None, None, row.title)
        self.days, self.importance, self.max_days, self.max_importance = days, row.importance, max_days, max_importance

    def work_out(self) -> tuple[dict[str, float], str]:
        numbers = {"age_days": round(self.days, 4), "importance": self.importance, "max_age_days": self.max_days, "max_importance": self.max_importance}
        reason = (
            f"an observation {self.days:.0f} days old (over {self.max_days:g}) with importance "
            f"{self.importance:.2f} (at most {self.max_importance:g}): low value, so the sweep forgets it"
        )
        return numbers, reason


LOW_VALUE = LowValueRule()
