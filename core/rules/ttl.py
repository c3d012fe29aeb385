"""``ttl``: a memory whose TTL (``forget_after``) has passed is forgotten."""

from __future__ import annotations

from datetime import datetime

from memlens import decay
from memlens.config import StoreSettings
from memlens.models import Memory, utc_from_ts
from memlens.rules.base import MemoryRow, RowRule, SweepDecision, SweepView, duration
from memlens.text import local_time


class TtlRule(RowRule):
    """Forgets memories whose TTL ran out (found through the ``memories_by_ttl`` index)."""

    name = "ttl"
    label = "TTL"
    description = "A memory whose time to live (set when it was written) has run out is forgotten."

    def candidates(self, view: SweepView, settings: StoreSettings, now_ts: float, cutoff: float) -> list[MemoryRow]:
        """Memories whose TTL has passed, the longest expired first."""
        return view.memories(expired_by=now_ts, created_by=cutoff)

    def decide(self, row: MemoryRow, settings: StoreSettings, now_ts: float) -> SweepDecision | None:
        """Forget when ``forget_after`` is at or before ``now_ts``."""
        if row.forget_after is None or row.forget_after > now_ts:
            return None
        past = (now_ts - row.forget_after) / 3600.0
        when = utc_from_ts(row.forget_after)
        assert when is not None
        return SweepDecision(
            row.id,
            self.name,
            "forget",
            {"forget_after": row.forget_after, "hours_past": round(past, 4)},
            f"its TTL ran out on {when:%Y-%m-%d %H:%M} UTC ({duration(past, hour_decimals=1)} ago), so the sweep forgets it",
            row.title,
        )

    def sentence(self, decision: SweepDecision, memory: Memory, settings: StoreSettings, now: datetime) -> str:
        """When the TTL ran out, and the memory's strength."""
        value = decay.strength(memory, now, settings.decay)
        assert memory.forget_after is not None  # the rule decided on it: the memory has a TTL
        return f"Its TTL ran out on {local_time(memory.forget_after)}; the next sweep forgets it (strength {value:.2f})."


TTL = TtlRule()
