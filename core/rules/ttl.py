"""``ttl``: a memory whose TTL (``forget_after``) has passed is forgotten."""

from __future__ import annotations

from datetime import datetime

from memlens import decay
from memlens.config import StoreSettings
from memlens.models import Memory, utc_from_ts
from memlens.rules.base import MemoryRow, RowRule, RulePlan, SweepDecision, SweepView, duration, grace_cutoff_ts
from memlens.text import local_time


class TtlRule(RowRule):
    """Forgets memories whose TTL ran out (read from the ``memories_by_ttl`` index alone, which covers the query)."""

    name = "ttl"
    label = "TTL"
    description = "A memory whose time to live (set when it was written) has run out is forgotten."

    def candidates(self, view: SweepView, settings: StoreSettings, now_ts: float, cutoff: float) -> list[MemoryRow]:
        """Memories whose TTL has passed, the longest expired first (whole rows; :meth:`plan` reads less)."""
        return view.memories(expired_by=now_ts, created_by=cutoff)

    def plan(self, view: SweepView, settings: StoreSettings, now: datetime, so_far: RulePlan) -> RulePlan:
        """Every memory whose TTL has passed, the longest expired first: :meth:`decide` for each candidate, from its
        id, title and TTL alone (a hook's TTL can leave ten thousand due at once; whole rows would cost twice as long)."""
        now_ts = now.timestamp()
        decided = so_far.decided()
        out = RulePlan()
        out.decisions = [
            _Expired(memory_id, title, forget_after, now_ts)
            for memory_id, title, forget_after in view.expired(now_ts, grace_cutoff_ts(settings, now_ts))
            if memory_id not in decided
        ]
        return out

    def decide(self, row: MemoryRow, settings: StoreSettings, now_ts: float) -> SweepDecision | None:
        """Forget when ``forget_after`` is at or before ``now_ts``."""
        if row.forget_after is None or row.forget_after > now_ts:
            return None
        return _Expired(row.id, row.title, row.forget_after, now_ts)

    def sentence(self, decision: SweepDecision, memory: Memory, settings: StoreSettings, now: datetime) -> str:
        """When the TTL ran out, and the memory's strength."""
        value = decay.strength(memory, now, settings.decay)
        assert memory.forget_after is not None  # the rule decided on it: the memory has a TTL
        return f"Its TTL ran out on {local_time(memory.forget_after)}; the next sweep forgets it (strength {value:.2f})."


class _Expired(SweepDecision):
    """A TTL decision, its numbers and reason worked out from the TTL when first read (see SweepDecision)."""

    __slots__ = ("forget_after", "now_ts")

    def __init__(self, memory_id: int, title: str, forget_after: float, now_ts: float) -> None:
        super().__init__(memory_id, TtlRule.name, "forget", None, None, title)
        self.forget_after = forget_after
        self.now_ts = now_ts

    def work_out(self) -> tuple[dict[str, float], str]:
        past = (self.now_ts - self.forget_after) / 3600.0
        when = utc_from_ts(self.forget_after)
        assert when is not None
        reason = f"its TTL ran out on {when:%Y-%m-%d %H:%M} UTC ({duration(past, hour_decimals=1)} ago), so the sweep forgets it"
        return {"forget_after": self.forget_after, "hours_past": round(past, 4)}, reason


TTL = TtlRule()
