"""Why a memory is where it is, in a sentence or two.

The sentences are built from the same rule functions the sweep uses (:mod:`memlens.sweep`), so "the next sweep forgets
it" is said exactly when a sweep at that ``now`` would. Nothing here writes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from memlens import decay
from memlens import sweep as sweep_rules
from memlens.errors import NotFound
from memlens.models import Memory
from memlens.supersede import compatible_projects
from memlens.text import jaccard, similarity_tokens

if TYPE_CHECKING:
    from memlens.store import MemoryStore

#: Audit operations that erase memories.
_ERASING = ("forget", "forget_session", "sweep", "forget_matching")


def explain(store: MemoryStore, memory_id: int, *, now: datetime) -> str:
    """One or two sentences on a memory's state at ``now``: its strength and what the next sweep does with it,
    what superseded it, what it came from. For a forgotten id, when and why it was erased (from the audit log);
    an id that never existed raises :class:`memlens.errors.NotFound`."""
    try:
        memory = store.get(memory_id)
    except NotFound:
        return _explain_gone(store, memory_id)
    settings = store.settings
    value = decay.strength(memory, now, settings.decay)
    hours = max(0.0, (now - memory.last_accessed_at) / timedelta(hours=1))
    first: str
    if memory.pinned:
        first = f"Pinned: strength stays at {value:.2f} and no sweep touches it."
    elif memory.created_at > now - timedelta(hours=settings.grace_hours):
        ends = memory.created_at + timedelta(hours=settings.grace_hours)
        first = (
            f"Created {_span(now - memory.created_at)} ago, inside the {settings.grace_hours:g}-hour grace period: no sweep "
            f"touches it before {ends:%Y-%m-%d %H:%M} UTC (strength {value:.2f})."
        )
    else:
        first = _fate(store, memory, value, hours, now) or _outlook(store, memory, value, hours, now)
    second = " ".join(part for part in (_context(store, memory, now), _capacity(store, memory, now)) if part)
    return f"{first} {second}" if second else first


def _capacity(store: MemoryStore, memory: Memory, now: datetime) -> str:
    """A note when the store is over its capacity, where the lowest retention scores go first."""
    capacity = store.settings.capacity
    if capacity <= 0 or memory.pinned or not memory.is_latest:
        return ""
    latest = store.conn.execute("SELECT COUNT(*) FROM memories WHERE is_latest = 1").fetchone()[0]
    if latest <= capacity:
        return ""
    score = decay.composite_score(memory, now, store.settings.decay)
    return f"The store holds {latest} latest memories, over its capacity of {capacity}: the lowest retention scores go first (this one's is {score:.2f})."


def _fate(store: MemoryStore, memory: Memory, value: float, hours: float, now: datetime) -> str | None:
    """The sentence for a memory the next sweep acts on (ttl, weak, low value, near-duplicate), else None."""
    settings = store.settings
    now_ts = now.timestamp()
    if memory.forget_after is not None and memory.forget_after <= now:
        return f"Its TTL ran out on {memory.forget_after:%Y-%m-%d %H:%M} UTC; the next sweep forgets it (strength {value:.2f})."
    decision = sweep_rules.weak_decision(
        memory.id, memory.title, memory.layer, memory.type, memory.importance, memory.last_accessed_at.timestamp(),
        memory.access_count, settings, now_ts,
    )
    if decision is not None:
        return (
            f"Strength {value:.2f} after {_hours(hours)} unused; below {settings.decay.forget_threshold:g}, "
            "so the next sweep forgets it."
        )
    decision = sweep_rules.low_value_decision(
        memory.id, memory.title, memory.layer, memory.created_at.timestamp(), memory.importance, settings, now_ts
    )
    if decision is not None:
        age = (now - memory.created_at) / timedelta(days=1)
        return (
            f"An observation {age:.0f} days old with importance {memory.importance:.2f} (at most "
            f"{settings.low_value_importance:g}): low value, so the next sweep forgets it."
        )
    newer = _newer_duplicate(store, memory, now)
    if newer is not None:
        other, sim = newer
        return (
            f"A near-duplicate of the newer #{other} (similarity {sim:.2f}, above {settings.duplicate_threshold:g}, "
            "sharing a tag): the next sweep marks it not latest."
        )
    return None


def _outlook(store: MemoryStore, memory: Memory, value: float, hours: float, now: datetime) -> str:
    """The sentence for a memory no sweep rule takes now: how strong it is and when (if ever) that changes."""
    settings = store.settings
    cfg = settings.decay
    rate = decay.effective_rate(memory.type, memory.access_count, cfg)
    used = f"recalled {memory.access_count} times" if memory.access_count else "never recalled"
    base = f"Strength {value:.2f} after {_hours(hours)} unused ({used}; {_a(memory.type)} decays {rate:g}/h)"
    if decay.forgettable_by_strength(memory.layer, memory.type):
        fade = decay.fades_at(memory, cfg.forget_threshold, cfg)
        if fade is not None:
            return (
                f"{base}; it falls below {cfg.forget_threshold:g} on {fade:%Y-%m-%d %H:%M} UTC (in {_span(fade - now)}) "
                "unless recalled, and the sweep then forgets it."
            )
        return f"{base}."
    ttl = ""
    if memory.forget_after is not None:
        ttl = f" Its TTL runs out on {memory.forget_after:%Y-%m-%d %H:%M} UTC (in {_span(memory.forget_after - now)})."
    floor = ""
    if decay.has_floor(memory.layer, memory.type) and value <= min(cfg.floor, decay.initial_strength(memory.importance)) + 1e-12:
        floor = f", at its floor of {cfg.floor:g}"
    kind = "an episode" if memory.layer == "episodic" else "knowledge"
    return f"{base}{floor}; {kind} leaves only by TTL, capacity or by hand.{ttl}"


def _context(store: MemoryStore, memory: Memory, now: datetime) -> str:
    """Where the memory came from or went: superseded, hidden as a duplicate, derived, archived."""
    parts: list[str] = []
    if not memory.is_latest:
        successors = [r for r in store.relations(memory.id) if r.kind == "supersedes" and r.dst_id == memory.id]
        if successors:
            rel = max(successors, key=lambda r: r.created_at)
            sim = f" (similarity {rel.score:.2f})" if rel.score is not None else ""
            newer = store.get(rel.src_id) if store.exists(rel.src_id) else None
            if newer is not None and rel.created_at > newer.created_at:
                # Linked after the newer memory was written: the sweep found the pair, remember() did not.
                parts.append(
                    f"Marked a near-duplicate of #{rel.src_id} by the sweep on {rel.created_at:%Y-%m-%d}{sim}; kept as its previous version, out of search."
                )
            else:
                parts.append(f"Superseded by #{rel.src_id} on {rel.created_at:%Y-%m-%d}{sim}; kept as version {memory.version}, out of search.")
        else:
            parts.append("Not the latest version of its chain, so it is out of search.")
    sources = store.sources_of(memory.id)
    archived = memory.metadata.get("source_ids") if memory.type == "archive" else None
    if sources:
        parts.append(f"Derived by {memory.origin} from {_ids(sources)}.")
    elif isinstance(archived, list) and archived:
        parts.append(f"Archives the forgotten {_ids([i for i in archived if isinstance(i, int)])}.")
    return " ".join(parts)


def _newer_duplicate(store: MemoryStore, memory: Memory, now: datetime, *, contested: bool = True) -> tuple[int, float] | None:
    """The newer near-duplicate (id, similarity) that hides this memory at the next sweep, if any.

    A newer memory takes one older one only (see :func:`memlens.sweep.dedupe_by_newer`): with ``contested`` the other
    older memories whose best match is the same newer one are weighed too, and this one must win."""
    settings = store.settings
    if not memory.is_latest or not memory.tags or memory.pinned:
        return None
    cutoff = now - timedelta(hours=settings.grace_hours)
    tokens = similarity_tokens(memory.content)
    candidates = sweep_rules._similar_candidates(store.conn, tokens, settings.duplicate_threshold)
    candidates.discard(memory.id)
    best: tuple[float, int] | None = None
    for other in store.get_many(sorted(candidates)):
        if not other.is_latest or other.layer != memory.layer or not compatible_projects(memory.project, other.project):
            continue
        if other.created_at > cutoff or not set(other.tags) & set(memory.tags):
            continue
        if (other.created_at, other.id) <= (memory.created_at, memory.id) or not sweep_rules.stands_alone(store.conn, other.id):
            continue
        sim = jaccard(tokens, similarity_tokens(other.content))
        if sim > settings.duplicate_threshold and (best is None or (sim, other.id) > best):
            best = (sim, other.id)
    if best is None:
        return None
    sim, newer_id = best
    if contested:
        newer = store.get(newer_id)
        rivals = sweep_rules._similar_candidates(store.conn, similarity_tokens(newer.content), settings.duplicate_threshold)
        for rival in store.get_many(sorted(rivals - {memory.id, newer_id})):
            link = _newer_duplicate(store, rival, now, contested=False)
            if link is not None and link[0] == newer_id and (link[1], rival.id) > (sim, memory.id):
                return None
    return (newer_id, sim)


def _explain_gone(store: MemoryStore, memory_id: int) -> str:
    for entry in store.audit(target_id=memory_id, limit=50):
        if entry.operation not in _ERASING or str(memory_id) not in entry.details.get("content_sha256", {}):
            continue
        reason = entry.details.get("reason")
        when = f"{entry.at:%Y-%m-%d %H:%M} UTC"
        if entry.operation == "sweep":
            into = entry.details.get("archived_into")
            archived = f" It was archived into #{into}." if into else ""
            return f"Forgotten by the sweep on {when} ({entry.details.get('rule')}): {reason}.{archived}"
        said = f": {reason}" if reason else ""
        return f"Forgotten by {entry.actor} on {when}{said}."
    raise NotFound(f"no memory #{memory_id} (and the audit log has no record of it)")


def _a(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _ids(ids: list[int]) -> str:
    shown = ", ".join(f"#{i}" for i in ids[:8])
    return shown + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")


def _hours(hours: float) -> str:
    if hours < 1:
        return f"{hours * 60:.0f} minutes"
    if hours < 48:
        return f"{hours:.0f} hours"
    return f"{hours / 24:.0f} days"


def _span(delta: timedelta) -> str:
    return _hours(max(0.0, delta / timedelta(hours=1)))
