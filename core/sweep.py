"""The auto-forget sweep: plan what leaves the store by the registered rules, then carry the plan out.

The rules live in :mod:`memlens.rules`, one file each (``ttl``, ``weak``, ``low_value``, ``duplicate``, ``capacity``,
in that order); a memory gets at most one decision, from the first rule that takes it. Never touched: pinned memories,
and anything younger than the grace period (``grace_hours``, 1 hour by default).

The rules read the store only through :class:`StoreView`, which finds what is due through indexes rather than
reading every row: TTL through ``memories_by_ttl``, weakness through the stored ``fade_at`` (``memories_by_fade``),
low value through ``memories_by_layer``; near-duplicates are looked for only around memories the sweep has not checked
yet (newer than the last checked id, or whose tags, pinning or latest state changed since, read from the audit log),
through the supersede similarity index. Only when the store is over capacity are the latest memories ranked.

:func:`plan` decides and writes nothing, so a dry run at ``now`` is exactly the plan a real sweep at that ``now``
carries out (:meth:`memlens.store.MemoryStore.sweep` plans and applies inside one transaction).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from memlens import rules, supersede
from memlens.config import StoreSettings
from memlens.db import Connection
from memlens.postgres import is_postgres
from memlens.rules.base import DuplicateLink, MemoryRow, RankInput, RankRow, RulePlan, SweepDecision, TaggedLatest
from memlens.rules.capacity import ARCHIVE_MIN_CHARS
from memlens.storage.forgetting import ForgetGroup
from memlens.text import local_time, similarity_tokens, token_key

__all__ = [
    "ACTIONS", "APPLY_BATCH", "ARCHIVE_EXCERPT_CHARS", "ARCHIVE_MIN_CHARS", "STATE_KEY", "CancelCheck", "DuplicateLink",
    "Progress", "StoreView", "SweepDecision", "SweepPlan", "SweepReport", "archive_text", "counts_of", "grace_cutoff", "load_state", "plan", "run",
]

#: What a decision does to its memory.
ACTIONS: tuple[str, ...] = ("forget", "mark_not_latest", "archive")
#: How much of each archived memory the archive keeps (characters).
ARCHIVE_EXCERPT_CHARS = 160
#: A real sweep applies a larger plan in transactions of this many decisions (see :func:`run`), each with one purge
#: of the full-text indexes (a merge costing about 0.7 s at 200k memories, whatever the batch's size): an agent
#: writing meanwhile waits for one batch, about a second at 200k.
APPLY_BATCH = 2000
#: Where the sweep remembers how far it has looked for near-duplicates (``meta`` table).
STATE_KEY = "sweep_state"

_CHUNK = 500
#: How far :meth:`StoreView.similar_to` counts a token's holders in the FTS5 index, when it has no in-memory index.
SIMILAR_TO_COUNT_CAP = 1000

if TYPE_CHECKING:
    from memlens.store import MemoryStore
    from memlens.supersede_postings import SimilarityPostings


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
    #: A real run was cancelled before it carried out its whole plan (``decisions`` are those it did).
    stopped: bool = False

    @property
    def total(self) -> int:
        """How many memories the sweep acts on."""
        return len(self.decisions)

    def by_rule(self, rule: str) -> list[SweepDecision]:
        """The decisions one rule made."""
        return [d for d in self.decisions if d.rule == rule]

    def summary(self) -> str:
        """One line: what the sweep did or would do."""
        verb = "would act on" if self.dry_run else "stopped after acting on" if self.stopped else "acted on"
        if not self.decisions:
            return f"sweep at {local_time(self.now)}: nothing to do"
        parts = ", ".join(f"{n} {rule}" for rule, n in self.counts.items() if n)
        noun = "memory" if len(self.decisions) == 1 else "memories"
        return f"sweep at {local_time(self.now)} {verb} {len(self.decisions)} {noun} ({parts})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "now": self.now.isoformat(),
            "dry_run": self.dry_run,
            "counts": dict(self.counts),
            "decisions": [d.to_dict() for d in self.decisions],
            "archives": list(self.archives),
            "skipped": self.skipped,
            "stopped": self.stopped,
        }


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


def plan(conn: Connection, settings: StoreSettings, now: datetime, postings: SimilarityPostings | None = None) -> SweepPlan:
    """Decide what a sweep at ``now`` does: each registered rule in turn, over what the earlier ones left (see
    :mod:`memlens.rules`). Writes nothing. ``postings``: the store's in-memory supersede index (see
    :class:`StoreView`)."""
    view = StoreView(conn, postings)
    so_far = RulePlan()
    for rule in rules.RULES:
        found = rule.plan(view, settings, now, so_far)
        decided = so_far.decided()
        for d in found.decisions:
            if d.memory_id in decided:
                continue  # an earlier rule took it
            decided[d.memory_id] = d
            so_far.decisions.append(d)
            if d.memory_id in found.duplicates:
                so_far.duplicates[d.memory_id] = found.duplicates[d.memory_id]
            if d.memory_id in found.chain_ids:
                so_far.chain_ids[d.memory_id] = found.chain_ids[d.memory_id]
        for project, ids in found.archive_groups.items():
            so_far.archive_groups.setdefault(project, []).extend(i for i in ids if decided[i].rule == rule.name)
    return SweepPlan(so_far.decisions, so_far.chain_ids, so_far.duplicates, so_far.archive_groups, view.next_state(conn))


def counts_of(decisions: list[SweepDecision]) -> dict[str, int]:
    """How many decisions each registered rule made (every rule listed, zero included)."""
    counter = Counter(d.rule for d in decisions)
    return {name: counter.get(name, 0) for name in rules.names()}


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


# --- what the rules read ---------------------------------------------------------------------------------------

_ROW_COLUMNS = "id, title, layer, type, project, importance, created_at, last_accessed_at, access_count, forget_after, pinned, is_latest"


class StoreView:
    """The :class:`memlens.rules.SweepView` over one connection: every query a rule may make, each through an index.

    One view serves one plan (or one explanation): it caches the near-duplicate rows it reads, and remembers how far
    :meth:`unchecked` looked so the sweep can store that afterwards (:meth:`next_state`)."""

    def __init__(self, conn: Connection, postings: SimilarityPostings | None = None) -> None:
        self.conn = conn
        # The store's in-memory supersede index (StoreContext.postings, used under the store's lock), for
        # similar_to once it is built.
        self._postings = postings
        self._tagged: dict[int, TaggedLatest | None] = {}
        self._state: dict[str, int] | None = None

    def memories(
        self, *, created_by: float, expired_by: float | None = None, fading_by: float | None = None, layer: str | None = None,
        max_importance: float | None = None, tag: str | None = None,
    ) -> list[MemoryRow]:
        """See :meth:`memlens.rules.SweepView.memories`."""
        where = ["pinned = 0", "created_at <= ?"]
        params: list[Any] = [created_by]
        order = "created_at"
        if layer is not None:
            where.append("layer = ? AND is_latest IN (0, 1)")  # the whole prefix of memories_by_layer
            params.append(layer)
        if max_importance is not None:
            where.append("importance <= ?")
            params.append(max_importance)
        if tag is not None:
            where.append("id IN (SELECT memory_id FROM memory_tags WHERE tag = ?)")
            params.append(tag)
        if fading_by is not None:
            where.append("fade_at IS NOT NULL AND fade_at <= ?")
            params.append(fading_by)
            order = "fade_at"
        if expired_by is not None:
            where.append("forget_after IS NOT NULL AND forget_after <= ?")
            params.append(expired_by)
            order = "forget_after"
        rows = self.conn.execute(f"SELECT {_ROW_COLUMNS} FROM memories WHERE {' AND '.join(where)} ORDER BY {order}, id", params).fetchall()
        return self._rows(rows)

    def expired(self, expired_by: float, created_by: float) -> list[tuple[int, str, float]]:
        """See :meth:`memlens.rules.SweepView.expired`."""
        return self.conn.execute(
            "SELECT id, title, forget_after FROM memories WHERE pinned = 0 AND created_at <= ? AND forget_after IS NOT NULL AND forget_after <= ? "
            "ORDER BY forget_after, id",
            (created_by, expired_by),
        ).fetchall()

    def row(self, memory_id: int) -> MemoryRow | None:
        """See :meth:`memlens.rules.SweepView.row`."""
        rows = self._rows(self.conn.execute(f"SELECT {_ROW_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchall())
        return rows[0] if rows else None

    def _rows(self, rows: list[Any]) -> list[MemoryRow]:
        tags = _TagsOf(self.conn, rows)
        return [MemoryRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], tags) for r in rows]

    def title(self, memory_id: int) -> str:
        """See :meth:`memlens.rules.SweepView.title`."""
        return str(self.conn.execute("SELECT title FROM memories WHERE id = ?", (memory_id,)).fetchone()[0])

    def latest_count(self) -> int:
        """See :meth:`memlens.rules.SweepView.latest_count`."""
        return int(self.conn.execute("SELECT COUNT(*) FROM memories WHERE is_latest = 1").fetchone()[0])

    def chain(self, memory_id: int) -> list[int]:
        """See :meth:`memlens.rules.SweepView.chain`."""
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM memories WHERE chain_id = (SELECT chain_id FROM memories WHERE id = ?) ORDER BY version, id", (memory_id,)
            )
        ]

    def latest_among(self, ids: list[int]) -> set[int]:
        """See :meth:`memlens.rules.SweepView.latest_among`."""
        found: set[int] = set()
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            found.update(r[0] for r in self.conn.execute(f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(chunk))}) AND is_latest = 1", chunk))
        return found

    def has_pinned(self, ids: list[int]) -> bool:
        """See :meth:`memlens.rules.SweepView.has_pinned`."""
        return any(
            self.conn.execute(f"SELECT 1 FROM memories WHERE id IN ({','.join('?' * len(chunk))}) AND pinned = 1 LIMIT 1", chunk).fetchone()
            for chunk in (ids[start : start + _CHUNK] for start in range(0, len(ids), _CHUNK))
        )

    def rank_inputs(self, created_by: float) -> list[RankInput]:
        """See :meth:`memlens.rules.SweepView.rank_inputs`."""
        return [
            RankInput(*r)
            for r in self.conn.execute(
                "SELECT id, importance, last_accessed_at, access_count FROM memories WHERE is_latest = 1 AND pinned = 0 AND created_at <= ?",
                (created_by,),
            )
        ]

    def rank_rows(self, ids: list[int]) -> list[RankRow]:
        """See :meth:`memlens.rules.SweepView.rank_rows`."""
        out: list[RankRow] = []
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            out.extend(
                RankRow(*r)
                for r in self.conn.execute(
                    "SELECT id, content, importance, last_accessed_at, access_count, created_at, title, project, chain_id "
                    f"FROM memories WHERE id IN ({','.join('?' * len(chunk))})",
                    chunk,
                )
            )
        return out

    def unchecked(self, cutoff: float) -> list[int]:
        """See :meth:`memlens.rules.SweepView.unchecked`; the bookkeeping to store afterwards is :meth:`next_state`."""
        state = load_state(self.conn)
        checked_to = state["memory_id"]
        conn = self.conn
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
        self._state = {"memory_id": new_checked_to, "audit_id": top_audit}
        return subjects

    def next_state(self, conn: Connection) -> dict[str, int]:
        """How far this plan looked for near-duplicates (unchanged when no rule asked for :meth:`unchecked`)."""
        return self._state if self._state is not None else load_state(conn)

    def tagged_latest(self, ids: list[int]) -> dict[int, TaggedLatest]:
        """See :meth:`memlens.rules.SweepView.tagged_latest` (cached: one plan reads each row once)."""
        missing = [i for i in ids if i not in self._tagged]
        for start in range(0, len(missing), _CHUNK):
            chunk = missing[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for memory_id in chunk:
                self._tagged[memory_id] = None
            tags: dict[int, set[str]] = {}
            for memory_id, tag in self.conn.execute(f"SELECT memory_id, tag FROM memory_tags WHERE memory_id IN ({marks})", chunk):
                tags.setdefault(memory_id, set()).add(tag)
            tagged = [i for i in chunk if i in tags]
            if not tagged:
                continue
            marks = ",".join("?" * len(tagged))
            for memory_id, layer, project, created, pinned, content in self.conn.execute(
                f"SELECT id, layer, project, created_at, pinned, content FROM memories WHERE id IN ({marks}) AND is_latest = 1", tagged
            ):
                self._tagged[memory_id] = TaggedLatest(memory_id, layer, project, created, bool(pinned), similarity_tokens(content), frozenset(tags[memory_id]))
        return {i: m for i in ids if (m := self._tagged.get(i)) is not None}

    def similar_to(self, tokens: frozenset[str], threshold: float) -> set[int]:
        """See :meth:`memlens.rules.SweepView.similar_to`.

        Prefix filtering, as in :mod:`memlens.supersede`: a set with similarity above t shares more than t·|x| tokens
        with x, so it holds at least one of any |x| - ceil(t·|x|) + 1 of x's tokens. Any such prefix is exact; the
        rarest tokens are probed because they find the fewest candidates. A token held by one memory at most (the
        subject itself) finds nothing and is not probed.

        Rarity and holders come from the store's in-memory supersede index when it holds one (a sweep builds it
        first; exact counts in microseconds: 0.27 ms a check at a million memories). Without one (an explanation
        of one memory, in a process that never built it: seconds and ~100 MB at a million, for one answer) they are
        counted and read in the FTS5 index, counts capped at ``SIMILAR_TO_COUNT_CAP``, tokens past it ranked by
        their text: 3-5 ms a check at a million, with more candidates. The in-memory index may still hold a memory
        that left it since its snapshot: the caller reads only latest rows.
        """
        if not tokens:
            return set()
        size = len(tokens)
        prefix_len = size - max(1, math.ceil(threshold * size - 1e-9)) + 1
        postings = self._postings
        if postings is None or not postings.built:
            return self._similar_in_index(tokens, prefix_len)
        from memlens.supersede_postings import key_number

        postings.sync(self.conn)
        number = {t: key_number(token_key(t)) for t in tokens}
        keys = sorted(set(number.values()))
        df = dict(zip(keys, postings.doc_frequencies(keys), strict=True))
        ordered = sorted(tokens, key=lambda t: (df[number[t]], t))
        probe = sorted({number[t] for t in ordered[:prefix_len] if df[number[t]] > 1})
        return {int(i) for i in postings.holders_of(probe)} if probe else set()

    def _similar_in_index(self, tokens: frozenset[str], prefix_len: int) -> set[int]:
        """:meth:`similar_to` read from the FTS5 supersede index (SQLite; the keys' GIN index on a server)."""
        keys = sorted({token_key(t) for t in tokens})
        df = dict(zip(keys, supersede.holder_counts(self.conn, keys, SIMILAR_TO_COUNT_CAP), strict=True))
        ordered = sorted(tokens, key=lambda t: (df[token_key(t)], t))
        holding = (
            "SELECT rowid FROM similarity_index WHERE string_to_array(keys, ' ') @> ARRAY[?::text]"
            if is_postgres(self.conn)
            else "SELECT rowid FROM similarity_index WHERE similarity_index MATCH ?"
        )
        found: set[int] = set()
        for key in sorted({token_key(t) for t in ordered[:prefix_len] if df[token_key(t)] > 1}):
            found.update(r[0] for r in self.conn.execute(holding, (key,)))
        return found

    def stands_alone(self, memory_id: int) -> bool:
        """See :meth:`memlens.rules.SweepView.stands_alone`. Only such a memory can take a near-duplicate's place: it
        becomes the next version of the duplicate's chain, so every chain keeps exactly one latest version (a memory
        with a history of its own has a place in its chain already)."""
        row = self.conn.execute("SELECT chain_id FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None or row[0] != memory_id:
            return False
        return bool(self.conn.execute("SELECT COUNT(*) FROM memories WHERE chain_id = ?", (memory_id,)).fetchone()[0] == 1)


class _TagsOf:
    """The tags of rows read together, loaded for all of them the first time a rule asks for one row's (the
    built-in row rules never do: at a million memories that saves ten thousand index lookups a plan)."""

    def __init__(self, conn: Connection, rows: list[Any]) -> None:
        self.conn = conn
        self.ids = [r[0] for r in rows]
        self.loaded: dict[int, frozenset[str]] | None = None

    def __call__(self, memory_id: int) -> frozenset[str]:
        if self.loaded is None:
            found: dict[int, set[str]] = {}
            for start in range(0, len(self.ids), _CHUNK):
                chunk = self.ids[start : start + _CHUNK]
                for row_id, tag in self.conn.execute(f"SELECT memory_id, tag FROM memory_tags WHERE memory_id IN ({','.join('?' * len(chunk))})", chunk):
                    found.setdefault(row_id, set()).add(tag)
            self.loaded = {row_id: frozenset(tags) for row_id, tags in found.items()}
        return self.loaded.get(memory_id, frozenset())


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


# --- running ---------------------------------------------------------------------------------------------------


#: ``progress(done, total)``: decisions carried out so far of those planned (called after each batch).
Progress = Callable[[int, int], None]
#: ``cancel()``: True to stop the sweep before its next batch.
CancelCheck = Callable[[], bool]


def run(
    store: MemoryStore, *, now: datetime, dry_run: bool, progress: Progress | None = None, cancel: CancelCheck | None = None
) -> SweepReport:
    """Plan a sweep at ``now`` and, unless ``dry_run``, carry the plan out.

    The plan is made inside the first write transaction. Up to :data:`APPLY_BATCH` decisions (the usual case) are
    applied in that same transaction, all or nothing. A larger backlog is applied in further transactions of that
    size, so an agent writing meanwhile waits for one batch, not for the whole backlog; each decision is checked
    again in its batch, and one whose memory changed meanwhile (recalled, pinned, forgotten) is skipped.

    A real run writes one audit entry per decision (operation ``sweep``; details: rule, action, numbers, reason, and
    for erased memories the SHA-256 of their text), one per archive memory, and one ``sweep_run`` entry with the
    counts. A dry run reads one consistent snapshot and writes nothing.

    ``progress`` is told how far the sweep got after every batch, and ``cancel`` is asked before each batch after
    the first: a cancelled sweep stops there, with every batch it applied committed whole, and its ``sweep_run``
    entry says it stopped (``stopped: true`` with how many were planned); the report's ``stopped`` is True. The
    near-duplicate bookkeeping then stays where it was, so the next sweep looks at the same memories again.
    """
    _prepare_for_duplicates(store)
    if dry_run:
        with store.ctx.lock:
            conn = store.conn
            own = not conn.in_transaction
            if own:
                conn.execute("BEGIN")  # one snapshot for every query of the plan
            try:
                p = plan(conn, store.settings, now, store.ctx.postings)
            finally:
                if own:
                    conn.execute("COMMIT")
        return SweepReport(now, True, p.decisions, counts_of(p.decisions))
    applied: list[SweepDecision] = []
    archives: list[int] = []
    skipped = 0
    stopped = False
    with store.ctx.write() as conn:
        p = plan(conn, store.settings, now, store.ctx.postings)
        batches = _batches(p)
        skipped += _apply_batch(store, conn, p, batches[0], now, applied, archives)
        if len(batches) == 1:
            _finish(store, conn, p, now, applied, archives, skipped)
    total = len(p.decisions)
    if progress is not None:
        progress(len(batches[0]), total)
    done = len(batches[0])
    for index in range(1, len(batches)):
        if cancel is not None and cancel():
            stopped = True
            with store.ctx.write() as conn:
                _finish(store, conn, p, now, applied, archives, skipped, planned=total)
            break
        with store.ctx.write() as conn:
            skipped += _apply_batch(store, conn, p, batches[index], now, applied, archives)
            if index == len(batches) - 1:
                _finish(store, conn, p, now, applied, archives, skipped)
        done += len(batches[index])
        if progress is not None:
            progress(done, total)
    if applied:
        store.forgetting.purge_deleted_terms()  # once for the whole sweep (inside a transaction it cannot checkpoint)
    order = {d.memory_id: i for i, d in enumerate(p.decisions)}
    applied.sort(key=lambda d: order[d.memory_id])  # archive groups ran last; report in the plan's order
    return SweepReport(now, False, applied, counts_of(applied), archives, skipped, stopped)


def _batches(p: SweepPlan) -> list[list[SweepDecision]]:
    """The plan's decisions in batches of :data:`APPLY_BATCH`, each archive group whole in one batch (its archive
    memory quotes every member); always at least one batch, so the bookkeeping is written even with no decisions."""
    grouped = {i for ids in p.archive_groups.values() for i in ids}
    plain = [d for d in p.decisions if d.memory_id not in grouped]
    batches = [plain[i : i + APPLY_BATCH] for i in range(0, len(plain), APPLY_BATCH)]
    by_id = {d.memory_id: d for d in p.decisions}
    batches += [[by_id[i] for i in ids] for ids in p.archive_groups.values()]
    return batches or [[]]


def _prepare_for_duplicates(store: MemoryStore) -> None:
    """Build the in-memory supersede index for the near-duplicate rule when a sweep may need it (tagged memories,
    duplicates not switched off): once per process, seconds at a million memories, before any write lock is taken,
    as remember does. A sweep compares every new tagged memory, a first sweep all of them."""
    if store.settings.duplicate_threshold >= 1.0:
        return
    with store.ctx.read() as conn:
        tagged = conn.execute("SELECT EXISTS (SELECT 1 FROM memory_tags)").fetchone()[0]
    if tagged:
        store.ctx.prepare_postings()


def _still_due(conn: Connection, p: SweepPlan, d: SweepDecision, settings: StoreSettings, now_ts: float, postings: SimilarityPostings) -> bool:
    """Whether a planned decision still holds (a later batch runs after other writers had their turn)."""
    view = StoreView(conn, postings)
    row = view.row(d.memory_id)
    if row is None or row.pinned:
        return False
    return rules.rule_named(d.rule).still_due(row, d, view, settings, datetime.fromtimestamp(now_ts, tz=timezone.utc))


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
    due = [d for d in batch if _still_due(conn, p, d, settings, ts, store.ctx.postings)]
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
        # No "derives" links: the sources are erased just below; the archive's metadata names them.
        archive_id = store.memories.insert_derived(
            conn, content=content, title=title, type_="archive", layer="semantic", project=rows[0][6], tags=tags[:50],
            importance=max(r[5] for r in rows), metadata={"source_ids": source_ids, "archived_by": "sweep", "archived_at": now.isoformat()}, now=now,
        )  # fmt: skip
        store.ctx.audit(conn, "sweep", [archive_id], {"rule": "capacity", "action": "write_archive", "source_ids": source_ids}, now)
        archives.append(archive_id)
    # Consecutive erasures go to the store together (one DELETE for them all: see ForgettingRepository.forget_each);
    # a near-duplicate in between is applied in its place, so everything happens in the plan's order.
    erasures: list[ForgetGroup] = []

    def erase() -> None:
        if erasures:
            store.forgetting.forget_each(erasures, now=now, operation="sweep")
            erasures.clear()

    for d in due:
        details: dict[str, Any] = {"rule": d.rule, "action": d.action, "numbers": d.numbers}
        if d.action == "mark_not_latest":
            erase()
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
            store.memories.link(conn, link.newer_id, d.memory_id, "supersedes", ts, link.similarity)
            # The cascade, as on any supersede: what pointed at the duplicate now points at the version that
            # replaced it too (a summary's sources, a contradiction), audited by carry_relations itself.
            carried = store.memories.carry_relations(conn, d.memory_id, link.newer_id, now)
            from memlens.conflicts import close_superseded

            close_superseded(conn, store.ctx, d.memory_id, link.newer_id, now)
            details["carried_relations"] = len(carried)
            store.ctx.audit(conn, "sweep", [d.memory_id, link.newer_id], {**details, "newer_id": link.newer_id, "reason": d.reason}, now)
        else:
            if d.action == "archive":
                details["archived_into"] = archive_id
            erasures.append(ForgetGroup(p.chain_ids.get(d.memory_id, [d.memory_id]), d.reason, details))
        applied.append(d)
    erase()
    return len(batch) - len(due)


def _finish(
    store: MemoryStore,
    conn: Connection,
    p: SweepPlan,
    now: datetime,
    applied: list[SweepDecision],
    archives: list[int],
    skipped: int,
    *,
    planned: int | None = None,
) -> None:
    """The sweep's own audit entry and its near-duplicate bookkeeping, written with the last batch; ``planned``
    (the size of the plan) when the sweep was cancelled before it, which keeps the bookkeeping as it was."""
    details: dict[str, Any] = {"counts": counts_of(applied), "decisions": len(applied), "archives": archives, "skipped": skipped}
    if planned is not None:
        details.update(stopped=True, planned=planned)
    store.ctx.audit(conn, "sweep_run", [], details, now)
    if planned is not None:
        return
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
