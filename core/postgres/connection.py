"""A PostgreSQL connection that the engine can use as it uses its SQLite one.

The engine's SQL is written once, for SQLite, through the DB-API surface of ``sqlite3``: ``execute`` with ``?``
parameters, tuples back, ``lastrowid``, ``in_transaction``, ``total_changes``, ``BEGIN IMMEDIATE`` for a write.
:class:`PgConnection` gives the same surface over psycopg 3, so the repositories and services run unchanged on a
server. What differs is settled in three places, and only there:

- **Syntax**, by :func:`translate`, once per statement text (cached): ``?``/``?NNN`` become ``$n``; ``INSERT OR
  IGNORE``/``OR REPLACE`` become ``ON CONFLICT``; ``IS ?`` becomes ``IS NOT DISTINCT FROM``; ``WHERE 1`` becomes
  ``WHERE TRUE``; an ``INSERT`` into a table with an id gets ``RETURNING id`` for ``lastrowid``. ``PRAGMA``\\s the
  engine reads are answered here (:meth:`PgConnection._pragma`); those that tune SQLite do nothing.
- **Objects**, by the server-side schema (:mod:`memlens.postgres.schema`): tables with the same names and columns,
  ``sqlite_sequence`` kept by a trigger exactly as SQLite's AUTOINCREMENT keeps it, a ``sqlite_master`` view,
  append-only triggers, the few SQLite functions the SQL calls.
- **The full-text and supersede indexes**, which SQLite keeps in FTS5: the modules that own them ask
  :func:`is_postgres` and use :mod:`memlens.postgres.fts` instead.

Writers on many machines are kept from interleaving by one advisory lock per database, taken by ``BEGIN
IMMEDIATE``: a write transaction on PostgreSQL is as serial as on SQLite, so a supersede decision cannot race
another writer's (no chain with two latest versions, no duplicate supersede). Readers take no lock.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

from memlens import db
from memlens.errors import InvalidInput, StoreEnvironmentError
from memlens.postgres import is_url, redact_url

#: The advisory lock every write transaction holds (the store's application id, "MLNS").
WRITE_LOCK_KEY = 0x4D4C4E53
#: The channel every committed write notifies; the app listens on it for other writers (memlens.gui.live_view).
CHANGE_CHANNEL = "memlens_changes"
#: Tables whose ``id`` an INSERT hands back as ``lastrowid``.
_TABLES_WITH_ID = ("memories", "audit", "conflicts")
#: The conflict target of ``INSERT OR REPLACE``/``OR IGNORE`` into each table (its primary key).
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "meta": ("key",),
    "sessions": ("id",),
    "memories": ("id",),
    "memory_tags": ("tag", "memory_id"),
    "relations": ("src_id", "dst_id", "kind"),
    "audit": ("id",),
    "audit_targets": ("memory_id", "audit_id"),
    "audit_seals": ("audit_id",),
    "memory_vectors": ("memory_id",),
    "forgotten_sessions": ("session_id",),
    "conflicts": ("newer_id", "older_id"),
    "similarity_index": ("rowid",),
}


# --- translation ---------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?(\d*)|[^'\"?]+", re.S)
_INSERT_OR = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)\s*\(([^)]*)\)", re.I | re.S)
_INSERT_ID = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)\b", re.I)


@lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """The PostgreSQL text of one statement the engine wrote for SQLite (see the module docstring)."""
    # String literals and quoted names are set aside while the rest is rewritten, then put back.
    parts: list[str] = []
    literals: list[str] = []
    highest = 0
    for match in _TOKEN.finditer(sql):
        token = match.group(0)
        if token.startswith("?"):
            # SQLite numbers a bare ? one past the highest number used so far; ?NNN names its number.
            number = int(match.group(1)) if match.group(1) else highest + 1
            highest = max(highest, number)
            parts.append(f"${number}")
        elif token[0] in "'\"":
            parts.append(f"\x01{len(literals)}\x01")
            literals.append(token)
        else:
            parts.append(token)
    text = _rewrite_words("".join(parts))
    text = re.sub("\x01(\\d+)\x01", lambda m: literals[int(m.group(1))], text)
    upsert = _INSERT_OR.match(text)
    if upsert:
        verb, table, columns = upsert.group(1).upper(), upsert.group(2), [c.strip() for c in upsert.group(3).split(",")]
        text = "INSERT INTO" + text[upsert.start(2) - 1 :]
        key = PRIMARY_KEYS.get(table)
        if verb == "IGNORE" or key is None:
            text += " ON CONFLICT DO NOTHING"
        else:
            updates = [c for c in columns if c not in key]
            action = "DO UPDATE SET " + ", ".join(f"{c} = EXCLUDED.{c}" for c in updates) if updates else "DO NOTHING"
            text += f" ON CONFLICT ({', '.join(key)}) {action}"
    inserted = _INSERT_ID.match(text)
    if inserted and inserted.group(1) in _TABLES_WITH_ID and "RETURNING" not in text.upper():
        text += " RETURNING id"
    return text


_WORD_RULES = [
    (re.compile(r"\bIS\s+NOT\s+(?=\$|\w+\.\w|\(|[a-z_]+\b)(?!NULL\b|TRUE\b|FALSE\b|DISTINCT\b)", re.I), "IS DISTINCT FROM "),
    (re.compile(r"\bIS\s+(?!NOT\b|NULL\b|TRUE\b|FALSE\b|DISTINCT\b)(?=\$|\w+\.\w|\(|[a-z_]+\b)", re.I), "IS NOT DISTINCT FROM "),
    (re.compile(r"\bWHERE\s+1(?=\s|$)(?!\s*=)"), "WHERE TRUE"),
    (re.compile(r"\bchar\(10\)", re.I), "chr(10)"),
    # SQLite's unary + on a column, which keeps its planner off that column's index: the server plans alone.
    (re.compile(r"(?<=[\s(])\+(?=[A-Za-z_])"), ""),
    (re.compile(r"\bBEGIN\s+IMMEDIATE\b", re.I), "BEGIN"),
]


#: A parameter tested for NULL alone gives the server no type to infer: it is compared as text, whatever it holds.
_PARAM_IS_NULL = re.compile(r"(\$\d+)(\s+IS\s+(?:NOT\s+)?NULL\b)", re.I)


def _rewrite_words(chunk: str) -> str:
    for pattern, replacement in _WORD_RULES:
        chunk = pattern.sub(replacement, chunk)
    chunk = _PARAM_IS_NULL.sub(r"\1::text\2", chunk)
    return _scalar_min_max(chunk)


_MIN_MAX = re.compile(r"\b(min|max)\s*\(", re.I)


def _scalar_min_max(text: str) -> str:
    """SQLite's two-argument ``max(a, b)``/``min(a, b)`` as PostgreSQL's ``greatest``/``least`` (the one-argument
    aggregates stay)."""
    out: list[str] = []
    at = 0
    for match in _MIN_MAX.finditer(text):
        if match.start() < at:
            continue
        depth, comma, end = 0, False, None
        for i in range(match.end() - 1, len(text)):
            ch = text[i]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    end = i
                    break
            elif ch == "," and depth == 1:
                comma = True
        if end is None or not comma:
            continue
        name = "greatest" if match.group(1).lower() == "max" else "least"
        inner = _scalar_min_max(text[match.end() : end])
        out.append(text[at : match.start()] + f"{name}({inner})")
        at = end + 1
    out.append(text[at:])
    return "".join(out)


# --- executemany of an INSERT as multi-row INSERTs ------------------------------------------------------------------

#: ``INSERT INTO t (columns) VALUES (one row of parameters and expressions)`` and what follows it.
_ONE_ROW_INSERT = re.compile(r"^(\s*INSERT\s+INTO\s+\w+\s*\(([^()]*)\)\s*VALUES\s*)(\((?:[^()'\"]|\([^()'\"]*\))*\))(.*)$", re.I | re.S)
_ON_CONFLICT = re.compile(r"^\s*(?:ON\s+CONFLICT\s*(?:\(([^()]*)\))?\s*DO\s+(NOTHING|UPDATE\b.*))?\s*$", re.I | re.S)
_PARAM = re.compile(r"\$(\d+)")
#: The most parameters one statement may carry (the protocol counts them in 16 bits) and rows per statement.
_MAX_PARAMS = 65535
MULTI_ROW_MAX = 1000


@lru_cache(maxsize=256)
def _multi_row_shape(text: str) -> tuple[str, str, str, int, tuple[int, ...] | None] | None:
    """For a translated one-row INSERT: (head, the row's VALUES tuple, the tail, its parameter count, the parameter
    numbers of an ON CONFLICT DO UPDATE's key columns, or None without one); None for any other statement."""
    match = _ONE_ROW_INSERT.match(text)
    if match is None:
        return None
    head, columns, row, tail = match.group(1), match.group(2), match.group(3), match.group(4)
    conflict = _ON_CONFLICT.match(tail)
    if conflict is None or "$" in tail:
        return None
    numbers = [int(n) for n in _PARAM.findall(row)]
    count = max(numbers, default=0)
    if count == 0 or set(numbers) != set(range(1, count + 1)):
        return None
    key: tuple[int, ...] | None = None
    if conflict.group(2) and conflict.group(2).upper().startswith("UPDATE"):
        # DO UPDATE may not touch a row twice in one statement: the rows' keys are checked for repeats, so the key
        # columns must be plain parameters of the row.
        if conflict.group(1) is None:
            return None
        names = [c.strip().lower() for c in columns.split(",")]
        values = _split_row(row[1:-1])
        if len(values) != len(names):
            return None
        key_numbers = []
        for name in (c.strip().lower() for c in conflict.group(1).split(",")):
            value = values[names.index(name)] if name in names else ""
            if not re.fullmatch(r"\$\d+", value):
                return None
            key_numbers.append(int(value[1:]))
        key = tuple(key_numbers)
    return head, row, tail, count, key


def _split_row(inner: str) -> list[str]:
    """The items of a VALUES tuple's inside, split at the commas outside parentheses."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:i].strip())
            start = i + 1
    items.append(inner[start:].strip())
    return items


def _key_value(value: Any) -> Any:
    """A key value as the server compares it, to find repeats conservatively (1, 1.0, True and "1" collide)."""
    if isinstance(value, bool | int) or (isinstance(value, float) and value.is_integer()):
        return str(int(value))
    return str(value)


def multi_row_insert(text: str, batch: Sequence[Sequence[Any]]) -> list[tuple[str, list[Any]]] | None:
    """``executemany(text, batch)`` of a one-row INSERT as a few multi-row INSERTs (``VALUES (...), (...)``), as
    ``(statement, parameters)``: one statement for up to :data:`MULTI_ROW_MAX` rows instead of one each, which cost
    a round of parse, bind and execute on the server and psycopg's work on each row (a bulk import's inserts of
    memories, tags and supersede keys). None when the statement is not such an INSERT, or the rows cannot go
    together: a row whose parameter count is not the statement's (psycopg then says so, as before), and an
    ``ON CONFLICT ... DO UPDATE`` whose rows repeat a key (one statement may not update a row twice).

    The rows are the same rows in the same order, each VALUES item coerced to its column as in a one-row INSERT,
    and row triggers fire for each row as before; the counts add up. What differs is only when an immediate
    foreign key is checked, at the end of each statement instead of each row (the store's keys are DEFERRABLE,
    and a bulk write defers them anyway)."""
    if len(batch) < 2:
        return None
    shape = _multi_row_shape(text)
    if shape is None:
        return None
    _head, _row, _tail, count, key = shape
    if any(len(params) != count for params in batch):
        return None
    if key is not None:
        keys = [tuple(_key_value(params[n - 1]) for n in key) for params in batch]
        if len(set(keys)) != len(keys):
            return None
    per_statement = max(1, min(MULTI_ROW_MAX, _MAX_PARAMS // count))
    out: list[tuple[str, list[Any]]] = []
    for start in range(0, len(batch), per_statement):
        rows = batch[start : start + per_statement]
        out.append((_multi_row_text(text, len(rows)), [value for params in rows for value in params]))
    return out


@lru_cache(maxsize=64)
def _multi_row_text(text: str, rows: int) -> str:
    """The INSERT ``text`` (see :func:`_multi_row_shape`) with ``rows`` rows, row r's parameters renumbered from
    r times the row's count."""
    shape = _multi_row_shape(text)
    assert shape is not None
    head, row, tail, count, _key = shape
    pieces = _PARAM.split(row)  # text, number, text, number, ..., text
    values = []
    for r in range(rows):
        offset = r * count
        values.append("".join(piece if i % 2 == 0 else f"${int(piece) + offset}" for i, piece in enumerate(pieces)))
    return head + ", ".join(values) + tail


# --- errors --------------------------------------------------------------------------------------------------------


def _as_sqlite_error(exc: Exception) -> Exception:
    """A psycopg error as the DB-API class of the SQLite module the engine catches (IntegrityError stays one)."""
    import psycopg

    message = f"{exc} (PostgreSQL)".replace("\n", " ")
    if isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.errors.DeadlockDetected | psycopg.errors.QueryCanceled):
        return db.sqlite.OperationalError(f"database is locked: {message}")
    if isinstance(exc, psycopg.DataError) and "0x00" in str(exc):
        return InvalidInput("PostgreSQL cannot store the NUL character (U+0000) in text; remove it (a SQLite store can keep it)")
    if isinstance(exc, psycopg.IntegrityError):
        return db.sqlite.IntegrityError(message)
    if isinstance(exc, psycopg.OperationalError):
        return StoreEnvironmentError(f"the PostgreSQL server cannot be reached or refused the connection: {message}")
    return db.sqlite.OperationalError(message)


# --- the connection ------------------------------------------------------------------------------------------------


class PgCursor:
    """The result of one statement, as a ``sqlite3.Cursor`` gives it: rows as tuples, ``rowcount``, ``lastrowid``."""

    def __init__(self, rows: list[tuple[Any, ...]] | None, rowcount: int, lastrowid: int | None, names: Sequence[str] = ()) -> None:
        self._rows = rows or []
        #: As DB-API gives it: a 7-tuple per column, the name first (None for a statement without rows).
        self.description = tuple((name, None, None, None, None, None, None) for name in names) if names else None
        self._at = 0
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        rest = self._rows[self._at :]
        self._at = len(self._rows)
        return rest

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        chunk = self._rows[self._at : self._at + size]
        self._at += len(chunk)
        return chunk

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while (row := self.fetchone()) is not None:
            yield row


class PgConnection:
    """One psycopg 3 connection in autocommit mode, with transactions begun and ended by the SQL the engine sends
    (``BEGIN IMMEDIATE``, ``SAVEPOINT``, ``COMMIT``, ``ROLLBACK``), exactly as its SQLite connection is used."""

    is_postgres = True  # see memlens.postgres.is_postgres

    def __init__(self, raw: Any, url: str) -> None:
        self.raw = raw
        self.url = url
        self.total_changes = 0
        self._changes_at_begin = 0
        self._closed = False
        #: Callables run just before a write transaction commits (the full-text index's pending rows).
        self.before_commit: list[Callable[[PgConnection], None]] = []
        #: What a damaged SQLite file would note here (see memlens.db.damage_of); a server checks its own pages.
        self._memlens_damage: str | None = None

    @property
    def in_transaction(self) -> bool:
        import psycopg

        return bool(self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        stripped = sql.lstrip()
        head = stripped[:8].upper()
        if head.startswith("PRAGMA"):
            return self._pragma(stripped)
        if head.startswith("COMMIT") or head.startswith("END"):
            self._commit()
            return PgCursor(None, -1, None)
        text = translate(sql)
        try:
            with self._raw_cursor() as cur:
                cur.execute(text, list(params) if params is not None else None, prepare=False)
                rows = cur.fetchall() if cur.description is not None else None
                names = [c.name for c in cur.description] if cur.description is not None else []
                rowcount = cur.rowcount
        except Exception as exc:
            if _is_psycopg_error(exc):
                raise _as_sqlite_error(exc) from exc
            raise
        if head.startswith("BEGIN"):
            self._changes_at_begin = self.total_changes
            if "IMMEDIATE" in stripped[:20].upper():
                self._lock_for_writing()
            else:
                # SQLite's deferred BEGIN: one snapshot for several reads (a writer still takes the lock).
                self.raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return PgCursor(None, -1, None)
        lastrowid = None
        if rowcount and rowcount > 0 and head.startswith(("INSERT", "UPDATE", "DELETE", "REPLACE")):
            self.total_changes += rowcount
            if rows and text.endswith("RETURNING id") and head.startswith("INSERT"):
                lastrowid = int(rows[-1][0])
                rows = None
        return PgCursor(rows, rowcount, lastrowid, names if rows is not None else ())

    def executemany(self, sql: str, seq_of_params: Iterable[Sequence[Any]]) -> PgCursor:
        text = translate(sql)
        if text.endswith(" RETURNING id"):
            text = text[: -len(" RETURNING id")]
        batch = [list(p) for p in seq_of_params]
        if not batch:
            return PgCursor(None, 0, None)
        try:
            with self._raw_cursor() as cur:
                statements = multi_row_insert(text, batch)
                if statements is None:
                    cur.executemany(text, batch)
                    rowcount = cur.rowcount
                else:
                    rowcount = 0
                    for statement, params in statements:
                        cur.execute(statement, params, prepare=False)
                        rowcount += max(cur.rowcount, 0)
        except Exception as exc:
            if _is_psycopg_error(exc):
                raise _as_sqlite_error(exc) from exc
            raise
        if rowcount > 0:
            self.total_changes += rowcount
        return PgCursor(None, rowcount, None)

    def _raw_cursor(self) -> Any:
        """A cursor taking ``$n`` parameters (what :func:`translate` writes); the psycopg connection itself keeps
        psycopg's ``%s`` for this package's own statements."""
        import psycopg

        return psycopg.RawCursor(self.raw)

    def _lock_for_writing(self) -> None:
        try:
            self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
        except BaseException as exc:
            # The transaction just begun is aborted with the statement: end it, so that BEGIN IMMEDIATE can be
            # retried (memlens.db retries a locked store) on a connection that is not stuck in a failed transaction.
            with contextlib.suppress(Exception):
                self.raw.execute("ROLLBACK")
            if _is_psycopg_error(exc):
                raise _as_sqlite_error(exc) from exc  # type: ignore[arg-type]
            raise

    def _commit(self) -> None:
        try:
            if self.total_changes != self._changes_at_begin:
                for hook in self.before_commit:
                    hook(self)
                # Another connection's data_version moves, and live views learn of it (LISTEN/NOTIFY).
                self.raw.execute("UPDATE memlens_changes SET n = n + 1")
                self.raw.execute(f"NOTIFY {CHANGE_CHANNEL}")
            self.raw.execute("COMMIT")
        except Exception as exc:
            if _is_psycopg_error(exc):
                raise _as_sqlite_error(exc) from exc
            raise

    def commit(self) -> None:
        if self.in_transaction:
            self._commit()

    def rollback(self) -> None:
        if self.in_transaction:
            self.raw.execute("ROLLBACK")

    def _pragma(self, statement: str) -> PgCursor:
        name = re.match(r"PRAGMA\s+(\w+)", statement, re.I)
        key = name.group(1).lower() if name else ""
        if key == "data_version":
            (n,) = self.raw.execute("SELECT n FROM memlens_changes").fetchone()
            return PgCursor([(int(n),)], -1, None)
        if key == "user_version":
            from memlens.postgres import schema

            version = schema.current_version(self)
            return PgCursor([(schema.SQLITE_EQUIVALENT.get(version, version),)], -1, None)
        if key == "defer_foreign_keys":
            # Checked at commit instead of at each statement: the store's foreign keys are DEFERRABLE for this.
            on = re.search(r"=\s*(\w+)", statement)
            deferred = on is not None and on.group(1).lower() in ("on", "1", "true", "yes")
            self.raw.execute(f"SET CONSTRAINTS ALL {'DEFERRED' if deferred else 'IMMEDIATE'}")
            return PgCursor(None, -1, None)
        if key == "query_only" and "=" not in statement:
            # A read-only store's session refuses writes (set by connect): SQLite's query_only, as asked.
            (on,) = self.raw.execute("SHOW default_transaction_read_only").fetchone()
            return PgCursor([(int(on == "on"),)], -1, None)
        if key == "busy_timeout" and "=" not in statement:
            return PgCursor([(db.BUSY_TIMEOUT_MS,)], -1, None)
        if key == "table_info":
            table = re.search(r"\((\w+)\)", statement)
            rows = self.raw.execute(
                "SELECT ordinal_position - 1, column_name::text, data_type::text, (is_nullable = 'NO')::int, column_default, 0 "
                "FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
                (table.group(1) if table else "",),
            ).fetchall()
            return PgCursor(rows, -1, None)
        if key == "database_list":
            # The store's "file", by which its audit checkpoints are kept (memlens.storage.audit_seal): its URL.
            return PgCursor([(0, "main", redact_url(self.url))], -1, None)
        if key == "wal_checkpoint":
            return PgCursor([(0, 0, 0)], -1, None)
        if key in ("busy_timeout", "cache_size", "query_only", "foreign_keys", "secure_delete", "synchronous", "journal_mode"):
            return PgCursor(None, -1, None)  # SQLite's tuning; the server has its own
        raise db.sqlite.OperationalError(f"PRAGMA {key} has no PostgreSQL counterpart in memlens")

    def create_function(self, *args: Any, **kwargs: Any) -> None:
        raise db.sqlite.NotSupportedError("SQL functions written in Python run in SQLite only")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.in_transaction:
                self.raw.execute("ROLLBACK")
            _pools.release(self.url, self.raw)


def _is_psycopg_error(exc: BaseException) -> bool:
    import psycopg

    return isinstance(exc, psycopg.Error)


def connect(url: str, *, create: bool = True, readonly: bool = False) -> PgConnection:
    """Connect to the PostgreSQL database at ``url`` and bring its memlens schema up to date (creating it in an
    empty database when ``create``). The password comes from the URL, ``$PGPASSWORD`` or ``~/.pgpass``, as libpq
    finds it; messages never show it."""
    try:
        import psycopg  # noqa: F401  (here to say what to install; the pool imports it again)
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise StoreEnvironmentError("a PostgreSQL store needs psycopg and psycopg-pool: pip install 'memlens[postgres]'") from None
    from memlens.postgres import derived, schema

    raw = _pools.checkout(url)
    conn = PgConnection(raw, url)
    conn.before_commit.append(derived.flush)
    try:
        if readonly:
            raw.execute("SET default_transaction_read_only = on")
        schema.prepare(conn, create=create and not readonly)
    except BaseException:
        conn.close()
        raise
    return conn


#: What every server connection is opened with.
_CONNECT_OPTIONS: dict[str, Any] = {"autocommit": True, "application_name": "memlens", "connect_timeout": 10}
#: The most connections one process keeps to one database.
POOL_SIZE = 8


class _Pools:
    """One psycopg_pool.ConnectionPool per database while any store of this process has it open: a second store on
    the same database (the app's reader thread and its tasks, a server's request handlers) takes an idle
    connection instead of connecting again, and a closed store's connection goes back reset (:func:`_reset`).
    The pool closes with the last store, so a process that opened many databases (the tests) keeps no threads.

    The first connection to a database is made directly, outside the pool: a wrong password or an unreachable
    host is then reported at once, in the server's words, instead of as a pool timeout after its retries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[Any, int]] = {}  # url -> (pool, stores using it)

    def checkout(self, url: str) -> Any:
        import psycopg
        from psycopg_pool import ConnectionPool, PoolTimeout

        with self._lock:
            pool, users = self._open.get(url, (None, 0))
            if pool is None:
                try:
                    psycopg.connect(url, **_CONNECT_OPTIONS).close()
                except psycopg.Error as exc:
                    raise StoreEnvironmentError(f"cannot connect to {redact_url(url)}: {str(exc).strip()}") from None
                pool = ConnectionPool(
                    url, kwargs=_CONNECT_OPTIONS, min_size=0, max_size=POOL_SIZE, configure=_configure_types, reset=_reset,
                    check=ConnectionPool.check_connection, num_workers=1, timeout=30, open=True,
                )  # fmt: skip
            self._open[url] = (pool, users + 1)
        try:
            return pool.getconn()
        except (PoolTimeout, psycopg.Error) as exc:
            self.release(url, None)
            raise StoreEnvironmentError(f"cannot connect to {redact_url(url)}: {str(exc).strip()}") from None

    def release(self, url: str, raw: Any) -> None:
        """Give ``raw`` back (None: it was never had) and close the pool once no store uses it."""
        with self._lock:
            pool, users = self._open[url]
            if raw is not None:
                pool.putconn(raw)
            if users > 1:
                self._open[url] = (pool, users - 1)
                return
            del self._open[url]
        pool.close()

    def close_all(self) -> None:
        with self._lock:
            pools = [pool for pool, _users in self._open.values()]
            self._open.clear()
        for pool in pools:
            pool.close()


def _reset(raw: Any) -> None:
    """A connection back in the pool forgets its session: settings (read-only), LISTENs, temporary objects. Not
    DISCARD ALL: it would drop the statements psycopg prepared, which psycopg still counts on."""
    raw.execute("RESET ALL")
    raw.execute("UNLISTEN *")
    raw.execute("DISCARD TEMP")


_pools = _Pools()
atexit.register(_pools.close_all)


def _configure_types(raw: Any) -> None:
    """Values in and out as SQLite gives them: a bool is stored as 0/1, and a NUMERIC (what SUM and AVG of integers
    give) comes back as an int when whole, else a float, never a Decimal."""
    from psycopg.adapt import Loader
    from psycopg.types.numeric import IntDumper

    class BoolAsInt(IntDumper):
        def dump(self, obj: Any) -> bytes:
            return b"1" if obj else b"0"

    class NumericAsNumber(Loader):
        def load(self, data: Any) -> Any:
            text = bytes(data).decode()
            return int(text) if text.lstrip("-").isdigit() else float(text)

    raw.adapters.register_dumper(bool, BoolAsInt)
    raw.adapters.register_loader("numeric", NumericAsNumber)


__all__ = ["CHANGE_CHANNEL", "PgConnection", "connect", "is_url", "redact_url", "translate"]
