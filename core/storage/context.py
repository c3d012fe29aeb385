"""What every repository of a store shares: the connection, the lock, transactions, settings and the audit append.

A :class:`StoreContext` is made once per open store by :class:`memlens.store.MemoryStore` and handed to each
repository (memories, search, forgetting, sessions, audit, vectors, import/export) and to the lifecycle services.
Nothing here knows what a memory means; it only knows how to read and write the file safely.

Threads: one connection serves the whole store, so the context's re-entrant lock is held for every read as well as
for every write transaction. A thread that reads while another thread is inside a write transaction waits for the
commit instead of seeing rows that may still be rolled back.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlens import db
from memlens.config import StoreSettings
from memlens.errors import InvalidInput, MemlensError
from memlens.models import ts_from_dt
from memlens.postgres import is_postgres
from memlens.storage import audit_seal
from memlens.storage.checkpoint_writer import CheckpointWriter
from memlens.storage.validation import check_time

if TYPE_CHECKING:
    from memlens.supersede_postings import SimilarityPostings

#: The hash an audit chain starts from.
GENESIS_HASH = "0" * 64
#: How far a caller's ``now`` may be from the wall clock before the audit log records it as a separate ``as_of``.
CLOCK_TOLERANCE = timedelta(seconds=1)
#: Every operation the engine writes to the audit log (``memlens audit --operation`` offers these).
AUDIT_OPERATIONS = (
    "configure", "conflict", "consolidate", "embed", "end_session", "flag_review", "forget", "forget_session", "import", "recall",
    "relate", "remember", "remember_many", "repair", "reviewed", "supersede", "sweep", "sweep_run", "update",
)  # fmt: skip
#: Audit entries naming more memories than this keep their targets in the entry only (no per-target index rows).
MAX_INDEXED_TARGETS = 1000
#: The meta key set while a forget's erased text may still be in the store's main file or WAL (old page images
#: that a checkpoint could not yet overwrite because another connection was reading). Any memlens process that
#: opens or closes the store finishes the erasure and clears it (see :meth:`StoreContext.finish_erasure`).
ERASURE_PENDING_KEY = "erasure_pending"
#: The PostgreSQL tables a forget deletes rows from (or rewrites rows of), which VACUUM then clears of the dead row
#: versions: until then a deleted row's bytes stay in the table's pages (see :meth:`StoreContext.vacuum_erased`).
ERASED_TABLES = (
    "memories", "memory_tags", "access_log", "relations", "memory_vectors", "conflicts", "similarity_index",
    "memory_fts_postings", "memory_fts_docs", "sessions", "fts_pending", "meta",
)  # fmt: skip
#: The page cache of a store's connection (KiB; SQLite's default is 2 MiB). Pages are cached as they are read, so a
#: small store never uses it all. At a million memories the sweep reads the rows of the 1% that are due, about
#: 10,000 pages scattered over the file: 2 MiB rereads them all from the OS at every sweep (and a cache smaller
#: than that set rereads them just as much), 64 MiB keeps them.
PAGE_CACHE_KIB = 64 * 1024


def resolve_now(now: datetime | None) -> datetime:
    """``now`` checked to be an aware datetime, or the current UTC time when omitted."""
    if now is None:
        return datetime.now(timezone.utc)
    if not isinstance(now, datetime):
        raise InvalidInput(f"now must be a timezone-aware datetime, not {type(now).__name__}")
    if now.tzinfo is None:
        raise InvalidInput("now must be a timezone-aware datetime (for example datetime.now(timezone.utc))")
    check_time(now, "now")  # the same bounds as every input: dates near year 1 or 9999 overflow in arithmetic
    return now


def to_json(value: Any) -> str:
    """The compact, key-sorted JSON the store writes (stable, so hashes over it are stable)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def content_hash(text: str) -> str:
    """SHA-256 of a memory's text: what the audit log keeps of a forgotten memory instead of the text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def append_audit(
    conn: db.Connection,
    operation: str,
    target_ids: Iterable[int],
    details: Mapping[str, Any],
    now: datetime,
    actor: str,
) -> int:
    """Append one audit entry inside the caller's write transaction, chained to the previous one by hash and sealed
    with the store's key (see :mod:`memlens.storage.audit_seal`).

    The entry's time is always the wall clock: the log records when things happened. When ``now`` (the time the
    operation acted as of) differs from it by more than :data:`CLOCK_TOLERANCE`, it is kept as ``as_of`` (ISO 8601,
    UTC) in the details, inside the hash chain. Never pass memory text here: the log outlives what it describes (a
    forgotten memory leaves only its hash).

    The first entry written with a key records itself as ``audit_sealed_from`` in meta (the key is created then if
    the store has none yet). A sealed store whose key is missing here (another machine, a deleted key file) still
    gets its entry, unsealed: the verifier reports it, since it cannot tell it from a forged one.
    """
    return append_audits(conn, [(operation, target_ids, details)], now, actor)[0]


#: One audit entry to append: its operation, the memories it names and its details.
AuditEntry = tuple[str, Iterable[int], Mapping[str, Any]]


def append_audits(conn: db.Connection, entries: Sequence[AuditEntry], now: datetime, actor: str) -> list[int]:
    """Append several entries inside the caller's write transaction, exactly as :func:`append_audit` would one after
    another (the same chain, seals and targets; one wall-clock time for all), reading the log's head, the store's
    id and its key once instead of once an entry: a sweep writes an entry per decision. Returns their ids."""
    # What has_seal_table, store_id and _meta read, in one statement (every audited write asks).
    sealable, sid, sealed_from = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_seals'), "
        "(SELECT value FROM meta WHERE key = 'store_id'), (SELECT value FROM meta WHERE key = 'audit_sealed_from')"
    ).fetchone()
    sid = str(sid) if sealable and sid is not None else None
    sealed_from = str(sealed_from) if sealed_from is not None else None
    if sealable:
        prev = conn.execute(
            "SELECT id, hash, (SELECT seal FROM audit_seals WHERE audit_id = a.id) FROM audit a ORDER BY id DESC LIMIT 1"
        ).fetchone()
        prev_seal = str(prev[2]) if prev and prev[2] is not None else None
    else:
        prev, prev_seal = conn.execute("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1").fetchone(), None
    prev_hash = prev[1] if prev else GENESIS_HASH
    wall = datetime.now(timezone.utc)
    at = ts_from_dt(wall)
    as_of = now.astimezone(timezone.utc).isoformat() if abs(resolve_now(now) - wall) > CLOCK_TOLERANCE else None
    key = audit_seal.load_key(sid) if sid else None
    if sid and key is None and sealed_from is None:
        key = audit_seal.create_key(sid)
    ids: list[int] = []
    for operation, target_ids, details in entries:
        targets = sorted(set(target_ids))
        details_text = to_json({**details, "as_of": as_of} if as_of is not None else details)
        targets_text = to_json(targets)
        digest = audit_hash(prev_hash, at, operation, actor, targets_text, details_text)
        entry_seal = audit_seal.seal(key, prev_seal or prev_hash, digest) if key else None
        cur = conn.execute(
            "INSERT INTO audit(at, operation, actor, target_ids, details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (at, operation, actor, targets_text, details_text, prev_hash, digest),
        )
        audit_id = int(cur.lastrowid)
        if entry_seal:
            # OR REPLACE: after `doctor --repair` recreated a lost log, ids start again at 1 beside the old seals.
            conn.execute("INSERT OR REPLACE INTO audit_seals(audit_id, seal) VALUES (?, ?)", (audit_id, entry_seal))
        if entry_seal and (sealed_from is None or prev is None):  # the first sealed entry, or a log restarted by repair
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('audit_sealed_from', ?)", (str(audit_id),))
            sealed_from = str(audit_id)
        if len(targets) <= MAX_INDEXED_TARGETS:
            conn.executemany("INSERT INTO audit_targets(memory_id, audit_id) VALUES (?, ?)", [(t, audit_id) for t in targets])
        prev, prev_hash, prev_seal = (audit_id, digest), digest, entry_seal
        ids.append(audit_id)
    return ids


def has_seal_table(conn: db.Connection) -> bool:
    """Whether the store has the ``audit_seals`` table (schema 6 on)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_seals'").fetchone() is not None


def seal_of(conn: db.Connection, audit_id: int) -> str | None:
    """The HMAC seal of one audit entry, or None (written before sealing, or without the key)."""
    row = conn.execute("SELECT seal FROM audit_seals WHERE audit_id = ?", (audit_id,)).fetchone()
    return str(row[0]) if row else None


def _meta(conn: db.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return str(row[0]) if row else None


#: The audit log's head and what its checkpoint names besides (the store's id, where sealing began): one statement
#: after every audited write instead of three. No row for an empty log.
_HEAD_SQL = (
    "SELECT a.id, a.hash, (SELECT value FROM meta WHERE key = 'store_id'), (SELECT value FROM meta WHERE key = 'audit_sealed_from') "
    "FROM audit a ORDER BY a.id DESC LIMIT 1"
)


def _head_apart(conn: db.Connection) -> tuple[Any, ...] | None:
    """What :data:`_HEAD_SQL` reads, a statement each, for a store where it fails: a meta table that cannot be read
    names no store id (None, as :func:`memlens.storage.audit_seal.store_id` says), an audit table that cannot be
    read raises its own error."""
    sid = audit_seal.store_id(conn)
    head = conn.execute("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
    if not sid or not head:
        return None
    return (head[0], head[1], sid, _meta(conn, "audit_sealed_from"))


def audit_checkpoint(conn: db.Connection, *, now: datetime | None = None) -> audit_seal.Checkpoint | None:
    """The signed head of the store's audit log as it is now (None for an empty log or a store without an id).
    Unsigned when the key is missing."""
    checkpoint = audit_head(conn, now=now)
    if checkpoint is None:
        return None
    key = audit_seal.load_key(checkpoint.store_id)
    return checkpoint.signed(key) if key else checkpoint


def audit_head(conn: db.Connection, *, now: datetime | None = None) -> audit_seal.Checkpoint | None:
    """The head of the store's audit log as it is now, unsigned (None for an empty log or a store without an id)."""
    try:
        head = conn.execute(_HEAD_SQL).fetchone()
    except db.sqlite.Error:
        head = _head_apart(conn)
    if head is None or not head[2]:
        return None
    sid, sealed_from = str(head[2]), None if head[3] is None else str(head[3])
    when = resolve_now(now).astimezone(timezone.utc).isoformat()
    return audit_seal.Checkpoint(sid, int(head[0]), str(head[1]), int(sealed_from) if sealed_from and sealed_from.isdigit() else None, when)


def audit_hash(prev_hash: str, at: float, operation: str, actor: str, targets: str, details: str) -> str:
    """One link of the audit hash chain."""
    payload = "\x1f".join([prev_hash, repr(float(at)), operation, actor, targets, details])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class StoreContext:
    """The connection of one open store and the rules for using it (see the module docstring)."""

    def __init__(self, conn: db.Connection, path: Path | str, *, readonly: bool = False, actor: str = "api") -> None:
        self._conn: db.Connection | None = conn
        conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
        self.path = path
        self.readonly = readonly
        self.actor = actor
        self.lock = threading.RLock()
        self.fts_secure = self._read_fts_secure()
        self.settings = self.load_settings()
        self._audited = False
        self._erasure_done = False
        self._postings: SimilarityPostings | None = None
        self._checkpoints = CheckpointWriter()
        if not readonly:
            self.finish_erasure(only_if_pending=True)

    # the connection ------------------------------------------------------------------------------------------

    @property
    def conn(self) -> db.Connection:
        """The connection; raises once the store is closed."""
        if self._conn is None:
            raise InvalidInput("the store is closed")
        return self._conn

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close the connection (idempotent)."""
        with self.lock:
            if self._conn is None:
                return
            self._checkpoints.flush()
            if not self.readonly:
                # Another process may hold the WAL open: then it checkpoints when it closes, and a pending
                # erasure stays marked for whoever comes next.
                self.finish_erasure()
            self._conn.close()
            self._conn = None
            self._postings = None

    @property
    def postings(self) -> SimilarityPostings:
        """The store's supersede index held in memory, for :func:`memlens.supersede.find_best`. Made on first use
        and filled on the first search (opening a store builds nothing, and loads no numpy); use it under the lock."""
        if self._postings is None:
            from memlens.supersede_postings import SimilarityPostings

            self._postings = SimilarityPostings()
        return self._postings

    def prepare_postings(self) -> None:
        """Build the in-memory supersede index before a write that will use it, in a read of its own.

        The first build takes seconds at a million memories (6 s here). Made inside the write transaction, it held
        the write lock all that time: every other writer (an agent's hooks, other processes starting together)
        waited, and past the lock's patience failed. Built here, the write only replays what others changed
        meanwhile (:meth:`memlens.supersede_postings.SimilarityPostings.sync`). Inside a caller's own transaction it
        is left to find_best, which then sees that transaction's writes."""
        with self.lock:
            if self.readonly or self._conn is None or self._conn.in_transaction or (self._postings is not None and self._postings.built):
                return
            if db.damage_of(self._conn) is not None:
                return  # the write refuses a damaged store with its own message; reading its index would not
            try:
                self.postings.sync(self._conn)
            except db.sqlite.Error:
                return  # left to the write: it builds the index again and reports what fails, as it always did

    @contextmanager
    def read(self) -> Iterator[db.Connection]:
        """The connection for a read, under the store's lock (see the module docstring on threads)."""
        with self.lock:
            yield self.conn

    @contextmanager
    def write(self) -> Iterator[db.Connection]:
        """The store's lock plus one write transaction (nested calls become savepoints); rolled back on any error."""
        if self.readonly:
            raise InvalidInput("this store is open read-only")
        with self.lock:
            outermost = not self.conn.in_transaction
            with db.transaction(self.conn, self.path) as conn:
                if outermost and self._erasure_done:
                    # The erased pages were overwritten since the mark was set; clearing it rides on this write
                    # (before anything in it could set it again) instead of costing a transaction of its own.
                    conn.execute("DELETE FROM meta WHERE key = ?", (ERASURE_PENDING_KEY,))
                    self._erasure_done = False
                yield conn
            if outermost and self._audited:
                # Anchor the audit log's new head outside the store: read now, signed and put in place by the
                # checkpoint writer's thread (see memlens.storage.checkpoint_writer).
                self._audited = False
                checkpoint = audit_head(self.conn)
                if checkpoint is not None:
                    self._checkpoints.submit_head(self.path, checkpoint)

    # the audit checkpoint ------------------------------------------------------------------------------------

    def save_checkpoint(self, *, now: datetime | None = None) -> audit_seal.Checkpoint | None:
        """Record the audit log's head in this store's local checkpoint (outside the store, never moved back) and
        return it, once it is written. Writing it is best effort: a folder that cannot be written costs the anchor,
        not the write."""
        self.flush_checkpoints()
        with self.read() as conn:
            checkpoint = audit_checkpoint(conn, now=now)
        if checkpoint is None or not checkpoint.signature:
            return checkpoint
        try:
            audit_seal.write_checkpoint(audit_seal.checkpoint_path(checkpoint.store_id, self.path), checkpoint, only_if_newer=True)
        except OSError:
            pass
        return checkpoint

    def flush_checkpoints(self) -> None:
        """Return once the checkpoints of this store's writes so far are in place (what reads them waits for this)."""
        self._checkpoints.flush()

    # erasure -------------------------------------------------------------------------------------------------

    def erasure_pending(self) -> bool:
        """Whether a forget's erased text may still be in the store's main file or WAL (see :data:`ERASURE_PENDING_KEY`)."""
        if self._erasure_done:
            return False
        with self.read() as conn:
            return _meta(conn, ERASURE_PENDING_KEY) is not None

    def truncate_wal(self) -> bool:
        """Copy the WAL into the main file and truncate it, without waiting for other connections; True when done.

        A waiting TRUNCATE checkpoint would stall every other writer meanwhile (seconds under a busy agent), so a
        reader in another process simply makes it report busy.
        """
        with self.lock:
            conn = self.conn
            timeout = conn.execute("PRAGMA busy_timeout").fetchone()[0]
            try:
                conn.execute("PRAGMA busy_timeout = 0")
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            except db.sqlite.Error:
                return False
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")
            return not busy

    def finish_erasure(self, *, only_if_pending: bool = False) -> bool:
        """Overwrite the pages a forget left behind (the WAL copied into the main file, then truncated); True when
        nothing is pending any more. With ``only_if_pending`` nothing is checkpointed unless a forget left its mark
        (on open). The mark itself is cleared by this process's next write, or stays until another process's
        open or close finds the WAL already empty: a stale mark only costs one more checkpoint."""
        if self.readonly or self._conn is None:
            return False
        if is_postgres(self._conn):
            return self.vacuum_erased() is None
        try:
            pending = self.erasure_pending()
            if only_if_pending and not pending:
                return True
            if not self.truncate_wal():
                return not pending
            self._erasure_done = pending
            return True
        except (db.sqlite.Error, MemlensError):
            return False  # locked or read-only: the mark stays for the next process

    def vacuum_erased(self) -> str | None:
        """Erasure on PostgreSQL: a forget has deleted the rows from every table already; VACUUM then removes the
        dead row versions from those tables and their indexes, so no query, and no page read through the server,
        holds the text. It runs only while the mark a forget leaves (:data:`ERASURE_PENDING_KEY`) stands, so a store
        that forgot nothing closes without one (a hook opens and closes a store on every tool call); the mark is
        cleared once it ran. While it stands,
        ``memlens doctor`` reports the VACUUM as pending and the next memlens process to open the store runs it.
        What the server does not promise beyond that (its WAL until recycled, replicas, backups, free space not
        yet overwritten) is in the README, "Forgetting on PostgreSQL". Returns None when done, else why not."""
        with self.lock:
            conn = self.conn
            if conn.in_transaction:  # VACUUM cannot run inside a transaction
                return "the erased rows are deleted; VACUUM runs once the surrounding transaction commits (memlens doctor --repair)"
            if _meta(conn, ERASURE_PENDING_KEY) is None:
                return None
            try:
                conn.execute(f"VACUUM {', '.join(ERASED_TABLES)}")
                conn.execute("DELETE FROM meta WHERE key = ?", (ERASURE_PENDING_KEY,))
            except (db.sqlite.Error, MemlensError) as exc:
                return f"the erased rows are deleted, but VACUUM did not run ({exc}); run `memlens doctor --repair`"
        return None

    # settings ------------------------------------------------------------------------------------------------

    def _read_fts_secure(self) -> bool:
        try:
            row = self.conn.execute("SELECT v FROM memory_fts_config WHERE k = 'secure-delete'").fetchone()
        except db.sqlite.Error:
            return False
        return bool(row and row[0])

    def load_settings(self) -> StoreSettings:
        """The settings stored in the file (defaults where none or unreadable)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        if not row:
            return StoreSettings()
        try:
            return StoreSettings.from_dict(json.loads(row[0]))
        except (ValueError, TypeError):
            return StoreSettings()

    # the audit log -------------------------------------------------------------------------------------------

    def audit(
        self,
        conn: db.Connection,
        operation: str,
        target_ids: Iterable[int],
        details: Mapping[str, Any],
        now: datetime,
        actor: str | None = None,
    ) -> int:
        """Append one audit entry inside the caller's write transaction (see :func:`append_audit`); the actor
        defaults to the store's. The log's new head is checkpointed once the transaction commits."""
        self._audited = True
        return append_audit(conn, operation, target_ids, details, now, actor or self.actor)

    def audit_many(self, conn: db.Connection, entries: Sequence[AuditEntry], now: datetime, actor: str | None = None) -> list[int]:
        """Append several audit entries inside the caller's write transaction (see :func:`append_audits`)."""
        if not entries:
            return []
        self._audited = True
        return append_audits(conn, entries, now, actor or self.actor)
