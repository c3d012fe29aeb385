"""Why a memory is where it is, in a sentence or two.

The sentences come from the registered sweep rules (:mod:`memlens.rules`), read through the same
:class:`memlens.sweep.StoreView` the sweep plans with, so "the next sweep forgets it" is said exactly when a sweep at that
``now`` would. Nothing here writes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from memlens import decay, rules
from memlens.config import StoreSettings
from memlens.errors import NotFound
from memlens.models import Memory
from memlens.rules.base import article, duration
from memlens.storage.validation import check_time
from memlens.sweep import StoreView
from memlens.text import local_time

if TYPE_CHECKING:
    from memlens.store import MemoryStore

#: Audit operations that erase memories.
_ERASING = ("forget", "forget_session", "sweep", "forget_matching")


def explain(store: MemoryStore, memory_id: int, *, now: datetime) -> str:
    """One or two sentences on a memory's state at ``now``: its strength and what the next sweep does with it,
    what superseded it, what it came from. For a forgotten id, when and why it was erased (from the audit log);
    an id that never existed raises :class:`memlens.errors.NotFound`, a ``now`` outside MIN_TIME..MAX_TIME
    :class:`memlens.errors.InvalidInput`."""
    now = check_time(now, "now")
    try:
        memory = store.get(memory_id)
    except NotFound:
        return _explain_gone(store, memory_id)
    settings = store.settings
    # The store's in-memory supersede index serves the near-duplicate rule; it is used under the store's lock.
    with store.ctx.lock:
        view = StoreView(store.conn, store.ctx.postings)
        value = decay.strength(memory, now, settings.decay)
        hours = max(0.0, (now - memory.last_accessed_at) / timedelta(hours=1))
        first: str
        if memory.pinned:
            first = f"Pinned: strength stays at {value:.2f} and no sweep touches it."
        elif memory.created_at > now - timedelta(hours=settings.grace_hours):
            ends = memory.created_at + timedelta(hours=settings.grace_hours)
            first = (
                f"Created {_span(now - memory.created_at)} ago, inside the {settings.grace_hours:g}-hour grace period: no sweep "
                f"touches it before {local_time(ends)} (strength {value:.2f})."
            )
        else:
            first = _fate(view, settings, memory, now) or _outlook(store, memory, value, hours, now)
        notes = [rule.note(memory, view, settings, now) for rule in rules.RULES]
        second = " ".join(part for part in (_context(store, memory, now), *notes) if part)
        return f"{first} {second}" if second else first


def _fate(view: StoreView, settings: StoreSettings, memory: Memory, now: datetime) -> str | None:
    """The sentence of the first registered rule by which a sweep at ``now`` acts on this memory, else None."""
    return next((s for rule in rules.RULES if (s := rule.fate(memory, view, settings, now)) is not None), None)


def _outlook(store: MemoryStore, memory: Memory, value: float, hours: float, now: datetime) -> str:
    """The sentence for a memory no sweep rule takes now: how strong it is and when (if ever) that changes."""
    settings = store.settings
    cfg = settings.decay
    rate = decay.effective_rate(memory.type, memory.access_count, cfg)
    used = f"recalled {memory.access_count} time{'s' if memory.access_count != 1 else ''}" if memory.access_count else "never recalled"
    base = f"Strength {value:.2f} after {duration(hours)} unused ({used}; {article(memory.type)}: {decay.half_life_text(rate)})"
    if decay.forgettable_by_strength(memory.layer, memory.type):
        fade = decay.fades_at(memory, cfg.forget_threshold, cfg)
        if fade is not None:
            return (
                f"{base}; it falls below {cfg.forget_threshold:g} on {local_time(fade)} (in {_span(fade - now)}) "
                "unless recalled, and the sweep then forgets it."
            )
        return f"{base}."
    ttl = ""
    if memory.forget_after is not None:
        ttl = f" Its TTL runs out on {local_time(memory.forget_after)} (in {_span(memory.forget_after - now)})."
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


def _explain_gone(store: MemoryStore, memory_id: int) -> str:
    for entry in store.audit(target_id=memory_id, limit=50):
        if entry.operation not in _ERASING or str(memory_id) not in entry.details.get("content_sha256", {}):
            continue
        reason = entry.details.get("reason")
        when = local_time(entry.as_of)  # the time the sweep or forget acted as of
        if entry.operation == "sweep":
            into = entry.details.get("archived_into")
            archived = f" It was archived into #{into}." if into else ""
            return f"Forgotten by the sweep on {when} ({entry.details.get('rule')}): {reason}.{archived}"
        said = f": {reason}" if reason else ""
        return f"Forgotten by {entry.actor} on {when}{said}."
    raise NotFound(f"no memory #{memory_id} (and the audit log has no record of it)")


def _ids(ids: list[int]) -> str:
    shown = ", ".join(f"#{i}" for i in ids[:8])
    return shown + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")


def _span(delta: timedelta) -> str:
    return duration(delta / timedelta(hours=1))
