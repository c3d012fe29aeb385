"""The SQLite layer: picking the SQLite build, opening a file safely, transactions, migrations, error sorting.

Nothing above this module touches ``sqlite3`` connection setup, and nothing here knows what a memory is beyond
the schema. Opening is careful: the file is identified (SQLite header, application id, schema version) *before*
any statement that could write, so a foreign, corrupt or newer file is refused without a single byte changed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from memlens import schema
from memlens.decay import text_importance
from memlens.errors import (
    CorruptDatabaseError,
    DiskFullError,
    NewerDatabaseError,
    NotAMemlensDatabase,
    ReadOnlyStoreError,
    StoreLockedError,
)
from memlens.text import index_text


def _pick_sqlite() -> ModuleType:
    """pysqlite3 (a current SQLite with FTS5 secure-delete) where installed, else the interpreter's sqlite3.

    ``MEMLENS_SQLITE=system`` forces the interpreter's build (tests use it to prove erasure holds there too).
    """
    if os.environ.get("MEMLENS_SQLITE", "").lower() != "system":
        try:
            from pysqlite3 import dbapi2  # type: ignore[import-not-found, import-untyped, unused-ignore]

            return dbapi2  # type: ignore[no-any-return, unused-ignore]
        except ImportError:
            pass
    import sqlite3

    return sqlite3


sqlite: Any = _pick_sqlite()


def _null(value: None) -> None:
    """The adapter of None: None, which SQLite binds as NULL."""
    return value


# Without an adapter of its own, a None parameter is bound only after the module has looked for __adapt__ and
# __conform__ and failed (an exception raised and cleared: ~1 us a None, ten times an int's binding); with one, it is
# a dictionary lookup and this call. What is bound is the same NULL. A bulk import binds several Nones a record.
sqlite.register_adapter(type(None), _null)
SQLITE_VERSION: tuple[int, ...] = tuple(int(p) for p in sqlite.sqlite_version.split("."))
#: FTS5 can purge deleted terms from its index in place only from SQLite 3.42 on.
HAS_FTS5_SECURE_DELETE = SQLITE_VERSION >= (3, 42, 0)

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 5_000
#: How long a writer keeps retrying a locked database (on top of the busy timeout) before giving up clearly.
LOCK_RETRY_SECONDS = 30.0
#: How many times this process retried a locked statement after the busy timeout (read by the stress tool).
lock_retries = 0

Connection = Any  # sqlite3.Connection or pysqlite3's; they share the DB-API surface


def classify(exc: BaseException, path: Path | str) -> Exception:
    """Turn a raw SQLite error into the memlens error a person can act on; unknown errors are returned as is."""
    msg = str(exc).lower()
    where = str(path)
    if "database is locked" in msg or "database is busy" in msg or "database table is locked" in msg:
        return StoreLockedError(f"{where} is locked by another process; try again in a moment")
    if "file is not a database" in msg or "file is encrypted" in msg:
        return NotAMemlensDatabase(f"{where} is not a SQLite database")
    if "malformed" in msg or "corrupt" in msg or "invalid fts5 file format" in msg:
        return CorruptDatabaseError(f"{where} is damaged ({exc}); run `memlens doctor` or restore a backup")
    if "could not decode to utf-8" in msg:
        # memlens stores only valid UTF-8, so such a text is damaged bytes inside an intact page (which SQLite's
        # own checks cannot see). The error quotes the bytes: only the column is named, on one line.
        column = re.search(r"column '([^']*)'", str(exc))
        named = f" in column {column.group(1)}" if column else ""
        return CorruptDatabaseError(f"{where} is damaged (a stored text{named} is not valid UTF-8); run `memlens doctor` or restore a backup")
    if "readonly" in msg or "read-only" in msg or "attempt to write a readonly database" in msg:
        return ReadOnlyStoreError(f"{where} cannot be written (read-only file or folder)")
    if "database or disk is full" in msg or ("disk i/o error" in msg and "full" in msg):
        return DiskFullError(f"the disk holding {where} is full; nothing was written")
    if "unable to open database" in msg:
        return ReadOnlyStoreError(f"{where} cannot be opened (missing folder or no permission)")
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))


def _register_functions(conn: Connection) -> None:
    # The FTS triggers call this; it must be deterministic because the contentless index replays it on delete.
    conn.create_function("ml_index_text", 1, lambda t: index_text(t) if t is not None else "", deterministic=True)
    # Schema 9's migration and trigger keep memories.text_importance with the text.
    conn.create_function("ml_text_importance", 1, lambda t: text_importance(t) if t is not None else None, deterministic=True)
    # memories.index_dates: schema 11's backfill and the bulk INSERTs (memlens.storage.bulk) store it with this.
    conn.create_function("ml_date_terms", 2, _date_terms, deterministic=True)


def _date_terms(content: str | None, created_at: float | None) -> str:
    from memlens.dates import index_terms_at

    return index_terms_at(content, created_at) if content is not None and created_at is not None else ""


# --- This process's open store files ----------------------------------------------------------------------------
# POSIX drops *all* of a process's fcntl locks on a file the moment *any* descriptor on that file is closed. SQLite's
# own connections share one descriptor per file and defer closing it while locks are held, but a plain open() of
# the store (to read its header, to compare bytes) closes a descriptor SQLite knows nothing of. The process's read
# locks then vanish, another process believes it is the last user, checkpoints and deletes the WAL under us, and
# our next write goes into a deleted file and is lost (sqlite.org, "How To Corrupt An SQLite Database File" 2.2).
# So every connection this module opens is counted per file, and the header is read through a descriptor of our
# own only while the count is zero; the count is checked and the connection registered under one lock, so two
# threads opening the same file at once cannot slip a header read in between.

_open_files_lock = threading.Lock()
_open_files: dict[tuple[int, int], int] = {}


def _file_key(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)  # stat opens no descriptor: it is safe while connections hold locks
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def in_use(path: Path | str) -> bool:
    """True while a connection of this process has the store at ``path`` open.

    Code that wants the raw bytes of the store, its ``-wal`` or its ``-shm`` (identity checks, erasure checks)
    must not open them while this is true: closing that descriptor would drop the process's SQLite locks.
    """
    key = _file_key(Path(path))
    with _open_files_lock:
        return key is not None and _open_files.get(key, 0) > 0


class _CountedConnection(sqlite.Connection):  # type: ignore[misc, name-defined, unused-ignore]
    """A connection that leaves this process's count of open store files when it closes."""

    _memlens_file_key: tuple[int, int] | None = None
    #: What :func:`check_pages` found wrong when the store was opened (None: nothing); writes are then refused.
    _memlens_damage: str | None = None

    def close(self) -> None:
        key, self._memlens_file_key = self._memlens_file_key, None
        try:
            super().close()
        finally:
            if key is not None:
                with _open_files_lock:
                    left = _open_files.get(key, 0) - 1
                    if left > 0:
                        _open_files[key] = left
                    else:
                        _open_files.pop(key, None)


def open_connection(path: Path, uri: str, *, before: Callable[[bool], None] | None = None) -> Connection:
    """Connect to ``uri`` (the store at ``path``) and count the connection as this process's open file.

    ``before(in_use)`` runs first, under the same lock: it may read the file's header itself only when ``in_use``
    is false. Every connection to a store goes through here, so that rule holds for the whole process.
    """
    with _open_files_lock:
        key = _file_key(path)
        busy = key is not None and _open_files.get(key, 0) > 0
        if before is not None:
            before(busy)
        conn = sqlite.connect(
            uri, uri=True, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000, factory=_CountedConnection
        )
        key = _file_key(path)  # the file may have been created just now
        if key is not None:
            conn._memlens_file_key = key
            _open_files[key] = _open_files.get(key, 0) + 1
    return conn


def read_header(path: Path, size: int = 100) -> bytes | None:
    """The first ``size`` bytes of the file, or None when this process has it open (see :func:`in_use`): then the
    header is not read at all, since reading it could cost the process its locks, and SQLite already accepted it."""
    with _open_files_lock:
        key = _file_key(path)
        if key is not None and _open_files.get(key, 0) > 0:
            return None
        return _read_head(path, size)


def _read_head(path: Path, size: int) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(size)
    except PermissionError as exc:
        raise ReadOnlyStoreError(f"{path} cannot be read: {exc.strerror}") from None


def _identify(path: Path, in_use: bool) -> str:
    """'new' for a missing or empty file, 'sqlite' for a SQLite file; raises for anything else.

    A file this process already has open is SQLite by definition and is not read again (see :func:`in_use`).
    """
    if in_use:
        return "sqlite"
    if not path.exists():
        return "new"
    if path.is_dir():
        raise NotAMemlensDatabase(f"{path} is a folder, not a memlens database")
    head = _read_head(path, 100)
    if not head:
        return "new"
    if head[: len(SQLITE_HEADER)] != SQLITE_HEADER:
        raise NotAMemlensDatabase(f"{path} is not a SQLite database (it does not start with the SQLite header)")
    _check_length(path, head)
    return "sqlite"


def _check_length(path: Path, head: bytes) -> None:
    """Refuse a file shorter than its own header says (a cut-off copy or download): SQLite would open it and only
    fail, or silently miss rows, when a read reaches the missing pages."""
    if len(head) < 100:
        raise CorruptDatabaseError(f"{path} is truncated ({len(head)} bytes, less than a SQLite header); restore a backup")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    change_counter, pages = int.from_bytes(head[24:28], "big"), int.from_bytes(head[28:32], "big")
    # The page count is only meaningful when "version-valid-for" matches the change counter (SQLite's own rule).
    if int.from_bytes(head[92:96], "big") != change_counter or not pages:
        return
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return  # a live store: a checkpoint may be extending the file right now; a cut-off copy has no WAL
    size = path.stat().st_size
    if size < pages * page_size:
        raise CorruptDatabaseError(
            f"{path} is truncated ({size:,} bytes; its header says {pages * page_size:,}): part of it is missing. Restore a backup"
        )


def _check_trusted(path: Path) -> None:
    """Refuse to use as a store (or its -wal/-shm) a file owned by another user or writable by group or others: in
    a shared or world-writable folder someone else may have planted it, empty, to read or alter what is written.
    Only stat() is used: it opens no descriptor, so it is safe while this process has the store open."""
    if not hasattr(os, "geteuid"):
        return  # no POSIX owners (Windows): the folder's ACL is what protects the file
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            st = os.stat(file) if file == path else os.lstat(file)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode) and file != path:
            raise ReadOnlyStoreError(f"{file} is a symbolic link; memlens will not use it (nothing was changed)")
        if st.st_uid != os.geteuid():
            raise ReadOnlyStoreError(
                f"{file} belongs to another user (uid {st.st_uid}); memlens will not use it as your store (nothing was changed). "
                "Move it away, or choose another --db path"
            )
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ReadOnlyStoreError(
                f"{file} can be written by other users (mode {stat.S_IMODE(st.st_mode):04o}); memlens will not use it as your store "
                f"(nothing was changed). If it is yours, make it private first: chmod 600 {file}"
            )


def _make_private(path: Path) -> None:
    """Create the store's folder, and any missing folder above it, readable by the owner only (memories are private)."""
    missing = []
    folder = path.parent
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=stat.S_IRWXU, exist_ok=True)
        with contextlib.suppress(OSError):
            folder.chmod(stat.S_IRWXU)  # mkdir's mode is filtered by the umask; this is exact


def connect(path: Path, *, create: bool = True, readonly: bool = False) -> Connection:
    """Open (and if needed create and migrate) the memlens database at ``path``.

    Refuses, without writing, a file that is not SQLite, SQLite written by another application, corrupt, or
    written by a newer memlens. ``readonly`` opens with ``mode=ro`` (time-travel previews, doctor).
    """
    path = Path(path)
    kind = ""

    def identify_and_create(busy: bool) -> None:
        nonlocal kind
        kind = _identify(path, busy)
        if not readonly:
            _check_trusted(path)
        if kind == "new" and (readonly or not create):
            state = "is empty" if path.exists() else "does not exist"
            raise NotAMemlensDatabase(f"{path} {state} (use `memlens init` to create a store)")
        if kind == "new":
            try:
                _make_private(path)
                # Create the file ourselves so its mode is 0600 from the first byte.
                fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
                os.close(fd)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise DiskFullError(f"the disk holding {path} is full; nothing was written") from None
                raise ReadOnlyStoreError(f"{path} cannot be created ({exc.strerror}); choose a folder you can write to") from None

    uri = f"file:{path.as_posix()}?mode={'ro' if readonly else 'rw'}"
    try:
        conn = open_connection(path, uri, before=identify_and_create)
    except sqlite.Error as exc:
        raise classify(exc, path) from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if kind == "sqlite":
            _check_identity(conn, path)
        if readonly:
            if kind == "sqlite":
                _stand_in_for_later_schema(conn)
            conn.execute("PRAGMA query_only = ON")
        else:
            # Only the process that creates the file switches it (WAL is kept in the file), and processes creating
            # a store together race to: the switch reads the header, then writes it, and a reader that asks to
            # write is refused without waiting.
            execute_while_locked(conn, "PRAGMA journal_mode = WAL", path)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        # Overwrite deleted content with zeros: a forgotten memory must not linger in free pages.
        conn.execute("PRAGMA secure_delete = ON")
        _register_functions(conn)
        if kind == "sqlite":
            # Before anything writes: a store found damaged stays readable, and every write transaction refuses.
            conn._memlens_damage = check_pages(conn)
        if not readonly:
            migrate(conn, path)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite.Error):
            raise classify(exc, path) from None
        raise
    return conn


#: Columns later migrations added to ``memories``, with the value each migration gave existing rows (schema 7's
#: confidence by origin; schema 9's NULL text importance, which readers compute from the text).
_LATER_MEMORY_COLUMNS: dict[str, str] = {
    "source_confidence": "CASE origin WHEN 'user' THEN 1.0 WHEN 'import' THEN 0.9 WHEN 'agent' THEN 0.8 ELSE 0.7 END",
    "text_importance": "NULL",
}
#: Tables later migrations added, as empty stand-ins with the columns readers select (schemas 7 and 8).
_LATER_TABLES: dict[str, str] = {
    "conflicts": (
        "CREATE TEMP TABLE conflicts (id INTEGER PRIMARY KEY, newer_id INTEGER NOT NULL, older_id INTEGER NOT NULL, "
        "detected_at REAL NOT NULL, score REAL NOT NULL, method TEXT NOT NULL, evidence TEXT NOT NULL DEFAULT '{}', "
        "status TEXT NOT NULL DEFAULT 'open', resolution TEXT)"
    ),
    "similarity_changes": "CREATE TEMP TABLE similarity_changes (seq INTEGER PRIMARY KEY, memory_id INTEGER, latest INTEGER NOT NULL, tag INTEGER NOT NULL)",
}


def _stand_in_for_later_schema(conn: Connection) -> None:
    """Let a read-only connection to a store from an older schema read like a current one.

    A read-only open cannot migrate, yet every reader selects the current columns. So the columns and tables later
    migrations added are supplied in the connection's private temp schema (never the file): a ``memories`` view
    over the stored table with each missing column as the migration would have filled it, and empty tables for
    missing ones. Unqualified names find temp objects first, so no query changes; SQLite flattens the view, so
    the stored table's indexes are used as before.
    """
    have = {row[1] for row in conn.execute("PRAGMA main.table_info(memories)")}
    if not have:
        return  # not a memlens store yet (an empty SQLite file): nothing reads it
    missing = [f"{expr} AS {name}" for name, expr in _LATER_MEMORY_COLUMNS.items() if name not in have]
    if missing:
        conn.execute(f"CREATE TEMP VIEW memories AS SELECT *, {', '.join(missing)} FROM main.memories")
    tables = {row[0] for row in conn.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
    for name, create in _LATER_TABLES.items():
        if name not in tables:
            conn.execute(create)


#: Stores up to this many pages (8 MiB at 4 KiB a page) get SQLite's whole quick_check when opened: measured at
#: ~9 µs a page, so at most ~20 ms (0.6 ms without it). A 200k-memory store (38,774 pages) would take 0.6-0.8 s,
#: so larger stores get the bounded tail check instead (~4 ms on that store).
QUICK_CHECK_MAX_PAGES = 2048
#: The newest rows of each rowid table read by the tail check: pages written last sit at the end of the file.
TAIL_ROWS = 256
#: The last rows, in key order, of each WITHOUT ROWID table read by the tail check: all of a small one
#: (memory_tags, relations, the FTS term indexes), whose newest pages are spread over its keys.
KEY_TAIL_ROWS = 20_000
#: The last entries, in key order, of each index read by the tail check (an index leaf holds ~100 of them).
INDEX_TAIL_ROWS = 1024


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _key_columns(conn: Connection, index: str) -> list[tuple[str, str]] | None:
    """(column with its collation, direction) pairs that walk ``index`` from its last entry backwards, in key
    order; None for an index on expressions."""
    columns = []
    for _seqno, cid, column, desc, collation, key in conn.execute(f"PRAGMA index_xinfo({_quote(index)})"):
        if not key:
            continue
        if cid < 0 or column is None:
            return None
        columns.append((f"{_quote(column)} COLLATE {_quote(collation)}", "ASC" if desc else "DESC"))
    return columns


def _has_no_rowid(conn: Connection, quoted_table: str) -> bool:
    try:
        conn.execute(f"SELECT rowid FROM {quoted_table} LIMIT 0")
    except sqlite.OperationalError as exc:
        if "no such column" in str(exc):
            return True
        raise
    return False


def _tail_reads(conn: Connection) -> Iterator[str]:
    """The queries of the bounded check: one per b-tree of the store (see :func:`check_pages`)."""
    tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'")
    for (table,) in tables.fetchall():
        quoted = _quote(table)
        indexes = conn.execute(f"PRAGMA index_list({quoted})").fetchall()  # seq, name, unique, origin, partial
        primary = next((name for _seq, name, _unique, origin, _partial in indexes if origin == "pk"), None)
        without_rowid = primary is not None and _has_no_rowid(conn, quoted)
        if without_rowid:
            order = ", ".join(f"{c} {d}" for c, d in _key_columns(conn, str(primary)) or [])
            yield f"SELECT count(*) FROM (SELECT * FROM {quoted} ORDER BY {order} LIMIT {KEY_TAIL_ROWS})"
        else:
            yield f"SELECT * FROM {quoted} ORDER BY rowid DESC LIMIT {TAIL_ROWS}"
        for _seq, index, _unique, _origin, partial in indexes:
            if without_rowid and index == primary:
                continue  # that index is the table itself, read above
            key = _key_columns(conn, index)
            if not key:
                continue
            where = ""
            if partial:
                sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (index,)).fetchone()[0]
                match = re.search(r"\)\s*WHERE\s+(.+)$", sql or "", re.IGNORECASE | re.DOTALL)
                if match is None:
                    continue
                where = f" WHERE {match.group(1)}"
            columns = ", ".join(c for c, _d in key)
            order = ", ".join(f"{c} {d}" for c, d in key)
            # Only the index's own columns: SQLite walks the index backwards and never visits the table.
            yield (
                f"SELECT count(*) FROM (SELECT {columns} FROM {quoted} INDEXED BY {_quote(index)}{where} "
                f"ORDER BY {order} LIMIT {INDEX_TAIL_ROWS})"
            )


#: How long the check on open keeps retrying while another process changes the schema (a new store's migrations).
SCHEMA_RETRY_SECONDS = 5.0


def check_pages(conn: Connection) -> str | None:
    """The check of :func:`_check_pages_once`, again while another process changes the schema under it.

    The full-text tables' constructor reads their shadow tables with statements of its own. When another process
    commits a schema change meanwhile (processes that create a store together: one of them runs the migrations
    while the others open it), the constructor fails with SQLITE_SCHEMA ("vtable constructor failed"), which
    SQLite does not retry itself. The check reads only, so running it again is safe."""
    deadline = time.monotonic() + SCHEMA_RETRY_SECONDS
    delay = 0.005
    while True:
        try:
            return _check_pages_once(conn)
        except sqlite.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite.SQLITE_SCHEMA or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def _check_pages_once(conn: Connection) -> str | None:
    """What is wrong with the store's pages, or None when the check found nothing. Reads only, through SQLite.

    A store of up to QUICK_CHECK_MAX_PAGES pages gets ``PRAGMA quick_check``: every page of every b-tree.

    A larger one gets a bounded check, so opening stays fast (~4 ms on a 200k-memory store of 38,774 pages). It
    reads, through ordinary queries, the pages most likely to be hit, the ones written last:

    * of every rowid table (FTS shadow tables included), the TAIL_ROWS rows of highest rowid;
    * of every WITHOUT ROWID table (memory_tags, relations, the FTS ``_idx`` and ``_config`` tables),
      the last KEY_TAIL_ROWS rows in primary-key order, so the whole of any smaller table;
    * of every index (partial ones through their WHERE clause), the last INDEX_TAIL_ROWS entries in key order.

    A damaged page on those paths (their leaves and the interior pages above them) raises "malformed" and is
    reported. What it cannot see: pages of a big b-tree away from its key-order end - the middle of a large index or
    WITHOUT ROWID table on random keys (memories_by_project, a memory_tags of more than KEY_TAIL_ROWS rows), which
    gets new pages all over its keys; older rows of rowid tables; overflow pages of rows it does not read; free
    pages; indexes on expressions (skipped). ``memlens doctor`` runs the full integrity check for those. Never
    opens the file itself: this process holds connections to it (see :func:`in_use`)."""
    try:
        if conn.execute("PRAGMA page_count").fetchone()[0] <= QUICK_CHECK_MAX_PAGES:
            first = str(conn.execute("PRAGMA quick_check(1)").fetchone()[0])
            # SQLite's report spans lines ("*** in database main ***\nTree 33 page 557: ..."); messages are one line.
            return None if first == "ok" else "; ".join(line for line in first.splitlines() if line and not line.startswith("***"))
        for query in list(_tail_reads(conn)):
            try:
                conn.execute(query).fetchall()
            except sqlite.OperationalError as exc:
                if "no query solution" not in str(exc):  # a partial index whose WHERE clause the planner did not take
                    raise
    except sqlite.DatabaseError as exc:
        if "malformed" in str(exc).lower() or "corrupt" in str(exc).lower() or "not a database" in str(exc).lower():
            return str(exc)
        raise
    return None


def damage_of(conn: Connection) -> str | None:
    """What the check on open found wrong with ``conn``'s store (see :func:`check_pages`), or None."""
    return getattr(conn, "_memlens_damage", None) or None


def refuse_writes_if_damaged(conn: Connection, path: Path | str) -> None:
    """Raise CorruptDatabaseError when ``conn``'s store was found damaged on open (see :func:`check_pages`)."""
    damage = damage_of(conn)
    if damage:
        raise CorruptDatabaseError(
            f"{path} is damaged ({damage}); memlens will not write into it (reading still works where the damage "
            "allows). Run `memlens doctor` to see what is wrong, and restore a backup"
        )


def _check_identity(conn: Connection, path: Path) -> None:
    """Raise unless the open file is a memlens database this version can use. Reads only."""
    try:
        # One read transaction, so the three answers come from one snapshot: read one by one, they can straddle
        # another process's first migration (tables already there, application id not yet) and name a brand-new
        # memlens store foreign.
        conn.execute("BEGIN")
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.execute("COMMIT")
    except sqlite.Error as exc:
        raise classify(exc, path) from None
    if app_id != schema.APPLICATION_ID:
        if not tables:
            return  # an empty SQLite file (created by `sqlite3 file ''`): ours to initialise
        raise NotAMemlensDatabase(f"{path} is a SQLite database, but not a memlens store (it belongs to another application)")
    if version > schema.SCHEMA_VERSION:
        raise NewerDatabaseError(
            f"{path} was written by a newer memlens (schema {version}; this version knows up to "
            f"{schema.SCHEMA_VERSION}). Upgrade memlens to open it; the file was left untouched."
        )
    missing = set(schema.REQUIRED_TABLES) - tables if version == schema.SCHEMA_VERSION else set()
    if missing:
        raise CorruptDatabaseError(f"{path} is a memlens store with missing tables ({', '.join(sorted(missing))}); run `memlens doctor`")


def migrate(conn: Connection, path: Path | str = "") -> None:
    """Bring the schema up to date, each migration applied together with its version record in one transaction."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for version, statements in schema.MIGRATIONS:
        if version <= current:
            continue
        with transaction(conn, path):
            # Re-read inside the write lock: another process may have migrated meanwhile.
            if conn.execute("PRAGMA user_version").fetchone()[0] >= version:
                continue
            # A migration that recreates an FTS table (schema 11) keeps its secure-delete setting.
            secure = [t for t in schema.FTS_TABLES if _fts_secure_delete_on(conn, t)]
            for sql in statements:
                try:
                    conn.execute(sql)
                except sqlite.OperationalError as exc:
                    # ADD COLUMN has no IF NOT EXISTS: a file whose version record lags its tables has it already.
                    if not (sql.lstrip().upper().startswith("ALTER TABLE") and "duplicate column name" in str(exc)):
                        raise
            if version == 1:
                conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
                if HAS_FTS5_SECURE_DELETE and os.environ.get("MEMLENS_SQLITE", "").lower() != "system":
                    # Stores created with a current SQLite purge deleted terms from the FTS index in place.
                    for table in schema.FTS_TABLES:
                        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('secure-delete', 1)")
            for table in secure:
                if not _fts_secure_delete_on(conn, table):
                    conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('secure-delete', 1)")
            conn.execute(f"PRAGMA user_version = {version}")


def _fts_secure_delete_on(conn: Connection, table: str) -> bool:
    """Whether the FTS5 table ``table`` purges deleted terms in place (False when it does not exist yet)."""
    try:
        row = conn.execute(f"SELECT v FROM {table}_config WHERE k = 'secure-delete'").fetchone()
    except sqlite.OperationalError:
        return False
    return bool(row and row[0])


#: Values bound per ``IN (...)`` list by :func:`select_in`: well below SQLite's limit on bound parameters.
IN_BATCH = 500


def select_in(conn: Connection, sql: str, values: Sequence[Any], *, batch: int = IN_BATCH) -> Iterator[Any]:
    """The rows of ``sql`` for every one of ``values``: ``sql`` holds one ``IN ({marks})`` list, asked ``batch``
    values at a time. Rows come batch after batch, in no promised order within one."""
    for start in range(0, len(values), batch):
        chunk = list(values[start : start + batch])
        yield from conn.execute(sql.format(marks=",".join("?" * len(chunk))), chunk).fetchall()


@contextlib.contextmanager
def transaction(conn: Connection, path: Path | str = "") -> Iterator[Connection]:
    """One write transaction: BEGIN IMMEDIATE at the top level, a SAVEPOINT when nested; rollback on any error.

    The write lock is taken up front (IMMEDIATE) so two writers queue on the busy timeout instead of failing
    half-way; if the lock still cannot be had, it is retried with backoff for up to LOCK_RETRY_SECONDS, then
    a StoreLockedError says so. SQLite errors leave as memlens errors; the original error is kept as the cause.
    """
    if conn.in_transaction:
        name = f"sp_{random.randrange(1 << 30)}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    refuse_writes_if_damaged(conn, path)
    execute_while_locked(conn, "BEGIN IMMEDIATE", path)
    try:
        yield conn
    except BaseException as exc:
        with contextlib.suppress(Exception):
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite.Error):
            raise classify(exc, path) from exc
        raise
    try:
        conn.execute("COMMIT")
    except sqlite.Error as exc:
        with contextlib.suppress(Exception):
            conn.execute("ROLLBACK")
        raise classify(exc, path) from exc


def execute_while_locked(conn: Connection, sql: str, path: Path | str) -> None:
    """Run ``sql``, retrying with backoff for up to LOCK_RETRY_SECONDS while the store is locked.

    The busy timeout covers most waits, but SQLite returns SQLITE_BUSY at once, without calling its busy handler,
    where waiting could deadlock: a connection inside a read that asks to write. BEGIN IMMEDIATE after a timeout
    that ran out, and a switch into WAL (a read of the header, then its write), both come here.
    """
    deadline = time.monotonic() + LOCK_RETRY_SECONDS
    delay = 0.01
    while True:
        try:
            conn.execute(sql)
            return
        except sqlite.OperationalError as exc:
            err = classify(exc, path)
            if not isinstance(err, StoreLockedError) or time.monotonic() >= deadline:
                raise err from exc
            global lock_retries
            lock_retries += 1
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)

