"""``conflict``: the losing side of a resolved conflict, kept for a while by the person's choice, is forgotten when
that time runs out.

Resolving a conflict never deletes (see :mod:`memlens.conflicts`); asked to, it gives the losing side a TTL and the
tag ``conflict-superseded``. This rule, applied before ``ttl``, takes such a memory once its TTL has passed, so the
sweep records why it went. Undoing the resolution removes the tag and the TTL again.
"""

from __future__ import annotations

from datetime import datetime

from memlens.config import StoreSettings
from memlens.models import Memory, utc_from_ts
from memlens.rules.base import MemoryRow, RowRule, SweepDecision, SweepView, duration
from memlens.text import local_time

#: The tag :meth:`memlens.conflicts.ConflictService.resolve` puts on a losing side the sweep may forget (the same
#: text as ``memlens.conflicts.SUPERSEDED_TAG``; rules import nothing from the storage side).
SUPERSEDED_TAG = "conflict-superseded"


class ConflictRule(RowRule):
    """Forgets superseded sides of resolved conflicts whose grace time ran out (found through the TTL index)."""

    name = "conflict"
    label = "Conflict"
    description = "The losing side of a resolved conflict, kept for a set time after the resolution, is forgotten when that time runs out."

    def candidates(self, view: SweepView, settings: StoreSettings, now_ts: float, cutoff: float) -> list[MemoryRow]:
        """Tagged losing sides whose TTL has passed, the longest expired first."""
        return view.memories(expired_by=now_ts, created_by=cutoff, tag=SUPERSEDED_TAG)

    def decide(self, row: MemoryRow, settings: StoreSettings, now_ts: float) -> SweepDecision | None:
        """Forget a tagged memory whose ``forget_after`` is at or before ``now_ts``."""
        if SUPERSEDED_TAG not in row.tags or row.forget_after is None or row.forget_after > now_ts:
            return None
        past = (now_ts - row.forget_after) / 3600.0
        when = utc_from_ts(row.forget_after)
        assert when is not None
        return SweepDecision(
            row.id,
            self.name,
            "forget",
            {"forget_after": row.forget_after, "hours_past": round(past, 4)},
            f"it lost a resolved conflict and the time it was kept for ran out on {when:%Y-%m-%d %H:%M} UTC "
            f"({duration(past, hour_decimals=1)} ago), so the sweep forgets it",
            row.title,
        )

    def sentence(self, decision: SweepDecision, memory: Memory, settings: StoreSettings, now: datetime) -> str:
        """When the kept time ran out."""
        assert memory.forget_after is not None  # the rule decided on it: the memory has a TTL
        return f"It lost a resolved conflict and was kept until {local_time(memory.forget_after)}; the next sweep forgets it."


CONFLICT = ConflictRule()
