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
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memlens import db
from memlens.config import StoreSettings
from memlens.errors import InvalidInput
from memlens.models import ts_from_dt

#: The hash an audit chain starts from.
GENESIS_HASH = "0" * 64
#: How far a caller's ``now`` may be from the wall clock before the audit log records it as a separate ``as_of``.
CLOCK_TOLERANCE = timedelta(seconds=1)
#: Every operation the engine writes to the audit log (``memlens audit --operation`` offers these).
AUDIT_OPERATIONS = (
    "configure", "consolidate", "embed", "end_session", "flag_review", "forget", "forget_session", "import", "recall",
    "relate", "remember", "remember_many", "repair", "reviewed", "supersede", "sweep", "sweep_run", "update",
)  # fmt: skip
#: Audit entries naming more memories than this keep their targets in the entry only (no per-target index rows).
MAX_INDEXED_TARGETS = 1000


def resolve_now(now: datetime | None) -> datetime:
    """``now`` checked to be an aware datetime, or the current UTC time when omitted."""
    if now is None:
        return datetime.now(timezone.utc)
    if not isinstance(now, datetime):
        raise InvalidInput(f"now must be a timezone-aware datetime, not {type(now).__name__}")
    if now.tzinfo is None:
        raise InvalidInput("now must be a timezone-aware datetime (for example datetime.now(timezone.utc))")
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
    """Append one audit entry inside the caller's write transaction, chained to the previous one by hash.

    The entry's time is always the wall clock: the log records when things happened. When ``now`` (the time the
    operation acted as of) differs from it by more than :data:`CLOCK_TOLERANCE`, it is kept as ``as_of`` (ISO 8601,
    UTC) in the details, inside the hash chain. Never pass memory text here: the log outlives what it describes (a
    forgotten memory leaves only its hash).
    """
    targets = sorted(set(target_ids))
    prev = conn.execute("SELECT hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
    prev_hash = prev[0] if prev else GENESIS_HASH
    wall = datetime.now(timezone.utc)
    at = ts_from_dt(wall)
    if abs(resolve_now(now) - wall) > CLOCK_TOLERANCE:
        details = {**details, "as_of": now.astimezone(timezone.utc).isoformat()}
    details_text = to_json(details)
    targets_text = to_json(targets)
    digest = audit_hash(prev_hash, at, operation, actor, targets_text, details_text)
    cur = conn.execute(
        "INSERT INTO audit(at, operation, actor, target_ids, details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (at, operation, actor, targets_text, details_text, prev_hash, digest),
    )
    audit_id = int(cur.lastrowid)
    if len(targets) <= MAX_INDEXED_TARGETS:
        conn.executemany("INSERT INTO audit_targets(memory_id, audit_id) VALUES (?, ?)", [(t, audit_id) for t in targets])
    return audit_id


def audit_hash(prev_hash: str, at: float, operation: str, actor: str, targets: str, details: str) -> str:
    """One link of the audit hash chain."""
    payload = "\x1f".join([prev_hash, repr(float(at)), operation, actor, targets, details])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class StoreContext:
    """The connection of one open store and the rules for using it (see the module docstring)."""

    def __init__(self, conn: db.Connection, path: Path, *, readonly: bool = False, actor: str = "api") -> None:
        self._conn: db.Connection | None = conn
        self.path = path
        self.readonly = readonly
        self.actor = actor
        self.lock = threading.RLock()
        self.fts_secure = self._read_fts_secure()
        self.settings = self.load_settings()

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
            try:
                if not self.readonly:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except db.sqlite.Error:
                pass  # another process holds the WAL open; it will checkpoint when it closes
            self._conn.close()
            self._conn = None

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
        with self.lock, db.transaction(self.conn, self.path) as conn:
            yield conn

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
        defaults to the store's."""
        return append_audit(conn, operation, target_ids, details, now, actor or self.actor)
