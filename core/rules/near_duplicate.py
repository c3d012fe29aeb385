"""``duplicate``: two *latest* memories of the same layer, with compatible projects, sharing a tag, whose word sets
have Jaccard similarity above ``duplicate_threshold``: the older one is marked not latest (kept, out of search) and the
newer one becomes the next version of its chain, with a ``supersedes`` relation, so every chain keeps exactly one
latest version. Only a newer memory that is a chain of its own (:meth:`SweepView.stands_alone`) can take that place.

The sweep looks only around memories no earlier sweep has compared (:meth:`SweepView.unchecked`), through the
supersede similarity index (:meth:`SweepView.similar_to`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from memlens.config import StoreSettings
from memlens.models import Memory
from memlens.rules.base import (
    DuplicateLink,
    MemoryRow,
    RulePlan,
    RuleSetting,
    SweepDecision,
    SweepView,
    TaggedLatest,
    grace_cutoff_ts,
)
from memlens.supersede import compatible_projects
from memlens.text import jaccard


class NearDuplicateRule:
    """Hides the older of two near-duplicates behind the newer one."""

    name = "duplicate"
    label = "Near-duplicate"
    description = (
        "Of two latest memories of the same layer and project sharing a tag whose words are nearly the same, the older "
        "one is kept as the previous version of the newer one, out of search."
    )
    settings: tuple[RuleSetting, ...] = (RuleSetting("duplicate_threshold", "Similarity above"),)

    def plan(self, view: SweepView, settings: StoreSettings, now: datetime, so_far: RulePlan) -> RulePlan:
        """Hide each older near-duplicate behind its newer one, the most similar pairs first, each memory in one pair."""
        links = self.links(view, settings, grace_cutoff_ts(settings, now.timestamp()))
        decided = set(so_far.decided())
        out = RulePlan()
        for older_id in sorted(links, key=lambda i: (-links[i].similarity, i)):
            link = links[older_id]
            if older_id in decided or link.newer_id in decided:
                continue
            out.decisions.append(self.decision(link, view.title(older_id), settings))
            out.duplicates[older_id] = link
            decided.add(older_id)
        return out

    def links(self, view: SweepView, settings: StoreSettings, cutoff: float) -> dict[int, DuplicateLink]:
        """For each memory to hide, the newer near-duplicate it is hidden behind (the most similar one)."""
        threshold = settings.duplicate_threshold
        subjects = view.unchecked(cutoff)
        if not subjects or threshold >= 1.0:
            return {}
        links: dict[int, DuplicateLink] = {}
        for subject_id in dict.fromkeys(subjects):
            subject = view.tagged_latest([subject_id]).get(subject_id)
            if subject is None or subject.created_at > cutoff:
                continue
            for other in view.tagged_latest(sorted(view.similar_to(subject.tokens, threshold) - {subject.id})).values():
                link = pair_link(view, subject, other, threshold, cutoff)
                if link is None:
                    continue
                best = links.get(link.older_id)
                if best is None or (link.similarity, link.newer_id) > (best.similarity, best.newer_id):
                    links[link.older_id] = link
        return dedupe_by_newer(links.values())

    def newer_duplicate(self, view: SweepView, memory_id: int, settings: StoreSettings, now: datetime, *, contested: bool = True) -> DuplicateLink | None:
        """The link that hides one memory at a sweep at ``now``, if any, found from that memory alone.

        A newer memory takes one older one only (see :func:`dedupe_by_newer`): with ``contested`` the other older
        memories whose best match is the same newer one are weighed too, and this one must win."""
        threshold = settings.duplicate_threshold
        cutoff = grace_cutoff_ts(settings, now.timestamp())
        subject = view.tagged_latest([memory_id]).get(memory_id)
        if subject is None or subject.pinned:
            return None
        best: DuplicateLink | None = None
        for other in view.tagged_latest(sorted(view.similar_to(subject.tokens, threshold) - {memory_id})).values():
            link = pair_link(view, subject, other, threshold, cutoff)
            if link is not None and link.older_id == memory_id and (best is None or (link.similarity, link.newer_id) > (best.similarity, best.newer_id)):
                best = link
        if best is None or not contested:
            return best
        newer = view.tagged_latest([best.newer_id])[best.newer_id]
        for rival_id in sorted(view.similar_to(newer.tokens, threshold) - {memory_id, best.newer_id}):
            rival = self.newer_duplicate(view, rival_id, settings, now, contested=False)
            if rival is not None and rival.newer_id == best.newer_id and (rival.similarity, rival_id) > (best.similarity, memory_id):
                return None
        return best

    def decision(self, link: DuplicateLink, title: str, settings: StoreSettings) -> SweepDecision:
        """The decision that hides ``link.older_id`` behind ``link.newer_id``."""
        return SweepDecision(
            link.older_id,
            self.name,
            "mark_not_latest",
            {"similarity": round(link.similarity, 6), "threshold": settings.duplicate_threshold, "newer_id": float(link.newer_id)},
            f"a near-duplicate of the newer #{link.newer_id} (similarity {link.similarity:.2f}, above "
            f"{settings.duplicate_threshold:g}, sharing a tag): kept as the previous version of #{link.newer_id}, out of search",
            title,
        )

    def fate(self, memory: Memory, view: SweepView, settings: StoreSettings, now: datetime) -> str | None:
        """Which newer memory hides this one at the next sweep."""
        link = self.newer_duplicate(view, memory.id, settings, now)
        if link is None:
            return None
        return (
            f"A near-duplicate of the newer #{link.newer_id} (similarity {link.similarity:.2f}, above {settings.duplicate_threshold:g}, "
            "sharing a tag): the next sweep marks it not latest."
        )

    def note(self, memory: Memory, view: SweepView, settings: StoreSettings, now: datetime) -> str:
        """No remark beyond the fate."""
        return ""

    def still_due(self, row: MemoryRow, decision: SweepDecision, view: SweepView, settings: StoreSettings, now: datetime) -> bool:
        """Both memories are still latest and the newer one still a chain of its own."""
        newer_id = int(decision.numbers["newer_id"])
        newer = view.row(newer_id)
        return row.is_latest and newer is not None and newer.is_latest and view.stands_alone(newer_id)


def pair_link(view: SweepView, a: TaggedLatest, b: TaggedLatest, threshold: float, cutoff: float) -> DuplicateLink | None:
    """The link hiding the older of two latest, tagged memories behind the newer, if they are near-duplicates the
    sweep acts on: same layer, compatible projects, both out of their grace period, a shared tag, similarity above
    ``threshold``, the older one unpinned and the newer one a chain of its own."""
    if a.layer != b.layer or not compatible_projects(a.project, b.project):
        return None
    if a.created_at > cutoff or b.created_at > cutoff or not (a.tags & b.tags):
        return None
    similarity = jaccard(a.tokens, b.tokens)
    if similarity <= threshold:
        return None
    older, newer = sorted((a, b), key=lambda m: (m.created_at, m.id))
    if older.pinned or not view.stands_alone(newer.id):
        return None
    return DuplicateLink(older.id, newer.id, similarity)


def dedupe_by_newer(links: Iterable[DuplicateLink]) -> dict[int, DuplicateLink]:
    """At most one older memory per newer one: a newer memory becomes the next version of one chain only, so every
    chain keeps exactly one latest version. The most similar older one wins (the most recent on a tie)."""
    by_newer: dict[int, DuplicateLink] = {}
    for link in links:
        best = by_newer.get(link.newer_id)
        if best is None or (link.similarity, link.older_id) > (best.similarity, best.older_id):
            by_newer[link.newer_id] = link
    return {link.older_id: link for link in by_newer.values()}


NEAR_DUPLICATE = NearDuplicateRule()
