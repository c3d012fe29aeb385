"""Copying a whole store between SQLite files and PostgreSQL databases, losslessly and resumably (``memlens copy``).

**What arrives.** Every row of every table in :data:`TABLES`, as it is, ids included, so that version chains,
relations, sessions, access history, tags, tombstones, conflicts, vectors and the audit log (hash chain, targets,
seals) are the same rows on arrival. ``meta`` goes first, with the store's id: the audit key and the seals are named
by it, so the copy is the same store and its log verifies with the same key. ``sqlite_sequence`` goes last (the
highest id ever given, which the audit check compares with the log). What a backend derives from the rows is made
again as they arrive instead of being copied: the full-text index (SQLite's triggers, or the PostgreSQL commit's
flush), and the supersede index (:func:`memlens.supersede.index_latest_many`, as ``memlens doctor --repair``
rebuilds it; FTS5 cannot hand its contentless rows back anyway).

**Order and batches.** Tables go in dependency order (sessions before the memories naming them, memories before
what hangs off them, the audit log before its index), each in key order, ``batch`` rows at a time; each batch is one
write transaction on the destination, with foreign keys checked at its commit. The source is read in one snapshot
(one read transaction for the whole run), opened read-only, and never written.

**Resuming.** A copy stopped anywhere (Ctrl-C, a crash, a lost connection) leaves whole batches. Run again, it
reads, per table, the highest key the destination holds and copies the rows after it. A marker in the destination's
``meta`` (:data:`MARKER_KEY`) records the state of the source the copy began from (its audit head and row counts):
a run whose source has changed since refuses to resume, since rows already copied may have changed as well.

**Verifying.** On arrival each table's row count must equal the source's, the rebuilt supersede index's too, the
destination's audit log must verify (:meth:`memlens.store.MemoryStore.verify_audit`) and end at the source's head;
anything else raises :class:`CopyError`. Only then is the marker removed: a destination without one is a verified
copy. The copy writes no audit entry of its own: the destination *is* the source's store (same id, key and log), and
an entry would make its log end elsewhere than the source's, so that a second run, or anyone comparing the two,
could no longer tell that they are equal. The report (``memlens copy --json``) is the record of the copy.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlens import db, supersede
from memlens.errors import MemlensError
from memlens.postgres import is_url, redact_url
from memlens.postgres import vectors as pg_vectors
from memlens.store import MemoryStore
from memlens.text import similarity_tokens


class CopyError(MemlensError):
    """A copy was refused (a foreign or diverged destination, a changed source) or did not verify on arrival."""


@dataclass(frozen=True)
class Table:
    """A table copied row for row: its rows go in ``key`` order, and a resumed copy starts after the highest key the
    destination holds. ``unique`` is False for a table without a primary key, whose key can repeat: its batches end
    at a change of key, so that no key's rows are ever split between two batches (the resume point stays exact)."""

    name: str
    key: tuple[str, ...]
    unique: bool = True


#: The tables copied row for row, in dependency order (each one's foreign keys point at tables before it).
TABLES = (
    Table("sessions", ("id",)),
    Table("memories", ("id",)),
    Table("memory_tags", ("tag", "memory_id")),
    Table("access_log", ("memory_id", "at"), unique=False),
    Table("relations", ("src_id", "dst_id", "kind")),
    Table("memory_vectors", ("memory_id",)),
    Table("conflicts", ("id",)),
    Table("forgotten", ("content_hash", "forgotten_at"), unique=False),  # content_hash first: its index orders it
    Table("forgotten_sessions", ("session_id",)),
    Table("audit", ("id",)),
    Table("audit_targets", ("memory_id", "audit_id")),
    Table("audit_seals", ("audit_id",)),
)
#: Tables copied whole, in one transaction: ``meta`` before the rows, ``sqlite_sequence`` after them.
WHOLE_TABLES = ("meta", "sqlite_sequence")
#: Derived tables whose row count is still checked on arrival: rebuilt from the memories, they must come out equal
#: (the supersede index holds a row for each latest memory with words; FTS5 counts a contentless table's rows).
REBUILT_TABLES = ("similarity_index",)
#: Columns a backend derives from the row's others, left out of the copy and made again on arrival: pgvector's copy
#: of each stored vector (:mod:`memlens.postgres.vectors`), filled by the destination's trigger where it has one.
DERIVED_COLUMNS: dict[str, tuple[str, ...]] = {"memory_vectors": (pg_vectors.COLUMN,)}
#: The destination's ``meta`` key holding the state of the source a copy in progress began from.
MARKER_KEY = "copy_in_progress"


@dataclass(frozen=True)
class CopyProgress:
    """Where a copy stands, after each committed batch: rows of ``table`` in the destination out of the source's,
    and rows of all tables."""

    table: str
    table_done: int
    table_total: int
    done: int
    total: int


@dataclass(frozen=True)
class TableReport:
    """One table of a copy: its rows in the source (equal to the destination's once verified), and how many this
    run copied (the rest arrived in an earlier, interrupted run)."""

    rows: int
    copied: int


@dataclass(frozen=True)
class CopyReport:
    """What :func:`copy_store` did: where from and to (passwords left out), the store, each table, the verified audit
    log, and whether it continued an interrupted copy."""

    source: str
    destination: str
    store_id: str
    tables: dict[str, TableReport]
    audit_entries: int
    audit_head: str | None
    resumed: bool
    seconds: float
    already_complete: bool = False

    @property
    def rows(self) -> int:
        """Rows in the copied tables (the derived ones left out)."""
        return sum(t.rows for name, t in self.tables.items() if name not in REBUILT_TABLES)

    @property
    def copied(self) -> int:
        """Rows this run wrote (the derived ones left out)."""
        return sum(t.copied for name, t in self.tables.items() if name not in REBUILT_TABLES)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``memlens copy --json``)."""
        return {
            "source": self.source,
            "destination": self.destination,
            "store_id": self.store_id,
            "rows": self.rows,
            "copied": self.copied,
            "tables": {name: {"rows": t.rows, "copied": t.copied} for name, t in self.tables.items()},
            "audit": {"entries": self.audit_entries, "head": self.audit_head, "verified": True},
            "resumed": self.resumed,
            "already_complete": self.already_complete,
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.copied / self.seconds) if self.seconds > 0 else None,
        }


@dataclass
class _SourceState:
    """The source as the snapshot shows it: what the marker records and the verification compares."""

    store_id: str
    schema: int
    counts: dict[str, int]
    audit_head: tuple[int, str] | None
    columns: dict[str, list[str]] = field(default_factory=dict)

    def fingerprint(self) -> dict[str, Any]:
        # meta is left out: opening or closing a store may clear a mark there without an audit entry, and meta is
        # copied again whole by every run anyway.
        rows = {t.name: self.counts[t.name] for t in TABLES}
        return {"store_id": self.store_id, "audit_head": list(self.audit_head) if self.audit_head else None, "rows": rows}


Progress = Callable[[CopyProgress], None]


def copy_store(src: str | Path, dst: str | Path, *, progress: Progress | None = None, batch: int = 2000) -> CopyReport:
    """Copy the store at ``src`` (a file or a ``postgresql://`` URL) into ``dst`` (an empty or new file or database,
    or one an interrupted copy of the same source left), verify it on arrival and report what was copied.

    Raises :class:`CopyError` when the destination holds another store or another state of this one, when the source
    changed since the interrupted copy began, when the source's own audit log does not verify (the copy's could not
    either), or when the destination does not verify. ``progress`` is called after each committed batch; whatever it
    raises stops the copy there, and a later call continues it."""
    if batch < 1:
        raise CopyError(f"batch must be at least 1, not {batch}")
    started = time.monotonic()
    source_name, destination_name = _display(src), _display(dst)
    if _identity(src) == _identity(dst):
        raise CopyError(f"the source and the destination are the same store ({source_name})")
    with MemoryStore.open(src, create=False, readonly=True, actor="copy") as source, source.ctx.read() as reading:
        # One snapshot for the whole run: a store in use keeps changing, and the copy must be of one moment of it.
        reading.execute("BEGIN")
        try:
            state = _source_state(reading)
            check = source.verify_audit()
            if not check.ok:
                raise CopyError(
                    f"the audit log of {source_name} does not verify ({check.problem}), so no copy of it could; run `memlens doctor` on it first"
                )
            with MemoryStore.open(dst, actor="copy") as target:
                return _copy_into(reading, target, state, source_name, destination_name, progress, batch, started)
        finally:
            with contextlib.suppress(db.sqlite.Error, MemlensError):
                reading.execute("ROLLBACK")


def _copy_into(
    reading: db.Connection, target: MemoryStore, state: _SourceState, source_name: str, destination_name: str,
    progress: Progress | None, batch: int, started: float,
) -> CopyReport:  # fmt: skip
    with target.ctx.read() as conn:
        have = _counts(conn)
        marker = _meta_value(conn, MARKER_KEY)
        target_id = _meta_value(conn, "store_id")
        target_schema = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if target_schema != state.schema:
        raise CopyError(f"{destination_name} has schema {target_schema} and {source_name} schema {state.schema}; open both with this memlens first")
    resumed = marker is not None
    if marker is not None:
        if json.loads(marker) != state.fingerprint():
            raise CopyError(
                f"{destination_name} holds an interrupted copy of another state of the store: {source_name} changed since that copy began "
                "(or it was of another source); copy into an empty destination instead"
            )
    elif any(have[t.name] for t in TABLES):
        if target_id != state.store_id:
            raise CopyError(
                f"{destination_name} already holds another store (id {target_id}, {have['memories']} memories; the source is {state.store_id}); "
                "copy into an empty or new destination"
            )
        with target.ctx.read() as conn:
            wrong = _differences(conn, state)
        if wrong:
            raise CopyError(
                f"{destination_name} holds store {state.store_id} already, in another state than {source_name} ({'; '.join(wrong)}); "
                "copy into an empty or new destination"
            )
        # A finished copy: nothing to write (and nothing is, in case the two names are one database).
        _verify(target, state, destination_name)
        return _report(state, source_name, destination_name, {}, resumed=False, started=started, already_complete=True)

    total = sum(state.counts[name] for name in (*WHOLE_TABLES, *(t.name for t in TABLES)))
    done = sum(have[t.name] for t in TABLES) if resumed else 0
    copied: dict[str, int] = {}

    def tick(table: str, table_done: int, added: int) -> None:
        nonlocal done
        done += added
        if progress is not None:
            progress(CopyProgress(table, table_done, state.counts[table], done, total))

    copied["meta"] = _copy_meta(reading, target, state)
    tick("meta", state.counts["meta"], state.counts["meta"])
    for table in TABLES:
        copied[table.name] = _copy_table(reading, target, table, state, batch, tick)
    copied["sqlite_sequence"] = _copy_sequence(reading, target)
    tick("sqlite_sequence", state.counts["sqlite_sequence"], state.counts["sqlite_sequence"])
    _verify(target, state, destination_name)
    with target.ctx.write() as conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (MARKER_KEY,))
    # Anchor the copy's log outside it, as every audited write does (a copy later cut back is then found).
    target.ctx.save_checkpoint()
    return _report(state, source_name, destination_name, copied, resumed=resumed, started=started)


def _copy_meta(reading: db.Connection, target: MemoryStore, state: _SourceState) -> int:
    """The source's ``meta`` in place of the destination's (a new store got an id of its own), with the marker."""
    rows = reading.execute("SELECT key, value FROM meta ORDER BY key").fetchall()
    with target.ctx.write() as conn:
        conn.execute("DELETE FROM meta")
        conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", [*rows, (MARKER_KEY, json.dumps(state.fingerprint(), sort_keys=True))])
    return len(rows)


def _copy_table(
    reading: db.Connection, target: MemoryStore, table: Table, state: _SourceState, batch: int, tick: Callable[[str, int, int], None]
) -> int:
    """Copy the rows of ``table`` past the highest key the destination holds, ``batch`` at a time; how many."""
    columns = state.columns[table.name]
    names, order = ", ".join(columns), ", ".join(table.key)
    at = [columns.index(k) for k in table.key]
    after = f"({order}) > ({', '.join('?' * len(at))})" if len(at) > 1 else f"{order} > ?"
    equal = " AND ".join(f"{k} = ?" for k in table.key)
    insert = f"INSERT INTO {table.name}({names}) VALUES ({', '.join('?' * len(columns))})"
    with target.ctx.read() as conn:
        last = conn.execute(f"SELECT {order} FROM {table.name} ORDER BY {', '.join(k + ' DESC' for k in table.key)} LIMIT 1").fetchone()
        present = int(conn.execute(f"SELECT COUNT(*) FROM {table.name}").fetchone()[0])
    copied = 0
    while True:
        if last is None:
            rows = reading.execute(f"SELECT {names} FROM {table.name} ORDER BY {order} LIMIT ?", (batch,)).fetchall()
        else:
            rows = reading.execute(f"SELECT {names} FROM {table.name} WHERE {after} ORDER BY {order} LIMIT ?", (*last, batch)).fetchall()
        if not rows:
            return copied
        if not table.unique and len(rows) == batch:
            # The batch may end inside a run of equal keys: the whole run goes in this batch instead.
            boundary = tuple(rows[-1][i] for i in at)
            rows = [r for r in rows if tuple(r[i] for i in at) != boundary]
            rows += reading.execute(f"SELECT {names} FROM {table.name} WHERE {equal}", boundary).fetchall()
        with target.ctx.write() as conn:
            conn.execute("PRAGMA defer_foreign_keys = ON")  # checked at this batch's commit (DEFERRABLE on a server)
            conn.executemany(insert, rows)
            if table.name == "memories":
                _index_for_supersede(conn, columns, rows)
        last = tuple(rows[-1][i] for i in at)
        copied += len(rows)
        tick(table.name, present + copied, len(rows))


def _index_for_supersede(conn: db.Connection, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Put the latest of these new memories in the supersede index, as any writer does."""
    memory_id, content, is_latest = columns.index("id"), columns.index("content"), columns.index("is_latest")
    supersede.index_latest_many(conn, [(r[memory_id], similarity_tokens(r[content])) for r in rows if r[is_latest] == 1])


def _copy_sequence(reading: db.Connection, target: MemoryStore) -> int:
    """The source's ``sqlite_sequence`` (the highest ids ever given: above the highest present when the newest rows
    were forgotten) over what the inserts left in the destination's."""
    rows = reading.execute("SELECT name, seq FROM sqlite_sequence ORDER BY name").fetchall()
    with target.ctx.write() as conn:
        # No key on SQLite's own table, so no upsert: an update, or an insert where there was no row.
        for name, seq in rows:
            if conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (seq, name)).rowcount == 0:
                conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", (name, seq))
    return len(rows)


def _verify(target: MemoryStore, state: _SourceState, destination_name: str) -> None:
    """Raise :class:`CopyError` unless the destination holds what the source does: the same row counts (the
    rebuilt supersede index's too), an audit log that verifies and ends at the source's head."""
    with target.ctx.read() as conn:
        wrong = _differences(conn, state)
    if wrong:
        raise CopyError(f"the copy in {destination_name} does not match its source: " + "; ".join(wrong))
    check = target.verify_audit()
    if not check.ok:
        raise CopyError(f"the audit log of the copy in {destination_name} does not verify: {check.problem}")


def _differences(conn: db.Connection, state: _SourceState) -> list[str]:
    """How the store on ``conn`` differs from the source's snapshot: row counts and the audit log's head."""
    have = _counts(conn)
    if _meta_value(conn, MARKER_KEY) is not None:
        have["meta"] -= 1
    wrong = [f"{name} has {have[name]} rows, the source {state.counts[name]}" for name in _checked_tables() if have[name] != state.counts[name]]
    head = _head(conn)
    if head != state.audit_head:
        wrong.append(f"the audit log ends at entry {head[0] if head else 0}, the source's at {state.audit_head[0] if state.audit_head else 0}")
    return wrong


def _source_state(conn: db.Connection) -> _SourceState:
    store_id = _meta_value(conn, "store_id")
    if store_id is None:
        raise CopyError(
            "the source has no store id (meta.store_id): its audit log cannot be verified, so it cannot be copied; run `memlens doctor` on it"
        )
    columns = {}
    for table in TABLES:
        cur = conn.execute(f"SELECT * FROM {table.name} LIMIT 0")
        columns[table.name] = [d[0] for d in cur.description if d[0] not in DERIVED_COLUMNS.get(table.name, ())]
    schema = int(conn.execute("PRAGMA user_version").fetchone()[0])
    return _SourceState(store_id, schema, _counts(conn), _head(conn), columns)


def _checked_tables() -> list[str]:
    return [*WHOLE_TABLES, *(t.name for t in TABLES), *REBUILT_TABLES]


def _counts(conn: db.Connection) -> dict[str, int]:
    return {name: int(conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]) for name in _checked_tables()}


def _head(conn: db.Connection) -> tuple[int, str] | None:
    row = conn.execute("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
    return (int(row[0]), str(row[1])) if row else None


def _meta_value(conn: db.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return str(row[0]) if row else None


def _report(
    state: _SourceState, source: str, destination: str, copied: dict[str, int], *, resumed: bool, started: float, already_complete: bool = False
) -> CopyReport:
    tables = {name: TableReport(state.counts[name], copied.get(name, 0)) for name in _checked_tables()}
    head = state.audit_head
    return CopyReport(
        source=source, destination=destination, store_id=state.store_id, tables=tables, audit_entries=head[0] if head else 0,
        audit_head=head[1] if head else None, resumed=resumed, seconds=time.monotonic() - started, already_complete=already_complete,
    )  # fmt: skip


def _display(location: str | Path) -> str:
    """A location as messages show it (a URL without its password)."""
    return redact_url(location) if isinstance(location, str) and is_url(location) else str(location)


def _identity(location: str | Path) -> str:
    """What two names of one store share: the real path of a file, the URL (without password) of a database."""
    if isinstance(location, str) and is_url(location):
        return redact_url(location)
    return str(Path(location).expanduser().resolve())
