"""The auto-forget sweep: what leaves the store, by which rule, and the numbers behind each decision.

One sweep applies five rules, in this order; a memory gets at most one decision, from the first rule that takes it:

``ttl``
    its TTL (``forget_after``) has passed: forgotten.
``weak``
    a working-layer observation or chitchat whose strength fell below the forget threshold: forgotten.
    Semantic and procedural knowledge never leaves this way (only by TTL, capacity or by hand).
``low_value``
    a working-layer observation older than ``low_value_days`` with importance at most ``low_value_importance``:
    forgotten.
``duplicate``
    two *latest* memories of the same layer, with compatible projects, sharing a tag, whose word sets have Jaccard
    similarity above ``duplicate_threshold``: the older one is marked not latest (kept, out of search) and the newer
    one becomes the next version of its chain, with a ``supersedes`` relation, so every chain keeps exactly one
    latest version. Only a newer memory that is a chain of its own (see :func:`stands_alone`) can take that place.
``capacity``
    when the store still holds more latest memories than ``capacity``, the lowest composite retention scores go
    first: short ones are forgotten, long ones (more than :data:`ARCHIVE_MIN_CHARS` characters) are folded into one
    short ``archive`` memory per project, which keeps their ids in ``metadata["source_ids"]``. A capacity victim
    leaves with every version of its chain, so an older version does not resurface in its place.

Never touched: pinned memories, and anything younger than the grace period (``grace_hours``, 1 hour by default).

The sweep finds what is due through indexes rather than reading every row: TTL through ``memories_by_ttl``, weakness
through the stored ``fade_at`` (``memories_by_fade``), low value through ``memories_by_layer``; near-duplicates are
looked for only around memories the sweep has not checked yet (newer than the last checked id, or whose tags,
pinning or latest state changed since, read from the audit log), through the supersede similarity index. Only when
the store is over capacity are the latest memories ranked.

:func:`plan` decides and writes nothing, so a dry run at ``now`` is exactly the plan a real sweep at that ``now``
carries out (:meth:`memlens.store.MemoryStore.sweep` plans and applies inside one transaction).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memlens import decay, supersede
from memlens.config import StoreSettings
from memlens.db import Connection
from memlens.models import utc_from_ts
from memlens.supersede import compatible_projects
from memlens.text import jaccard, similarity_tokens, token_key

#: The rules, in the order they are applied.
RULES: tuple[str, ...] = ("ttl", "weak", "low_value", "duplicate", "capacity")
#: What a decision does to its memory.
ACTIONS: tuple[str, ...] = ("forget", "mark_not_latest", "archive")
#: Capacity victims longer than this (characters) are archived as a short summary instead of simply forgotten.
ARCHIVE_MIN_CHARS = 400
#: How much of each archived memory the archive keeps (characters).
ARCHIVE_EXCERPT_CHARS = 160
#: A real sweep applies a larger plan in transactions of this many decisions (see :func:`run`).
APPLY_BATCH = 200
#: Where the sweep remembers how far it has looked for near-duplicates (``meta`` table).
STATE_KEY = "sweep_state"

_CHUNK = 500

if TYPE_CHECKING:
    from memlens.store import MemoryStore


@dataclass(frozen=True)
class SweepDecision:
    """What the sweep does (or would do) to one memory, by which rule, and why.

    ``numbers`` holds the values the rule compared (strength and threshold, age and importance, similarity, score
    and capacity...); ``reason`` says the same in a sentence; ``title`` is the memory's title, for display only (it
    is never written to the audit log).
    """

    memory_id: int
    rule: str
    action: str
    numbers: dict[str, float]
    reason: str
    title: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "memory_id": self.memory_id,
            "rule": self.rule,
            "action": self.action,
            "numbers": dict(self.numbers),
            "reason": self.reason,
            "title": self.title,
        }


@dataclass(frozen=True)
class SweepReport:
    """The outcome of a sweep at ``now``: its decisions (in rule order), how many each rule made, and for a real run
    the archive memories it wrote. ``dry_run`` reports are the exact plan a real sweep at that ``now`` would carry out.
    """

    now: datetime
    dry_run: bool
    decisions: list[SweepDecision]
    counts: dict[str, int]
    archives: list[int] = field(default_factory=list)
    #: Planned decisions a real run did not carry out because the memory changed meanwhile (see :func:`run`).
    skipped: int = 0

    @property
    def total(self) -> int:
        """How many memories the sweep acts on."""
        return len(self.decisions)

    def by_rule(self, rule: str) -> list[SweepDecision]:
        """The decisions one rule made."""
        return [d for d in self.decisions if d.rule == rule]

    def decision_for(self, memory_id: int) -> SweepDecision | None:
        """The decision about one memory, if the sweep acts on it."""
        return next((d for d in self.decisions if d.memory_id == memory_id), None)

    def summary(self) -> str:
        """One line: what the sweep did or would do."""
        verb = "would act on" if self.dry_run else "acted on"
        if not self.decisions:
            return f"sweep at {self.now:%Y-%m-%d %H:%M} UTC: nothing to do"
        parts = ", ".join(f"{n} {rule}" for rule, n in self.counts.items() if n)
        noun = "memory" if len(self.decisions) == 1 else "memories"
        return f"sweep at {self.now:%Y-%m-%d %H:%M} UTC {verb} {len(self.decisions)} {noun} ({parts})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "now": self.now.isoformat(),
            "dry_run": self.dry_run,
            "counts": dict(self.counts),
            "decisions": [d.to_dict() for d in self.decisions],
            "archives": list(self.archives),
            "skipped": self.skipped,
        }


@dataclass(frozen=True)
class DuplicateLink:
    """The newer memory a near-duplicate is hidden behind (for applying the decision)."""

    older_id: int
    newer_id: int
    similarity: float


@dataclass(frozen=True)
class SweepPlan:
    """Everything a real sweep needs to apply a plan: the decisions, the chains that capacity victims take with
    them, the duplicate links, and the near-duplicate bookkeeping to store afterwards."""

    decisions: list[SweepDecision]
    chain_ids: dict[int, list[int]]
    duplicates: dict[int, DuplicateLink]
    archive_groups: dict[str | None, list[int]]
    state: dict[str, int]


# --- planning --------------------------------------------------------------------------------------------------


def plan(conn: Connection, settings: StoreSettings, now: datetime) -> SweepPlan:
    """Decide what a sweep at ``now`` does, reading only what is due (see the module docstring). Writes nothing."""
    now_ts = now.timestamp()
    cutoff = now_ts - settings.grace_hours * 3600.0
    decided: dict[int, SweepDecision] = {}
    decisions: list[SweepDecision] = []

    def add(decision: SweepDecision) -> None:
        decided[decision.memory_id] = decision
        decisions.append(decision)

    for d in _ttl_decisions(conn, now_ts, cutoff):
        add(d)
    for d in _weak_decisions(conn, settings, now_ts, cutoff):
        if d.memory_id not in decided:
            add(d)
    for d in _low_value_decisions(conn, settings, now_ts, cutoff):
        if d.memory_id not in decided:
            add(d)
    state = load_state(conn)
    links, new_state = _duplicate_links(conn, settings, cutoff, state)
    duplicates: dict[int, DuplicateLink] = {}
    for older_id in sorted(links, key=lambda i: (-links[i].similarity, i)):
        link = links[older_id]
        if older_id in decided or link.newer_id in decided:
            continue
        add(_duplicate_decision(conn, link, settings))
        duplicates[older_id] = link
    chains: dict[int, list[int]] = {}
    groups: dict[str | None, list[int]] = {}
    if settings.capacity > 0:
        absorbed = {link.newer_id: older_id for older_id, link in duplicates.items()}
        for d, chain, project in _capacity_decisions(conn, settings, now_ts, cutoff, decided):
            add(d)
            if d.memory_id in absorbed:
                # This sweep makes it the next version of its near-duplicate's chain: the chain goes with it.
                older_chain = conn.execute("SELECT chain_id FROM memories WHERE id = ?", (absorbed[d.memory_id],)).fetchone()[0]
                chain = sorted({*chain, *(r[0] for r in conn.execute("SELECT id FROM memories WHERE chain_id = ?", (older_chain,)))})
            chains[d.memory_id] = chain
            if d.action == "archive":
                groups.setdefault(project, []).append(d.memory_id)
    return SweepPlan(decisions, chains, duplicates, groups, new_state)


def counts_of(decisions: list[SweepDecision]) -> dict[str, int]:
    """How many decisions each rule made (every rule listed, zero included)."""
    counter = Counter(d.rule for d in decisions)
    return {rule: counter.get(rule, 0) for rule in RULES}


def load_state(conn: Connection) -> dict[str, int]:
    """How far earlier sweeps have looked for near-duplicates: ``memory_id`` (every id up to it was checked once out
    of its grace period) and ``audit_id`` (audit entries up to it were read for changed memories)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (STATE_KEY,)).fetchone()
    state = {"memory_id": 0, "audit_id": 0}
    if row:
        try:
            loaded = json.loads(row[0])
            state.update({k: int(loaded[k]) for k in state if k in loaded})
        except (ValueError, TypeError, KeyError):
            pass  # a damaged record only means the next sweep looks at everything again
    return state


def _a(word: str) -> str:
    """The word with its indefinite article ("a fact", "an observation")."""
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _ago(hours: float) -> str:
    if hours < 1:
        return f"{max(0.0, hours) * 60:.0f} minutes"
    if hours < 48:
        return f"{hours:.1f} hours"
    return f"{hours / 24:.0f} days"


def _ttl_decisions(conn: Connection, now_ts: float, cutoff: float) -> list[SweepDecision]:
    rows = conn.execute(
        "SELECT id, title, forget_after FROM memories WHERE forget_after IS NOT NULL AND forget_after <= ? "
        "AND pinned = 0 AND created_at <= ? ORDER BY forget_after, id",
        (now_ts, cutoff),
    ).fetchall()
    return [ttl_decision(memory_id, title, forget_after, now_ts) for memory_id, title, forget_after in rows]


def ttl_decision(memory_id: int, title: str, forget_after: float, now_ts: float) -> SweepDecision:
    """The ``ttl`` decision for a memory whose TTL (``forget_after``, epoch seconds) has passed."""
    past = (now_ts - forget_after) / 3600.0
    when = utc_from_ts(forget_after)
    assert when is not None
    return SweepDecision(
        memory_id,
        "ttl",
        "forget",
        {"forget_after": forget_after, "hours_past": round(past, 4)},
        f"its TTL ran out on {when:%Y-%m-%d %H:%M} UTC ({_ago(past)} ago), so the sweep forgets it",
        title,
    )


def _weak_decisions(conn: Connection, settings: StoreSettings, now_ts: float, cutoff: float) -> list[SweepDecision]:
    # fade_at is kept current by every write that changes what strength depends on, so the index finds exactly
    # the memories whose strength may have crossed the threshold; strength itself then decides.
    rows = conn.execute(
        "SELECT id, title, layer, type, importance, last_accessed_at, access_count FROM memories "
        "WHERE fade_at IS NOT NULL AND fade_at <= ? AND pinned = 0 AND created_at <= ? ORDER BY fade_at, id",
        (now_ts, cutoff),
    ).fetchall()
    out = []
    for memory_id, title, layer, type_, importance, last, count in rows:
        d = weak_decision(memory_id, title, layer, type_, importance, last, count, settings, now_ts)
        if d is not None:
            out.append(d)
    return out


def weak_decision(
    memory_id: int, title: str, layer: str, type_: str, importance: float, last_accessed: float, access_count: int,
    settings: StoreSettings, now_ts: float,
) -> SweepDecision | None:
    """The ``weak`` decision for an unpinned memory, or None if it is not a kind the sweep forgets for weakness
    or its strength is not below the forget threshold."""
    cfg = settings.decay
    if not decay.forgettable_by_strength(layer, type_):
        return None
    value = decay.strength_at(
        layer=layer, type_=type_, importance=importance, last_accessed=last_accessed, access_count=access_count,
        pinned=False, now=now_ts, config=cfg,
    )
    if value >= cfg.forget_threshold:
        return None
    hours = (now_ts - last_accessed) / 3600.0
    rate = decay.effective_rate(type_, access_count, cfg)
    return SweepDecision(
        memory_id,
        "weak",
        "forget",
        {
            "strength": round(value, 6),
            "threshold": cfg.forget_threshold,
            "hours_unused": round(hours, 4),
            "rate_per_hour": round(rate, 8),
            "access_count": float(access_count),
            "importance": importance,
        },
        f"strength {value:.2f} after {_ago(hours)} unused ({_a(type_)} decays {rate:g}/h); "
        f"below {cfg.forget_threshold:g}, so the sweep forgets it",
        title,
    )


def _low_value_decisions(conn: Connection, settings: StoreSettings, now_ts: float, cutoff: float) -> list[SweepDecision]:
    age_limit = now_ts - settings.low_value_days * 86400.0
    rows = conn.execute(
        "SELECT id, title, created_at, importance FROM memories WHERE layer = 'working' AND is_latest IN (0, 1) "
        "AND created_at <= ? AND importance <= ? AND pinned = 0 ORDER BY created_at, id",
        (min(age_limit, cutoff), settings.low_value_importance),
    ).fetchall()
    out = []
    for memory_id, title, created, importance in rows:
        d = low_value_decision(memory_id, title, "working", created, importance, settings, now_ts)
        if d is not None:
            out.append(d)
    return out


def low_value_decision(
    memory_id: int, title: str, layer: str, created_at: float, importance: float, settings: StoreSettings, now_ts: float
) -> SweepDecision | None:
    """The ``low_value`` decision for an unpinned memory, or None if it is not an old, low-importance observation."""
    days = (now_ts - created_at) / 86400.0
    if layer != "working" or now_ts - created_at < settings.low_value_days * 86400.0 or importance > settings.low_value_importance:
        return None
    return SweepDecision(
        memory_id,
        "low_value",
        "forget",
        {
            "age_days": round(days, 4),
            "importance": importance,
            "max_age_days": settings.low_value_days,
            "max_importance": settings.low_value_importance,
        },
        f"an observation {days:.0f} days old (over {settings.low_value_days:g}) with importance "
        f"{importance:.2f} (at most {settings.low_value_importance:g}): low value, so the sweep forgets it",
        title,
    )


# --- near-duplicates -------------------------------------------------------------------------------------------


@dataclass
class _Latest:
    id: int
    layer: str
    project: str | None
    created_at: float
    pinned: bool
    tokens: frozenset[str]
    tags: set[str]


def _duplicate_links(
    conn: Connection, settings: StoreSettings, cutoff: float, state: dict[str, int]
) -> tuple[dict[int, DuplicateLink], dict[str, int]]:
    """For each memory to hide, the newer near-duplicate it is hidden behind (the most similar one); and the
    bookkeeping to store once these links are applied."""
    threshold = settings.duplicate_threshold
    checked_to = state["memory_id"]
    # Every id up to the first one still in its grace period gets checked now; the rest wait for a later sweep.
    first_young = conn.execute("SELECT MIN(id) FROM memories WHERE id > ? AND created_at > ?", (checked_to, cutoff)).fetchone()[0]
    if first_young is not None:
        new_checked_to = first_young - 1
    else:
        top = conn.execute("SELECT MAX(id) FROM memories").fetchone()[0]
        new_checked_to = max(checked_to, top or 0)
    top_audit = conn.execute("SELECT MAX(id) FROM audit").fetchone()[0] or 0
    # Every unchecked memory out of its grace period is a subject, also those above a younger one (a back-dated
    # import, or a sweep at an earlier `now`); those are checked again later, which finds nothing new.
    subjects = [
        r[0]
        for r in conn.execute(
            "SELECT m.id FROM memories m WHERE m.id > ? AND m.is_latest = 1 AND m.created_at <= ? "
            "AND EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_id = m.id)",
            (checked_to, cutoff),
        )
    ]
    subjects.extend(_changed_since(conn, state["audit_id"], top_audit))
    new_state = {"memory_id": new_checked_to, "audit_id": top_audit}
    if not subjects or threshold >= 1.0:
        return {}, new_state

    cache: dict[int, _Latest | None] = {}
    links: dict[int, DuplicateLink] = {}
    for subject_id in dict.fromkeys(subjects):
        subject = _load_latest(conn, [subject_id], cache).get(subject_id)
        if subject is None or subject.created_at > cutoff or not subject.tags:
            continue
        candidate_ids = _similar_candidates(conn, subject.tokens, threshold)
        candidate_ids.discard(subject.id)
        others = _load_latest(conn, sorted(candidate_ids), cache)
        for other in others.values():
            if other.layer != subject.layer or not compatible_projects(subject.project, other.project):
                continue
            if other.created_at > cutoff or not (subject.tags & other.tags):
                continue
            sim = jaccard(subject.tokens, other.tokens)
            if sim <= threshold:
                continue
            older, newer = sorted((subject, other), key=lambda m: (m.created_at, m.id))
            if older.pinned or not stands_alone(conn, newer.id):
                continue
            best = links.get(older.id)
            if best is None or (sim, newer.id) > (best.similarity, best.newer_id):
                links[older.id] = DuplicateLink(older.id, newer.id, sim)
    return dedupe_by_newer(links.values()), new_state


def dedupe_by_newer(links: Iterable[DuplicateLink]) -> dict[int, DuplicateLink]:
    """At most one older memory per newer one: a newer memory becomes the next version of one chain only, so every
    chain keeps exactly one latest version. The most similar older one wins (the most recent on a tie)."""
    by_newer: dict[int, DuplicateLink] = {}
    for link in links:
        best = by_newer.get(link.newer_id)
        if best is None or (link.similarity, link.older_id) > (best.similarity, best.older_id):
            by_newer[link.newer_id] = link
    return {link.older_id: link for link in by_newer.values()}


def stands_alone(conn: Connection, memory_id: int) -> bool:
    """Whether a memory is a chain of its own (a first version nothing superseded). Only such a memory can take
    a near-duplicate's place: it becomes the next version of the duplicate's chain, so every chain keeps exactly
    one latest version (a memory with a history of its own has a place in its chain already)."""
    row = conn.execute("SELECT chain_id FROM memories WHERE id = ?", (memory_id,)).fetchone()
    if row is None or row[0] != memory_id:
        return False
    return conn.execute("SELECT COUNT(*) FROM memories WHERE chain_id = ?", (memory_id,)).fetchone()[0] == 1


def _changed_since(conn: Connection, after_audit_id: int, through_audit_id: int) -> list[int]:
    """Memories whose tags or pinning were edited, or that became latest again, since an audit entry: they are
    compared again even though their id was checked before."""
    if through_audit_id <= after_audit_id:
        return []
    out: list[int] = []
    rows = conn.execute(
        "SELECT operation, target_ids, details FROM audit WHERE id > ? AND id <= ? ORDER BY id", (after_audit_id, through_audit_id)
    )
    for operation, targets, details_text in rows:
        if operation not in ("update", "forget", "forget_session", "sweep"):
            continue
        try:
            details = json.loads(details_text)
        except ValueError:
            continue
        if operation == "update" and ("tags" in details or "pinned" in details):
            out.extend(int(t) for t in json.loads(targets))
        restored = details.get("restored_latest")
        if isinstance(restored, list):
            out.extend(int(t) for t in restored if isinstance(t, int))
    return out


def _load_latest(conn: Connection, ids: list[int], cache: dict[int, _Latest | None]) -> dict[int, _Latest]:
    """The latest, tagged memories among ``ids`` (cached across calls: one sweep reads each row once)."""
    missing = [i for i in ids if i not in cache]
    for start in range(0, len(missing), _CHUNK):
        chunk = missing[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for memory_id in chunk:
            cache[memory_id] = None
        tags: dict[int, set[str]] = {}
        for memory_id, tag in conn.execute(f"SELECT memory_id, tag FROM memory_tags WHERE memory_id IN ({marks})", chunk):
            tags.setdefault(memory_id, set()).add(tag)
        tagged = [i for i in chunk if i in tags]
        if not tagged:
            continue
        marks = ",".join("?" * len(tagged))
        for memory_id, layer, project, created, pinned, content in conn.execute(
            f"SELECT id, layer, project, created_at, pinned, content FROM memories WHERE id IN ({marks}) AND is_latest = 1", tagged
        ):
            cache[memory_id] = _Latest(memory_id, layer, project, created, bool(pinned), similarity_tokens(content), tags[memory_id])
    return {i: m for i in ids if (m := cache.get(i)) is not None}


def _similar_candidates(conn: Connection, tokens: frozenset[str], threshold: float) -> set[int]:
    """Ids of latest memories that could have Jaccard similarity above ``threshold`` with ``tokens``.

    Prefix filtering, as in :mod:`memlens.supersede`: a set with similarity above t shares more than t·|x| tokens with
    x, so it holds at least one of any |x| - ceil(t·|x|) + 1 of x's tokens; the rarest ones are probed.
    """
    if not tokens:
        return set()
    size = len(tokens)
    min_overlap = max(1, math.ceil(threshold * size - 1e-9))
    prefix_len = size - min_overlap + 1
    keys = sorted({token_key(t) for t in tokens})
    df: dict[str, int] = {}
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        df.update(conn.execute(f"SELECT key, df FROM token_stats WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall())
    ordered = sorted(tokens, key=lambda t: (df.get(token_key(t), 0), t))
    probe = sorted({token_key(t) for t in ordered[:prefix_len] if df.get(token_key(t), 0) > 1})
    found: set[int] = set()
    for key in probe:
        found.update(r[0] for r in conn.execute("SELECT rowid FROM similarity_index WHERE similarity_index MATCH ?", (key,)))
    return found


def _duplicate_decision(conn: Connection, link: DuplicateLink, settings: StoreSettings) -> SweepDecision:
    title = conn.execute("SELECT title FROM memories WHERE id = ?", (link.older_id,)).fetchone()[0]
    return SweepDecision(
        link.older_id,
        "duplicate",
        "mark_not_latest",
        {"similarity": round(link.similarity, 6), "threshold": settings.duplicate_threshold, "newer_id": float(link.newer_id)},
        f"a near-duplicate of the newer #{link.newer_id} (similarity {link.similarity:.2f}, above "
        f"{settings.duplicate_threshold:g}, sharing a tag): kept as the previous version of #{link.newer_id}, out of search",
        title,
    )


# --- capacity --------------------------------------------------------------------------------------------------


def _capacity_decisions(
    conn: Connection, settings: StoreSettings, now_ts: float, cutoff: float, decided: dict[int, SweepDecision]
) -> list[tuple[SweepDecision, list[int], str | None]]:
    capacity = settings.capacity
    latest = conn.execute("SELECT COUNT(*) FROM memories WHERE is_latest = 1").fetchone()[0]
    # What the earlier rules take out of the latest set: hidden duplicates, and forgotten latest memories unless an
    # older version of theirs becomes latest in their place.
    forgotten = {i for i, d in decided.items() if d.action == "forget"}
    removed = sum(1 for d in decided.values() if d.action == "mark_not_latest")
    ordered = sorted(forgotten)
    for start in range(0, len(ordered), _CHUNK):
        chunk = ordered[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for memory_id, chain_id in conn.execute(f"SELECT id, chain_id FROM memories WHERE id IN ({marks}) AND is_latest = 1", chunk):
            others = [r[0] for r in conn.execute("SELECT id FROM memories WHERE chain_id = ? AND id != ?", (chain_id, memory_id))]
            if not [o for o in others if o not in forgotten]:
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
    for memory_id, importance, last, count in conn.execute(
        "SELECT id, importance, last_accessed_at, access_count FROM memories WHERE is_latest = 1 AND pinned = 0 AND created_at <= ?",
        (cutoff,),
    ):
        if memory_id not in decided:
            low = decay.composite_score_at(content="", importance=importance, last_accessed=last, access_count=count, now=now_ts, config=cfg)
            rough.append((low, memory_id))
    uppers = sorted(low + spread for low, _ in rough)
    need = min(len(rough), excess + 8)
    while True:
        ranked = _exact_ranking(conn, cfg, now_ts, [i for low, i in rough if low <= uppers[need - 1]]) if need else []
        # The first `need` entries of `ranked` are exactly the `need` lowest scores of all; beyond that the order is
        # not complete, so a pick that needs more widens the window and ranks again.
        out, done = _pick_victims(conn, ranked[:need], latest - removed, capacity, decided)
        if done or need >= len(rough):
            return out
        need = min(len(rough), need * 2)


@dataclass(frozen=True)
class _Ranked:
    score: float
    created_at: float
    memory_id: int
    title: str
    project: str | None
    chain_id: int
    chars: int


def _exact_ranking(conn: Connection, cfg: decay.DecayConfig, now_ts: float, ids: list[int]) -> list[_Ranked]:
    ranked: list[_Ranked] = []
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for memory_id, content, importance, last, count, created, title, project, chain_id in conn.execute(
            "SELECT id, content, importance, last_accessed_at, access_count, created_at, title, project, chain_id "
            f"FROM memories WHERE id IN ({marks})",
            chunk,
        ):
            score = decay.composite_score_at(content=content, importance=importance, last_accessed=last, access_count=count, now=now_ts, config=cfg)
            ranked.append(_Ranked(score, created, memory_id, title, project, chain_id, len(content)))
    ranked.sort(key=lambda r: (r.score, r.created_at, r.memory_id))
    return ranked


def _pick_victims(
    conn: Connection, ranked: list[_Ranked], latest: int, capacity: int, decided: dict[int, SweepDecision]
) -> tuple[list[tuple[SweepDecision, list[int], str | None]], bool]:
    """Victims from the lowest score up until the latest count is within capacity; True when it got there."""
    out: list[tuple[SweepDecision, list[int], str | None]] = []
    groups: set[str | None] = set()
    taken = 0
    for r in ranked:
        # Each victim removes one latest memory; the first archived memory of a project adds its archive back.
        if latest - taken + len(groups) <= capacity:
            return out, True
        chain = [row[0] for row in conn.execute("SELECT id FROM memories WHERE chain_id = ? ORDER BY version, id", (r.chain_id,))]
        marks = ",".join("?" * len(chain))
        if conn.execute(f"SELECT 1 FROM memories WHERE id IN ({marks}) AND pinned = 1 LIMIT 1", chain).fetchone():
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
        out.append((SweepDecision(r.memory_id, "capacity", "archive" if archive else "forget", numbers, reason, r.title), chain, r.project))
    return out, latest - taken + len(groups) <= capacity


# --- running ---------------------------------------------------------------------------------------------------


def run(store: MemoryStore, *, now: datetime, dry_run: bool) -> SweepReport:
    """Plan a sweep at ``now`` and, unless ``dry_run``, carry the plan out.

    The plan is made inside the first write transaction. Up to :data:`APPLY_BATCH` decisions (the usual case) are
    applied in that same transaction, all or nothing. A larger backlog is applied in further transactions of that
    size, so an agent writing meanwhile waits for one batch, not for the whole backlog; each decision is checked
    again in its batch, and one whose memory changed meanwhile (recalled, pinned, forgotten) is skipped.

    A real run writes one audit entry per decision (operation ``sweep``; details: rule, action, numbers, reason, and
    for erased memories the SHA-256 of their text), one per archive memory, and one ``sweep_run`` entry with the
    counts. A dry run reads one consistent snapshot and writes nothing.
    """
    if dry_run:
        with store._lock:
            conn = store.conn
            own = not conn.in_transaction
            if own:
                conn.execute("BEGIN")  # one snapshot for every query of the plan
            try:
                p = plan(conn, store.settings, now)
            finally:
                if own:
                    conn.execute("COMMIT")
        return SweepReport(now, True, p.decisions, counts_of(p.decisions))
    applied: list[SweepDecision] = []
    archives: list[int] = []
    skipped = 0
    with store._write() as conn:
        p = plan(conn, store.settings, now)
        batches = _batches(p)
        skipped += _apply_batch(store, conn, p, batches[0], now, applied, archives)
        if len(batches) == 1:
            _finish(store, conn, p, now, applied, archives, skipped)
    for index in range(1, len(batches)):
        with store._write() as conn:
            skipped += _apply_batch(store, conn, p, batches[index], now, applied, archives)
            if index == len(batches) - 1:
                _finish(store, conn, p, now, applied, archives, skipped)
    if applied:
        store._purge_deleted_terms()  # once for the whole sweep (inside a transaction it cannot checkpoint)
    order = {d.memory_id: i for i, d in enumerate(p.decisions)}
    applied.sort(key=lambda d: order[d.memory_id])  # archive groups ran last; report in the plan's order
    return SweepReport(now, False, applied, counts_of(applied), archives, skipped)


def _batches(p: SweepPlan) -> list[list[SweepDecision]]:
    """The plan's decisions in batches of :data:`APPLY_BATCH`, each archive group whole in one batch (its archive
    memory quotes every member); always at least one batch, so the bookkeeping is written even with no decisions."""
    grouped = {i for ids in p.archive_groups.values() for i in ids}
    plain = [d for d in p.decisions if d.memory_id not in grouped]
    batches = [plain[i : i + APPLY_BATCH] for i in range(0, len(plain), APPLY_BATCH)]
    by_id = {d.memory_id: d for d in p.decisions}
    batches += [[by_id[i] for i in ids] for ids in p.archive_groups.values()]
    return batches or [[]]


def _still_due(conn: Connection, p: SweepPlan, d: SweepDecision, settings: StoreSettings, now_ts: float) -> bool:
    """Whether a planned decision still holds (a later batch runs after other writers had their turn)."""
    row = conn.execute(
        "SELECT pinned, is_latest, forget_after, layer, type, importance, last_accessed_at, access_count, created_at, title "
        "FROM memories WHERE id = ?",
        (d.memory_id,),
    ).fetchone()
    if row is None or row[0]:
        return False
    _pinned, is_latest, forget_after, layer, type_, importance, last, count, created, title = row
    if d.rule == "ttl":
        return forget_after is not None and forget_after <= now_ts
    if d.rule == "weak":
        return weak_decision(d.memory_id, title, layer, type_, importance, last, count, settings, now_ts) is not None
    if d.rule == "low_value":
        return low_value_decision(d.memory_id, title, layer, created, importance, settings, now_ts) is not None
    if d.rule == "duplicate":
        newer_id = p.duplicates[d.memory_id].newer_id
        newer = conn.execute("SELECT is_latest FROM memories WHERE id = ?", (newer_id,)).fetchone()
        return bool(is_latest) and newer is not None and bool(newer[0]) and stands_alone(conn, newer_id)
    return bool(is_latest)  # capacity


def _apply_batch(
    store: MemoryStore,
    conn: Connection,
    p: SweepPlan,
    batch: list[SweepDecision],
    now: datetime,
    applied: list[SweepDecision],
    archives: list[int],
) -> int:
    """Carry out one batch of decisions inside the caller's transaction; returns how many were skipped."""
    ts = now.timestamp()
    settings = store.settings
    due = [d for d in batch if _still_due(conn, p, d, settings, ts)]
    archive_id = None
    to_archive = [d.memory_id for d in due if d.action == "archive"]
    if to_archive:
        # An archive is written before its members are erased: it quotes them.
        marks = ",".join("?" * len(to_archive))
        rows = conn.execute(
            f"SELECT id, type, title, content, tags, importance, project FROM memories WHERE id IN ({marks}) ORDER BY id", to_archive
        ).fetchall()
        title, content = archive_text([(r[0], r[1], r[2], r[3]) for r in rows], now)
        tags: list[str] = []
        for r in rows:
            tags.extend(t for t in json.loads(r[4]) if t not in tags)
        source_ids = [r[0] for r in rows]
        archive_id = store._insert_memory(
            conn,
            content=content,
            title=title,
            type_="archive",
            layer="semantic",
            project=rows[0][6],
            session_id=None,
            tags=tuple(tags[:50]),
            importance=max(r[5] for r in rows),
            ttl_days=None,
            metadata={"source_ids": source_ids, "archived_by": "sweep", "archived_at": now.isoformat()},
            source_ref=None,
            origin="consolidation",
            pinned=False,
            detect=False,
            now=now,
            audit=False,
        )
        store._audit(conn, "sweep", [archive_id], {"rule": "capacity", "action": "write_archive", "source_ids": source_ids}, now)
        archives.append(archive_id)
    for d in due:
        details: dict[str, Any] = {"rule": d.rule, "action": d.action, "numbers": d.numbers}
        if d.action == "mark_not_latest":
            link = p.duplicates[d.memory_id]
            content, version, chain_id = conn.execute("SELECT content, version, chain_id FROM memories WHERE id = ?", (d.memory_id,)).fetchone()
            conn.execute("UPDATE memories SET is_latest = 0, updated_at = ? WHERE id = ?", (ts, d.memory_id))
            # The newer memory takes the duplicate's place as the next version of its chain, as remember() would
            # have made it had it seen the pair.
            conn.execute(
                "UPDATE memories SET chain_id = ?, version = ?, parent_id = ?, supersedes = ?, supersede_similarity = ?, updated_at = ? WHERE id = ?",
                (chain_id, version + 1, d.memory_id, json.dumps([d.memory_id]), link.similarity, ts, link.newer_id),
            )
            supersede.unindex_latest(conn, d.memory_id, similarity_tokens(content))
            store._relate(conn, link.newer_id, d.memory_id, "supersedes", ts, link.similarity)
            store._audit(conn, "sweep", [d.memory_id, link.newer_id], {**details, "reason": d.reason}, now)
        else:
            if d.action == "archive":
                details["archived_into"] = archive_id
            store._forget_ids(
                p.chain_ids.get(d.memory_id, [d.memory_id]), reason=d.reason, now=now, operation="sweep", extra=details, flag_derived=False, purge=False
            )
        applied.append(d)
    return len(batch) - len(due)


def _finish(
    store: MemoryStore, conn: Connection, p: SweepPlan, now: datetime, applied: list[SweepDecision], archives: list[int], skipped: int
) -> None:
    """The sweep's own audit entry and its near-duplicate bookkeeping, written with the last batch."""
    details = {"counts": counts_of(applied), "decisions": len(applied), "archives": archives, "skipped": skipped}
    store._audit(conn, "sweep_run", [], details, now)
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (STATE_KEY, json.dumps(p.state, sort_keys=True)),
    )


# --- archives --------------------------------------------------------------------------------------------------


def archive_text(rows: list[tuple[int, str, str, str]], now: datetime) -> tuple[str, str]:
    """Title and content of the archive memory for archived ``(id, type, title, content)`` rows."""
    title = f"Archive of {len(rows)} memories ({now:%Y-%m-%d})"
    lines = [f"Archived by the capacity sweep on {now:%Y-%m-%d %H:%M} UTC; the originals were forgotten."]
    for memory_id, type_, mtitle, content in rows:
        excerpt = " ".join(content.split())
        if len(excerpt) > ARCHIVE_EXCERPT_CHARS:
            excerpt = excerpt[: ARCHIVE_EXCERPT_CHARS - 1].rsplit(" ", 1)[0] + "…"
        lines.append(f"- #{memory_id} ({type_}) {mtitle}: {excerpt}")
    return title, "\n".join(lines)


def grace_cutoff(settings: StoreSettings, now: datetime) -> datetime:
    """Memories created after this are inside the grace period and untouched by a sweep at ``now``."""
    return now - timedelta(hours=settings.grace_hours)
