"""Forgetting: erasing memories so their text is gone from every place listed in :data:`ERASED_FROM`.

What survives a forget is a tombstone (the text's SHA-256, the source reference and the creation time, so an
import never brings the memory back, yet another memory with the same text is still welcome) and an audit entry with the id, the hash and the reason, never the text. A chain whose latest version
is erased gets its newest remaining version back as latest; summaries derived from an erased memory are flagged
for review.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from memlens import db, supersede
from memlens.errors import InvalidInput
from memlens.models import ts_from_dt
from memlens.postgres import is_postgres
from memlens.storage import index_context
from memlens.storage.context import ERASURE_PENDING_KEY, AuditEntry, StoreContext, content_hash
from memlens.storage.memories import MemoryRepository
from memlens.storage.results import ForgetResult
from memlens.storage.sessions import SessionRepository
from memlens.storage.validation import check_id, check_optional_name
from memlens.text import match_expression, query_terms, similarity_tokens

#: What "erased" means: once ``forget`` returns (and its result names nothing pending), the forgotten text is in
#: none of these places. Each has a test (tests/test_erasure.py; the hook log and spool in tests/test_hooks*.py).
ERASED_FROM: tuple[tuple[str, str], ...] = (
    ("store", "the main file: rows, full-text and supersede indexes; freed space is zeroed (secure_delete)"),
    ("wal", "the -wal file: checkpointed into the main file and truncated (retried while another process reads)"),
    ("shm", "the -shm file: holds page numbers only, never text"),
    ("hook log", "hook.log beside the store: never holds an event's text, only its kind, size and hash (memlens.hooks)"),
    ("pending spool", "hook events queued while the store was busy: each leaves the file once recorded (memlens.hooks)"),
    ("backups made later", "memlens backup copies the store as it is after the forget"),
    ("exports made later", "memlens export writes what the store holds; imports of older exports are refused by tombstone"),
)
#: How long a forget keeps retrying the checkpoint while another process's read transaction holds old pages.
ERASURE_WAIT_SECONDS = 3.0


#: From this many rows, :meth:`ForgettingRepository.forget_each` deletes plainly and then merges the full-text
#: indexes (dropping the deleted terms) instead of FTS5's per-row secure-delete.
BULK_PURGE_ROWS = 100
_INDEXES = ("memory_fts", "similarity_index")
#: Ids per ``IN (...)`` list: well below SQLite's limit on bound parameters.
_CHUNK = 500


class _Doomed(NamedTuple):
    """What a forget reads of a memory before erasing it."""

    id: int
    content: str
    is_latest: int
    chain_id: int
    content_hash: str
    source_ref: str | None
    created_at: float


def _chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


def _read_doomed(conn: db.Connection, ids: Sequence[int]) -> list[_Doomed]:
    """The stored memories among ``ids`` (unknown ids left out)."""
    sql = "SELECT id, content, is_latest, chain_id, content_hash, source_ref, created_at FROM memories WHERE id IN ({marks})"
    return [_Doomed(*row) for row in db.select_in(conn, sql, ids)]


def _leave_tombstones(conn: db.Connection, doomed: Iterable[_Doomed], now: datetime) -> None:
    """Record each erased memory's text hash, source id and creation time, so an import never brings it back."""
    forgotten_at = ts_from_dt(now)
    conn.executemany(
        "INSERT INTO forgotten(content_hash, source_ref, memory_created_at, forgotten_at) VALUES (?, ?, ?, ?)",
        [(d.content_hash, d.source_ref, d.created_at, forgotten_at) for d in doomed],
    )


def _delete(conn: db.Connection, ids: Sequence[int]) -> None:
    for chunk in _chunks(ids):
        conn.execute(f"DELETE FROM memories WHERE id IN ({','.join('?' * len(chunk))})", list(chunk))


def _restore_latest(conn: db.Connection, chain_ids: Iterable[int]) -> dict[int, int]:
    """Give each chain that lost its latest version its newest remaining version back as latest; returns
    {chain id: the version made latest} for the chains that had one left, in the order of ``chain_ids``."""
    chains = list(chain_ids)
    with_latest = {r[0] for r in db.select_in(conn, "SELECT chain_id FROM memories WHERE chain_id IN ({marks}) AND is_latest = 1", chains)}
    orphaned = [c for c in chains if c not in with_latest]
    newest: dict[int, tuple[int, int, str]] = {}  # chain id -> (version, id, content) of its newest remaining version
    for chain_id, memory_id, version, content in db.select_in(conn, "SELECT chain_id, id, version, content FROM memories WHERE chain_id IN ({marks})", orphaned):
        if chain_id not in newest or (version, memory_id) > newest[chain_id][:2]:
            newest[chain_id] = (version, memory_id, content)
    restored = {chain_id: newest[chain_id][1] for chain_id in orphaned if chain_id in newest}
    conn.executemany("UPDATE memories SET is_latest = 1 WHERE id = ?", [(memory_id,) for memory_id in restored.values()])
    supersede.index_latest_many(conn, [(newest[chain_id][1], similarity_tokens(newest[chain_id][2])) for chain_id in restored])
    return restored


@dataclass(frozen=True)
class ForgetGroup:
    """Memories erased together under one audit entry by :meth:`ForgettingRepository.forget_each`: the reason and
    the further details that entry records (a sweep decision's rule, action and numbers)."""

    ids: Sequence[int]
    reason: str | None
    details: Mapping[str, Any] = field(default_factory=dict)


class ForgettingRepository:
    """Erasing memories (one, several, a session's, those matching a filter) and the tombstones they leave."""

    def __init__(self, ctx: StoreContext, memories: MemoryRepository, sessions: SessionRepository) -> None:
        self.ctx = ctx
        self.memories = memories
        self.sessions = sessions

    def forget(
        self, memory_id: int, *, reason: str | None = None, whole_chain: bool = False, now: datetime, actor: str | None = None
    ) -> ForgetResult:
        """Erase a memory (or its whole version chain): the text is gone from the file, the index and the WAL.

        If the latest version is forgotten alone, the newest remaining version becomes latest again. The audit
        log keeps the id, a hash of the text and the reason, never the text.
        """
        m = self.memories.get(memory_id)
        ids = [v.id for v in self.memories.history(memory_id)] if whole_chain else [m.id]
        return self.forget_ids(ids, reason=check_optional_name(reason, "reason"), now=now, operation="forget", actor=actor, extra={"whole_chain": whole_chain})

    def forget_many(self, memory_ids: Iterable[int], *, reason: str | None = None, whole_chain: bool = False, now: datetime) -> ForgetResult:
        """Forget several memories in one transaction (the GUI's multi-select)."""
        ids: list[int] = []
        for memory_id in dict.fromkeys(check_id(i) for i in memory_ids):
            if whole_chain:
                ids.extend(v.id for v in self.memories.history(memory_id))
            else:
                ids.append(memory_id)  # an unknown id is simply not erased (forget_ids reads what is there)
        return self.forget_ids(list(dict.fromkeys(ids)), reason=check_optional_name(reason, "reason"), now=now, operation="forget", extra={"whole_chain": whole_chain})

    def forget_session(self, session_id: str, *, reason: str | None = None, now: datetime) -> ForgetResult:
        """Erase every memory recorded in a session, and the session itself."""
        session_id = self.sessions.get(session_id).id
        with self.ctx.read() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM memories WHERE session_id = ?", (session_id,)).fetchall()]
        return self.forget_ids(
            ids, reason=check_optional_name(reason, "reason"), now=now, operation="forget_session", extra={"session_id": session_id}, drop_session=session_id
        )

    def forget_filtered(self, query: str | None, where: list[str], params: list[Any], *, reason: str | None, now: datetime) -> ForgetResult:
        """Erase every memory (all versions) passing the filter ``where``/``params`` over ``memories m`` (made by the
        search filters) and, when ``query`` is given, matching it in the full-text index (all of its terms)."""
        if query is not None and not isinstance(query, str):
            raise InvalidInput(f"query must be text, not {type(query).__name__}")
        where, params = list(where), list(params)
        if query:
            terms = query_terms(query)
            if not terms:
                return ForgetResult((), (), reason)
            # A memory's own words only: not the neighbour's text or the dates indexed with it (schema 11).
            if is_postgres(self.ctx.conn):
                from memlens.postgres import fts

                with self.ctx.read() as conn:
                    matched = fts.matching_ids(conn.raw, match_expression(terms, "AND"), ("title", "content", "tags"))
                where.append("m.id = ANY(?)")
                params.append(matched)
            else:
                where.append("m.id IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?)")
                params.append("{title content tags} : (" + match_expression(terms, "AND") + ")")
        sql = "SELECT m.id FROM memories m WHERE " + " AND ".join(where)
        with self.ctx.read() as conn:
            ids = [r[0] for r in conn.execute(sql, params).fetchall()]
        return self.forget_ids(ids, reason=check_optional_name(reason, "reason"), now=now, operation="forget", extra={"filter": True})

    def was_forgotten(self, content: str, source_ref: str | None, created_at: datetime) -> bool:
        """Whether this very memory was erased from this store by a forget: the same text and the same source id
        or, for a memory without one, the same text and creation time. Another memory that only shares the text is
        not refused. (Tombstones from before schema 4 lack the creation time: they match on text and source id.)"""
        created = ts_from_dt(created_at)
        with self.ctx.read() as conn:
            rows = conn.execute(
                "SELECT source_ref, memory_created_at FROM forgotten WHERE content_hash = ?", (content_hash(content),)
            ).fetchall()
        for tomb_source, tomb_created in rows:
            if tomb_source != source_ref:
                continue
            # A source id names the memory by itself; the creation time is what names one that has none.
            if source_ref is not None or tomb_created is None or abs(tomb_created - created) < 1e-5:
                return True
        return False

    def forget_ids(
        self,
        ids: list[int],
        *,
        reason: str | None,
        now: datetime,
        operation: str,
        actor: str | None = None,
        extra: Mapping[str, Any] | None = None,
        drop_session: str | None = None,
        flag_derived: bool = True,
        purge: bool = True,
    ) -> ForgetResult:
        """Erase ``ids`` in one transaction with one audit entry.

        ``flag_derived`` marks summaries derived from an erased memory for review (an explicit forget may have been
        about text they quote; a sweep forgetting faded observations is what consolidation exists for, so it passes
        False). ``purge=False`` leaves the index purge to the caller, who batches many forgets (the sweep).
        """
        group = ForgetGroup(ids, reason, extra or {})
        with self.ctx.write() as conn:
            (result,) = self._erase(conn, [group], now=now, operation=operation, actor=actor, flag_derived=flag_derived, drop_session=drop_session)
        pending = None
        if (result.erased or drop_session) and purge:
            pending = self.purge_deleted_terms()
        return ForgetResult(result.erased, result.restored_latest, reason, pending)

    def forget_each(self, groups: Sequence[ForgetGroup], *, now: datetime, operation: str, actor: str | None = None) -> list[ForgetResult]:
        """Erase several groups of memories in one transaction, each group with an audit entry of its own (its
        reason and details), as :meth:`forget_ids` would one group after another with ``flag_derived=False`` and
        ``purge=False`` (the caller checkpoints the WAL afterwards: the sweep, once after its last batch)."""
        with self.ctx.write() as conn:
            return self._erase(conn, groups, now=now, operation=operation, actor=actor, flag_derived=False)

    def _erase(
        self,
        conn: db.Connection,
        groups: Sequence[ForgetGroup],
        *,
        now: datetime,
        operation: str,
        actor: str | None,
        flag_derived: bool,
        drop_session: str | None = None,
    ) -> list[ForgetResult]:
        """Erase every group's memories inside the caller's transaction, one audit entry a group (none for a group
        that erased nothing, unless it drops a session), and report what each group erased and brought back.

        Why all at once: one DELETE for all the rows, and from :data:`BULK_PURGE_ROWS` rows one merge of each
        full-text index instead of FTS5's secure-delete row by row (2,000 forgets at 200k memories: about a second
        instead of ten and more)."""
        rows = {d.id: d for d in _read_doomed(conn, list(dict.fromkeys(i for g in groups for i in g.ids)))}
        _leave_tombstones(conn, rows.values(), now)
        # (summary, source) pairs whose source is erased here, read before the links go with the rows.
        derived: set[tuple[int, int]] = set()
        if flag_derived:
            for chunk in _chunks(list(rows)):
                derived.update(self.memories.derived_from(conn, chunk))
        # Many rows: FTS5's secure-delete (a few milliseconds a row at 200k) costs more than deleting plainly and
        # merging each index into one segment afterwards, which drops the deleted terms just as well (0.3 s at
        # 200k). Both happen in this transaction, so no one ever sees the indexes holding erased text.
        bulk = self.ctx.fts_secure and len(rows) >= BULK_PURGE_ROWS
        if bulk:
            for table in _INDEXES:
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('secure-delete', 0)")
        supersede.unindex_latest_many(conn, [(d.id, similarity_tokens(d.content)) for d in rows.values() if d.is_latest])
        # The turns whose indexed context holds an erased text (it came before them, or stood for its chain): read
        # before the rows go, given their new context after (memlens.storage.index_context).
        neighbours = [i for i in index_context.chain_followers(conn, {d.chain_id for d in rows.values()}) if i not in rows]
        _delete(conn, list(rows))
        restored = _restore_latest(conn, dict.fromkeys(d.chain_id for d in rows.values()))
        # Before the merge: the neighbours' old index rows (with the erased words) are dropped by it too.
        index_context.refresh(conn, neighbours)
        if bulk:
            for table in _INDEXES:
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('secure-delete', 1)")
        if drop_session is not None:
            conn.execute("DELETE FROM sessions WHERE id = ?", (drop_session,))
            conn.execute("INSERT OR REPLACE INTO forgotten_sessions(session_id, forgotten_at) VALUES (?, ?)", (drop_session, ts_from_dt(now)))
        if rows or drop_session:
            # Cleared once the old page images are overwritten (by the purge that follows, or the next process).
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (ERASURE_PENDING_KEY, now.isoformat()))
        results: list[ForgetResult] = []
        entries: list[AuditEntry] = []
        done: set[int] = set()
        for group in groups:
            ids = [i for i in dict.fromkeys(group.ids) if i in rows and i not in done]
            done.update(ids)
            back = [restored.pop(chain) for chain in dict.fromkeys(rows[i].chain_id for i in ids) if chain in restored]
            if ids or drop_session:
                details: dict[str, Any] = {"reason": group.reason, "content_sha256": {str(i): rows[i].content_hash for i in ids}, "count": len(ids)}
                if back:
                    details["restored_latest"] = back
                details.update(group.details)
                entries.append((operation, ids if len(ids) <= 1000 else [], details))
            results.append(ForgetResult(tuple(ids), tuple(back), group.reason))
        self.ctx.audit_many(conn, entries, now, actor)
        if flag_derived:
            self.memories.flag_for_review(conn, derived, list(rows), now)
        return results

    def purge_deleted_terms(self, *, wait: float | None = None) -> str | None:
        """Make deleted text unrecoverable from the file: FTS5 keeps deleted terms in old index segments until
        they are merged, so without FTS5 secure-delete (SQLite < 3.42) the indexes are rewritten; then the WAL is
        checkpointed into the main file (overwriting the old pages there) and truncated.

        Another process in a read transaction keeps old page images alive; the checkpoint is retried for ``wait``
        seconds (default :data:`ERASURE_WAIT_SECONDS`) in case it moves on. Returns None when the erasure is
        complete, else what is still pending; the store stays marked and the next memlens process to open, write
        or close it finishes the job.
        """
        if is_postgres(self.ctx.conn):
            return self.ctx.vacuum_erased()
        if not self.ctx.fts_secure:
            with self.ctx.write() as c:
                c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (ERASURE_PENDING_KEY, "fts optimize"))
                for table in ("memory_fts", "similarity_index"):
                    c.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
        deadline = time.monotonic() + (ERASURE_WAIT_SECONDS if wait is None else wait)
        delay = 0.02
        while not self.ctx.finish_erasure():
            if time.monotonic() >= deadline:
                with self.ctx.write() as conn:
                    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (ERASURE_PENDING_KEY, "checkpoint blocked by a reader"))
                return (
                    "the erased text is gone from the table and the indexes, but old copies of its pages are still in "
                    f"{Path(self.ctx.path).name} or its -wal file: another connection is reading the store. They are "
                    "overwritten as soon as that reader ends and any memlens process next opens or closes the store"
                )
            time.sleep(delay)  # outside the store's lock: this process's other threads carry on meanwhile
            delay = min(delay * 2, 0.25)
        return None

    def was_session_forgotten(self, session_id: str) -> bool:
        """Whether a session with this id was erased from this store by ``forget --session``."""
        with self.ctx.read() as conn:
            return conn.execute("SELECT 1 FROM forgotten_sessions WHERE session_id = ?", (session_id,)).fetchone() is not None
