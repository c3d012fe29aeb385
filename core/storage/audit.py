"""The audit log: reading it, checking its hash chain, and recording an engine operation as one entry.

Entries are appended by :meth:`memlens.storage.context.StoreContext.audit` inside the write transaction of the
change they describe; the log is append-only (triggers refuse updates and deletes) and each entry carries the hash
of the one before, so :func:`verify_chain` finds an altered or missing entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memlens import db
from memlens.models import utc_from_ts
from memlens.storage.context import GENESIS_HASH, StoreContext, audit_hash
from memlens.storage.results import AuditCheck, AuditEntry
from memlens.storage.validation import check_count, check_id, check_key, check_when


def verify_chain(conn: db.Connection) -> AuditCheck:
    """Walk the audit log's hash chain; report the first entry that was altered, or a gap where one is missing.

    Takes a bare connection so that ``memlens doctor`` checks a file with the same walk the store uses.
    """
    prev_hash = GENESIS_HASH
    prev_id = 0
    checked = 0
    for entry_id, at, op, actor, targets, details, stored_prev, digest in conn.execute(
        "SELECT id, at, operation, actor, target_ids, details, prev_hash, hash FROM audit ORDER BY id"
    ):
        if stored_prev != prev_hash:
            missing = entry_id != prev_id + 1
            problem = f"entry {prev_id + 1} is missing" if missing else f"entry {entry_id} does not follow entry {prev_id}"
            return AuditCheck(False, checked, prev_id + 1 if missing else entry_id, problem)
        if audit_hash(stored_prev, at, op, actor, targets, details) != digest:
            return AuditCheck(False, checked, entry_id, f"entry {entry_id} was altered")
        prev_hash, prev_id = digest, entry_id
        checked += 1
    seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'audit'").fetchone()
    if seq and seq[0] > prev_id:
        return AuditCheck(False, checked, prev_id + 1, f"entries after {prev_id} are missing")
    return AuditCheck(True, checked)


#: Ids bound per ``IN (...)`` query (well below SQLite's limit on bound parameters).
_ID_BATCH = 500
_ENTRY_COLUMNS = "a.id, a.at, a.operation, a.actor, a.target_ids, a.details, a.hash"


def _filter_sql(operation: str | None, target_id: int | None, since: datetime | None, until: datetime | None) -> tuple[str, list[Any]]:
    """The WHERE clause (with a leading space, or empty) and its parameters for an audit filter."""
    where: list[str] = []
    params: list[Any] = []
    if operation:
        where.append("a.operation = ?")
        params.append(check_key(operation, "operation"))
    if target_id is not None:
        where.append("a.id IN (SELECT audit_id FROM audit_targets WHERE memory_id = ?)")
        params.append(check_id(target_id))
    if since is not None:
        where.append("a.at >= ?")
        params.append(check_when(since, "since"))
    if until is not None:
        where.append("a.at < ?")
        params.append(check_when(until, "until"))
    return (" WHERE " + " AND ".join(where) if where else ""), params


def _entry_from_row(row: Any) -> AuditEntry:
    entry_id, at, operation, actor, targets, details, digest = row
    return AuditEntry(entry_id, utc_from_ts(at), operation, actor, tuple(json.loads(targets)), json.loads(details), digest)  # type: ignore[arg-type]


class AuditRepository:
    """Reading and checking the ``audit`` table (writing is the context's :meth:`~StoreContext.audit`)."""

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx

    def entries(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        operation: str | None = None,
        target_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[AuditEntry]:
        """Audit entries, newest first, optionally filtered by operation, target memory and time."""
        where, params = _filter_sql(operation, target_id, since, until)
        sql = f"SELECT {_ENTRY_COLUMNS} FROM audit a{where} ORDER BY a.id DESC LIMIT ? OFFSET ?"
        with self.ctx.read() as conn:
            rows = conn.execute(sql, [*params, check_count(limit, "limit"), check_count(offset, "offset")]).fetchall()
        return [_entry_from_row(r) for r in rows]

    def entry_ids(
        self,
        *,
        operation: str | None = None,
        target_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[int]:
        """The ids of every audit entry matching the filter, newest first (what :meth:`entries` pages through)."""
        where, params = _filter_sql(operation, target_id, since, until)
        with self.ctx.read() as conn:
            return [r[0] for r in conn.execute(f"SELECT a.id FROM audit a{where} ORDER BY a.id DESC", params)]

    def entries_by_id(self, entry_ids: Sequence[int]) -> list[AuditEntry]:
        """The audit entries with these ids, in the order given; ids with no entry are left out."""
        wanted = [check_id(i) for i in entry_ids]
        found: dict[int, AuditEntry] = {}
        with self.ctx.read() as conn:
            for start in range(0, len(wanted), _ID_BATCH):
                batch = wanted[start : start + _ID_BATCH]
                sql = f"SELECT {_ENTRY_COLUMNS} FROM audit a WHERE a.id IN ({','.join('?' * len(batch))})"
                found.update((e.id, e) for e in map(_entry_from_row, conn.execute(sql, batch).fetchall()))
        return [found[i] for i in wanted if i in found]

    def operations(self) -> list[str]:
        """The distinct operations present in the audit log."""
        with self.ctx.read() as conn:
            return [r[0] for r in conn.execute("SELECT DISTINCT operation FROM audit ORDER BY operation").fetchall()]

    def verify(self) -> AuditCheck:
        """Walk the hash chain (see :func:`verify_chain`)."""
        with self.ctx.read() as conn:
            return verify_chain(conn)

    def record(self, operation: str, target_ids: Iterable[int], details: Mapping[str, Any], *, now: datetime) -> int:
        """Record an operation done by an engine module outside a store method (e.g. a sweep with no changes)."""
        with self.ctx.write() as conn:
            return self.ctx.audit(conn, operation, target_ids, details, now)
