"""``weak``: a working-layer observation or chitchat whose strength fell below the forget threshold is forgotten.

Semantic and procedural knowledge never leaves this way (only by TTL, capacity or by hand).
"""

from __future__ import annotations

from datetime import datetime

from memlens import decay
from memlens.config import StoreSettings
from memlens.models import Memory
from memlens.rules.base import MemoryRow, RowRule, RuleSetting, SweepDecision, SweepView, article, duration
from memlens.text import comparable


class WeakRule(RowRule):
    """Forgets faded observations and chitchat (found through the stored ``fade_at``, ``memories_by_fade``)."""

    name = "weak"
    label = "Weak"
    description = "A working-layer observation or chitchat whose strength fell below the forget threshold is forgotten."
    settings: tuple[RuleSetting, ...] = (RuleSetting("decay.forget_threshold", "Forget below strength"),)

    def candidates(self, view: SweepView, settings: StoreSettings, now_ts: float, cutoff: float) -> list[MemoryRow]:
        """Memories whose stored fade time has passed, the earliest faded first."""
        # fade_at is kept current by every write that changes what strength depends on, so the index finds exactly
        # the memories whose strength may have crossed the threshold; strength itself then decides (in decide()).
        return view.memories(fading_by=now_ts, created_by=cutoff)

    def decide(self, row: MemoryRow, settings: StoreSettings, now_ts: float) -> SweepDecision | None:
        """Forget a kind the sweep forgets for weakness when its strength is below the forget threshold."""
        cfg = settings.decay
        if not decay.forgettable_by_strength(row.layer, row.type):
            return None
        value = decay.strength_at(
            layer=row.layer, type_=row.type, importance=row.importance, last_accessed=row.last_accessed_at,
            access_count=row.access_count, pinned=False, now=now_ts, config=cfg,
        )
        if value >= cfg.forget_threshold:
            return None
        hours = (now_ts - row.last_accessed_at) / 3600.0
        rate = decay.effective_rate(row.type, row.access_count, cfg)
        return _Faded(row, value, cfg.forget_threshold, hours, rate)

    def sentence(self, decision: SweepDecision, memory: Memory, settings: StoreSettings, now: datetime) -> str:
        """The strength, how long unused, and the threshold."""
        value = decay.strength(memory, now, settings.decay)
        hours = (now.timestamp() - memory.last_accessed_at.timestamp()) / 3600.0
        shown, limit = comparable(value, settings.decay.forget_threshold)
        return f"Strength {shown} after {duration(hours)} unused; below {limit}, so the next sweep forgets it."


class _Faded(SweepDecision):
    """A weak decision, its numbers and reason worked out when first read (see SweepDecision)."""

    __slots__ = ("access_count", "hours_unused", "importance", "rate", "strength", "threshold", "type")

    def __init__(self, row: MemoryRow, strength: float, threshold: float, hours_unused: float, rate: float) -> None:
        super().__init__(row.id, WeakRule.name, "forget", None, None, row.title)
        self.strength, self.threshold, self.hours_unused, self.rate = strength, threshold, hours_unused, rate
        self.access_count, self.importance, self.type = row.access_count, row.importance, row.type

    def work_out(self) -> tuple[dict[str, float], str]:
        numbers = {
            "strength": round(self.strength, 6),
            "threshold": self.threshold,
            "hours_unused": round(self.hours_unused, 4),
            "rate_per_hour": round(self.rate, 8),
            "access_count": float(self.access_count),
            "importance": self.importance,
        }
        shown, limit = comparable(self.strength, self.threshold)
        reason = (
            f"strength {shown} after {duration(self.hours_unused, hour_decimals=1)} unused ({article(self.type)}: "
            f"{decay.half_life_text(self.rate)}); below {limit}, so the sweep forgets it"
        )
        return numbers, reason


WEAK = WeakRule()
