"""The audit log: reading it, checking its hash chain and seals, and recording an engine operation as one entry.

Entries are appended by :meth:`memlens.storage.context.StoreContext.audit` inside the write transaction of the
change they describe; the log is append-only (triggers refuse updates and deletes), each entry carries the hash of
the one before, and, from schema 6 on, an HMAC seal (table ``audit_seals``) keyed by a secret outside the store, with the log's head
checkpointed outside the store after every write (see :mod:`memlens.storage.audit_seal`). :func:`verify_chain`
finds an entry altered or missing, a chain recomputed after an edit, a forged entry, a log cut back behind its
last checkpoint, a store whose id was deleted or replaced to escape its key and checkpoints, and index rows (``audit_targets``) that no longer match the entries they index.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memlens import db
from memlens.errors import InvalidInput
from memlens.models import utc_from_ts
from memlens.storage import audit_seal, checkpoint_writer
from memlens.storage.audit_seal import Checkpoint
from memlens.storage.context import GENESIS_HASH, MAX_INDEXED_TARGETS, StoreContext, audit_checkpoint, audit_hash, has_seal_table
from memlens.storage.results import AuditCheck, AuditEntry
from memlens.storage.validation import check_count, check_id, check_key, check_when


def verify_chain(conn: db.Connection, *, store_path: Path | str | None = None, published: Sequence[Checkpoint] = ()) -> AuditCheck:
    """Check the audit log; report the first problem found, plain chain first:

    an entry altered or missing (the hash chain); ``audit_targets`` rows deleted or added (they must index exactly
    the targets the chained entries name); an entry whose HMAC seal does not match (the chain was recomputed after
    an edit, or the entry forged) or that has none after sealing began; a log behind its last checkpoint (newest
    entries removed), or differing from it at the checkpoint's head; and, for a sealed store, a key that is missing
    (the plain chain is still checked and its result named); a schema-6 store without an id, or whose seals stop
    where a genuine checkpoint (kept for this file under any id, or for this id at any path) says sealing began.
    ``store_path`` picks the local checkpoint (default:
    the connection's file); ``published`` adds checkpoints a team kept elsewhere.

    Takes a bare connection so that ``memlens doctor`` checks a file with the same walk the store uses.
    """
    checkpoint_writer.flush_all()  # this process's own newest checkpoints first
    sid = audit_seal.store_id(conn)
    key = audit_seal.load_key(sid) if sid else None
    path = store_path if store_path is not None else _main_file(conn)
    local = audit_seal.read_checkpoint(audit_seal.checkpoint_path(sid, path)) if sid and path else None
    checkpoints = [c for c in (local, *published) if c is not None]
    anchored = max((c.entries for c in checkpoints), default=0)
    wanted_hashes = {c.entries for c in checkpoints}
    hashes: dict[int, str] = {}
    indexed: dict[int, set[int]] = {}
    prev_hash, prev_seal, prev_id, checked = GENESIS_HASH, None, 0, 0
    first_sealed: int | None = None
    seal_problem: tuple[int, str] | None = None
    sealable = has_seal_table(conn)
    seals = "(SELECT seal FROM audit_seals s WHERE s.audit_id = a.id)" if sealable else "NULL"
    restarted_at: float | None = None
    for entry_id, at, op, actor, targets, details, stored_prev, digest, entry_seal in conn.execute(
        f"SELECT a.id, a.at, a.operation, a.actor, a.target_ids, a.details, a.prev_hash, a.hash, {seals} FROM audit a ORDER BY a.id"
    ):
        if entry_id == 1 and op == "repair" and entry_seal is not None and '"audit_log_missing":true' in details:
            restarted_at = at  # the doctor began a new log after the table was lost; older checkpoints describe the old one
        if stored_prev != prev_hash:
            missing = entry_id != prev_id + 1
            problem = f"entry {prev_id + 1} is missing" if missing else f"entry {entry_id} does not follow entry {prev_id}"
            return AuditCheck(False, checked, prev_id + 1 if missing else entry_id, problem)
        if audit_hash(stored_prev, at, op, actor, targets, details) != digest:
            return AuditCheck(False, checked, entry_id, f"entry {entry_id} was altered")
        if entry_seal is not None and first_sealed is None:
            first_sealed = entry_id
        if key is not None and seal_problem is None:
            if entry_seal is None and first_sealed is not None:
                seal_problem = (entry_id, f"entry {entry_id} has no HMAC seal though the log is sealed from entry {first_sealed}: it was forged (or written without this store's key)")
            elif entry_seal is not None and not hmac.compare_digest(str(entry_seal), audit_seal.seal(key, prev_seal or stored_prev, digest)):
                how = "forged: it was added without the store's key" if entry_id > anchored else "edited and the chain recomputed, or forged"
                seal_problem = (entry_id, f"entry {entry_id} fails its HMAC seal (the log was {how})")
        target_list = json.loads(targets)
        if isinstance(target_list, list) and len(target_list) <= MAX_INDEXED_TARGETS:
            indexed[entry_id] = {int(t) for t in target_list}
        if entry_id in wanted_hashes:
            hashes[entry_id] = digest
        prev_hash, prev_seal, prev_id = digest, entry_seal, entry_id
        checked += 1
    seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'audit'").fetchone()
    if seq and seq[0] > prev_id:
        return AuditCheck(False, checked, prev_id + 1, f"entries after {prev_id} are missing")
    bad_index = _targets_problem(conn, indexed)
    if bad_index:
        return AuditCheck(False, checked, bad_index[0], bad_index[1])
    if seal_problem:
        return AuditCheck(False, checked, seal_problem[0], seal_problem[1])
    if restarted_at is not None:
        checkpoints = [cp for cp in checkpoints if _checkpoint_time(cp) > restarted_at]
    if sealable and sid is None:
        # Schema 6 gives every store an id; without it the key, the seals and the checkpoints could not be found.
        recorded = audit_seal.checkpoints_for_file(path) if path else []
        if recorded or checked:
            return AuditCheck(False, checked, None, _identity_removed(recorded, checked))
    for cp in checkpoints:
        behind = _checkpoint_problem(cp, sid, key, prev_id, hashes, first_sealed)
        if behind:
            return AuditCheck(False, checked, behind[0], behind[1])
    sealed_from = _meta_int(conn, "audit_sealed_from")
    if key is not None and sealed_from is not None and first_sealed != sealed_from:
        where = f"entry {first_sealed}" if first_sealed else "no entry"
        return AuditCheck(False, checked, sealed_from, f"the log was sealed from entry {sealed_from}, but {where} carries the first seal: seals were removed")
    if sealable:
        unsealed = _seals_missing(sid, path, published, prev_id, first_sealed, restarted_at)
        if unsealed:
            return AuditCheck(False, checked, unsealed[0], unsealed[1])
    if key is None and (first_sealed is not None or sealed_from is not None or checkpoints):
        return AuditCheck(
            False,
            checked,
            None,
            f"the audit key of this store (id {sid}) is missing from {audit_seal.keys_dir()}: the hash chain is intact "
            f"({checked} entries), but seals and checkpoints cannot be checked, so a recomputed or forged entry would go unnoticed",
        )
    return AuditCheck(True, checked)


def _identity_removed(recorded: Sequence[Checkpoint], checked: int) -> str:
    problem = "the store's audit identity was removed: it has no store id (meta.store_id), which every schema-6 store is given"
    if recorded:
        newest = max(recorded, key=lambda cp: cp.entries)
        problem += f"; the checkpoint of {newest.at} kept for this file names store {newest.store_id} with {newest.entries} entries (the log now has {checked})"
    return problem + ", so its key, seals and checkpoints were cut off"


def _seals_missing(
    sid: str | None, path: Path | str | None, published: Sequence[Checkpoint], head: int, first_sealed: int | None, restarted_at: float | None
) -> tuple[int, str] | None:
    """The first sealed entry a genuine checkpoint promises (one kept for this file under any id, one of this store
    at any path, or a published one) where this log has entries but no seal from there on: seals and
    ``audit_sealed_from`` deleted, with the id changed or a copy verified where it has no checkpoint of its own."""
    claims = [*(audit_seal.checkpoints_for_file(path) if path else []), *(audit_seal.checkpoints_for_store(sid) if sid else []), *published]
    for cp in claims:
        if cp.sealed_from is None or head < cp.sealed_from or (first_sealed is not None and first_sealed <= cp.sealed_from):
            continue
        if restarted_at is not None and _checkpoint_time(cp) <= restarted_at:
            continue
        key = audit_seal.load_key(cp.store_id)
        if key is None or not cp.signature_ok(key):
            continue  # only a checkpoint made with a key this machine holds can promise anything
        where = f"entry {first_sealed}" if first_sealed else "no entry"
        if cp.store_id == sid:
            return (cp.sealed_from, f"the checkpoint of {cp.at} says this store is sealed from entry {cp.sealed_from}, but {where} carries the first seal: seals were removed")
        return (
            cp.sealed_from,
            f"the checkpoint of {cp.at} kept for this file names store {cp.store_id}, sealed from entry {cp.sealed_from}, but this store "
            f"now calls itself {sid} and {where} carries the first seal: its audit identity was replaced and its seals removed",
        )
    return None


def _checkpoint_time(cp: Checkpoint) -> float:
    try:
        return datetime.fromisoformat(cp.at).timestamp()
    except ValueError:
        return float("inf")


def _main_file(conn: db.Connection) -> str | None:
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return str(row[2]) or None
    return None


def _meta_int(conn: db.Connection, key: str) -> int | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row and str(row[0]).isdigit() else None


def _targets_problem(conn: db.Connection, indexed: dict[int, set[int]]) -> tuple[int, str] | None:
    """The first entry whose ``audit_targets`` rows differ from the targets it names (rows are an index of the
    chained ``target_ids``, so deleting or adding them is tampering the chain would otherwise not see)."""
    found: dict[int, set[int]] = {}
    for memory_id, audit_id in conn.execute("SELECT memory_id, audit_id FROM audit_targets"):
        found.setdefault(int(audit_id), set()).add(int(memory_id))
    for audit_id in sorted(set(indexed) | set(found)):
        expected, rows = indexed.get(audit_id), found.get(audit_id, set())
        if expected is None:
            return (audit_id, f"audit_targets has rows for entry {audit_id}, which does not exist or does not name them")
        if rows != expected:
            what = "were deleted" if rows < expected else "were added or changed"
            return (audit_id, f"audit_targets rows of entry {audit_id} {what} (the entry names {len(expected)} memories, the index {len(rows)})")
    return None


def _checkpoint_problem(
    cp: Checkpoint, sid: str | None, key: bytes | None, head: int, hashes: dict[int, str], first_sealed: int | None
) -> tuple[int | None, str] | None:
    if cp.store_id != sid:
        return (None, f"the checkpoint of {cp.at} is for another store (id {cp.store_id}; this store is {sid})")
    if key is not None and not cp.signature_ok(key):
        return (None, f"the checkpoint of {cp.at} is not signed with this store's key: it was altered or forged")
    if head < cp.entries:
        return (
            head + 1,
            f"the log was truncated: it ends at entry {head}, but the checkpoint of {cp.at} recorded {cp.entries} entries "
            "(entries were deleted, or the store was replaced by an older copy)",
        )
    if hashes.get(cp.entries) != cp.head_hash:
        return (cp.entries, f"entry {cp.entries} differs from the checkpoint of {cp.at}: the log was rewritten")
    if cp.sealed_from is not None and first_sealed != cp.sealed_from:
        return (cp.sealed_from, f"the checkpoint of {cp.at} says the log is sealed from entry {cp.sealed_from}: seals were removed")
    return None


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
        with self.ctx.read() as conn:
            rows = db.select_in(conn, f"SELECT {_ENTRY_COLUMNS} FROM audit a WHERE a.id IN ({{marks}})", wanted)
            found = {e.id: e for e in map(_entry_from_row, rows)}
        return [found[i] for i in wanted if i in found]

    def operations(self) -> list[str]:
        """The distinct operations present in the audit log."""
        with self.ctx.read() as conn:
            return [r[0] for r in conn.execute("SELECT DISTINCT operation FROM audit ORDER BY operation").fetchall()]

    def verify(self, published: Sequence[Checkpoint] = ()) -> AuditCheck:
        """Check the log, its seals and its checkpoints (see :func:`verify_chain`); ``published`` adds checkpoints
        kept elsewhere (read with :func:`read_published`)."""
        with self.ctx.read() as conn:
            return verify_chain(conn, store_path=self.ctx.path, published=published)

    def checkpoint(self, *, now: datetime | None = None, export: Path | None = None) -> Checkpoint | None:
        """Record the log's head in the local checkpoint now and return it (None for an empty log); with ``export``
        also write it to that file (a new regular file) for a team to keep or publish."""
        checkpoint = self.ctx.save_checkpoint(now=now) if not self.ctx.readonly else None
        if checkpoint is None:
            with self.ctx.read() as conn:
                checkpoint = audit_checkpoint(conn, now=now)
        if checkpoint is not None and export is not None:
            _write_new_file(Path(export).expanduser(), checkpoint.to_json())
        return checkpoint

    def record(self, operation: str, target_ids: Iterable[int], details: Mapping[str, Any], *, now: datetime) -> int:
        """Record an operation done by an engine module outside a store method (e.g. a sweep with no changes)."""
        with self.ctx.write() as conn:
            return self.ctx.audit(conn, operation, target_ids, details, now)


def read_published(path: Path | str) -> Checkpoint:
    """A checkpoint written by ``memlens audit checkpoint --export``; InvalidInput when the file is not one."""
    try:
        return Checkpoint.from_json(Path(path).expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be read: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError):
        raise InvalidInput(f"{path} is not a memlens audit checkpoint") from None


def _write_new_file(path: Path, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        raise InvalidInput(f"{path} already exists; choose a new file name for the checkpoint") from None
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be written: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
