"""``capacity``: when the store still holds more latest memories than ``capacity``, the lowest composite retention
scores go first: short ones are forgotten, long ones (more than :data:`ARCHIVE_MIN_CHARS` characters) are folded into
one short ``archive`` memory per project, which keeps their ids in ``metadata["source_ids"]``. A capacity victim leaves
with every version of its chain, so an older version does not resurface in its place.

Only when the store is over capacity are the latest memories ranked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memlens import decay
from memlens.config import StoreSettings
from memlens.models import Memory
from memlens.rules.base import MemoryRow, RulePlan, RuleSetting, SweepDecision, SweepView, grace_cutoff_ts

#: Capacity victims longer than this (characters) are archived as a short summary instead of simply forgotten.
ARCHIVE_MIN_CHARS = 400


@dataclass(frozen=True)
class _Ranked:
    score: float
    created_at: float
    memory_id: int
    title: str
    project: str | None
    chain_id: int
    chars: int


class CapacityRule:
    """Keeps the store within its capacity of latest memories, the lowest retention scores leaving first."""

    name = "capacity"
    label = "Capacity"
    description = (
        "When the store holds more latest memories than its capacity, the lowest retention scores leave first: "
        "short memories are forgotten, long ones archived as a short summary."
    )
    settings: tuple[RuleSetting, ...] = (RuleSetting("capacity", "Capacity (latest memories, 0: no limit)", maximum=10_000_000.0, integer=True),)

    def plan(self, view: SweepView, settings: StoreSettings, now: datetime, so_far: RulePlan) -> RulePlan:
        """The victims that bring the latest count within capacity, after what the earlier rules take out."""
        out = RulePlan()
        if settings.capacity <= 0:
            return out
        decided = so_far.decided()
        absorbed = {link.newer_id: older_id for older_id, link in so_far.duplicates.items()}
        for d, chain, project in self._victims(view, settings, now.timestamp(), decided):
            out.decisions.append(d)
            older_id = absorbed.get(d.memory_id)
            while older_id is not None:
                # This sweep makes it the next version of its near-duplicate's chain (which may itself absorb an
                # older near-duplicate in this sweep): the whole chain goes with it.
                chain = sorted({*chain, *view.chain(older_id)})
                older_id = absorbed.get(older_id)
            out.chain_ids[d.memory_id] = chain
            if d.action == "archive":
                out.archive_groups.setdefault(project, []).append(d.memory_id)
        return out

    def _victims(
        self, view: SweepView, settings: StoreSettings, now_ts: float, decided: dict[int, SweepDecision]
    ) -> list[tuple[SweepDecision, list[int], str | None]]:
        capacity = settings.capacity
        cutoff = grace_cutoff_ts(settings, now_ts)
        latest = view.latest_count()
        # What the earlier rules take out of the latest set: hidden duplicates, and forgotten latest memories unless an
        # older version of theirs becomes latest in their place.
        forgotten = {i for i, d in decided.items() if d.action == "forget"}
        removed = sum(1 for d in decided.values() if d.action == "mark_not_latest")
        for memory_id in sorted(view.latest_among(sorted(forgotten))):
            if not [o for o in view.chain(memory_id) if o != memory_id and o not in forgotten]:
                removed += 1
        excess = latest - removed - capacity
        if excess <= 0:
            return []
        cfg = settings.decay
        # Rank by the composite score. Its semantic part needs the text, so every score is first bounded from the stored
        # numbers alone (semantic importance lies between 0.5 and 0.9) and text is read only where the bound leaves doubt.
        weight_total = cfg.weight_recency + cfg.weight_frequency + cfg.weight_importance + cfg.weight_semantic
        spread = cfg.weight_semantic * (0.9 - 0.5) / weight_total if weight_total > 0 else 0.0
        rough: list[tuple[float, int]] = []
        for r in view.rank_inputs(cutoff):
            if r.id not in decided:
                low = decay.composite_score_at(content="", importance=r.importance, last_accessed=r.last_accessed_at, access_count=r.access_count, now=now_ts, config=cfg)
                rough.append((low, r.id))
        uppers = sorted(low + spread for low, _ in rough)
        need = min(len(rough), excess + 8)
        while True:
            ranked = _exact_ranking(view, cfg, now_ts, [i for low, i in rough if low <= uppers[need - 1]]) if need else []
            # The first `need` entries of `ranked` are exactly the `need` lowest scores of all; beyond that the order is
            # not complete, so a pick that needs more widens the window and ranks again.
            out, done = _pick_victims(view, ranked[:need], latest - removed, capacity, decided)
            if done or need >= len(rough):
                return out
            need = min(len(rough), need * 2)

    def fate(self, memory: Memory, view: SweepView, settings: StoreSettings, now: datetime) -> str | None:
        """Explain does not predict capacity victims (that needs the whole ranking); :meth:`note` says where it stands."""
        return None

    def note(self, memory: Memory, view: SweepView, settings: StoreSettings, now: datetime) -> str:
        """A note when the store is over its capacity, where the lowest retention scores go first."""
        capacity = settings.capacity
        if capacity <= 0 or memory.pinned or not memory.is_latest:
            return ""
        latest = view.latest_count()
        if latest <= capacity:
            return ""
        score = decay.composite_score(memory, now, settings.decay)
        return f"The store holds {latest} latest memories, over its capacity of {capacity}: the lowest retention scores go first (this one's is {score:.2f})."

    def still_due(self, row: MemoryRow, decision: SweepDecision, view: SweepView, settings: StoreSettings, now: datetime) -> bool:
        """A victim that is still latest still goes."""
        return row.is_latest


def _exact_ranking(view: SweepView, cfg: decay.DecayConfig, now_ts: float, ids: list[int]) -> list[_Ranked]:
    ranked = [
        _Ranked(
            decay.composite_score_at(content=r.content, importance=r.importance, last_accessed=r.last_accessed_at, access_count=r.access_count, now=now_ts, config=cfg),
            r.created_at, r.id, r.title, r.project, r.chain_id, len(r.content),
        )
        for r in view.rank_rows(ids)
    ]
    ranked.sort(key=lambda r: (r.score, r.created_at, r.memory_id))
    return ranked


def _pick_victims(
    view: SweepView, ranked: list[_Ranked], latest: int, capacity: int, decided: dict[int, SweepDecision]
) -> tuple[list[tuple[SweepDecision, list[int], str | None]], bool]:
    """Victims from the lowest score up until the latest count is within capacity; True when it got there."""
    out: list[tuple[SweepDecision, list[int], str | None]] = []
    groups: set[str | None] = set()
    taken = 0
    for r in ranked:
        # Each victim removes one latest memory; the first archived memory of a project adds its archive back.
        if latest - taken + len(groups) <= capacity:
            return out, True
        chain = view.chain(r.memory_id)
        if view.has_pinned(chain):
            continue  # an older version is pinned: the chain stays whole
        if any(c in decided for c in chain):
            continue
        archive = r.chars > ARCHIVE_MIN_CHARS
        if archive:
            groups.add(r.project)
        taken += 1
        numbers = {
            "score": round(r.score, 6),
            "capacity": float(capacity),
            "latest": float(latest),
            "rank": float(taken),
            "versions": float(len(chain)),
            "chars": float(r.chars),
        }
        head = f"{latest} latest memories exceed the capacity of {capacity}; retention score {r.score:.2f} is among the lowest, so "
        if archive:
            reason = head + f"this long memory ({r.chars} characters) is archived as a short summary that keeps its id"
        else:
            reason = head + "the sweep forgets it"
        out.append((SweepDecision(r.memory_id, CAPACITY.name, "archive" if archive else "forget", numbers, reason, r.title), chain, r.project))
    return out, latest - taken + len(groups) <= capacity


CAPACITY = CapacityRule()
