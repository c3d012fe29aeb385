"""Nearest-vector search in the server, with pgvector, when the server has the extension.

Without pgvector a store on PostgreSQL finds the nearest stored vectors as a file store does: memlens reads the
``memory_vectors.vector`` blobs (float32, little-endian) and scans them with numpy
(:meth:`memlens.storage.search.SearchRepository._nearest_vectors`). With the ``vector`` extension in the database,
the scan runs in the server instead, and gives the same answer:

- **The column.** ``memory_vectors.embedding`` (pgvector's ``vector``) holds each blob's values, bit for bit. A
  trigger (:data:`ENABLE_DDL`) fills it from the blob on every insert or change of a row, whoever writes it (embed,
  ``memlens copy``, a repair, an older memlens), so the two cannot drift; the blob stays the source of truth and the
  only thing copied or exported. A blob holding a NaN or an infinity gets a zero vector (similar to nothing, as numpy
  finds it); one the column cannot hold (more than :data:`MAX_DIM` values, or a length that is not ``4 * dim``) gets
  none, and the search scores those rows with numpy.
- **Exact, not approximate.** The server orders every vector passing the filters by pgvector's cosine distance
  (``<=>``) and hands back the best few with their blobs; memlens scores those few with the very numpy function the
  scan uses (:func:`nearest`, ``score``) and orders them as the scan does (most similar first, ties to the lower id).
  The server's float arithmetic differs from numpy's by rounding only; a margin larger than both roundings
  (:func:`_margin`) decides whether the rows fetched are sure to hold the ``pool`` best, else more are fetched. So
  the ids, their order and the cosines are numpy's. No approximate index (HNSW, IVFFlat) is made: it would answer
  differently from the numpy scan, and with filters (a project, a layer) it can return fewer than ``pool`` rows.
- **When it is used.** :func:`settle` runs at every open (:func:`memlens.postgres.schema.prepare`): with the
  extension installed, the column is added and filled once (under the write lock, in one transaction), and
  searches use it. The extension is created by memlens only while the schema is set up or migrated, and only
  where the server has it; pgvector is not a trusted extension, so that takes a superuser (or a managed service's
  equivalent). Refused, memlens logs a warning and uses numpy; once a database owner has run
  ``CREATE EXTENSION vector``, the next open that may write adds the column. An extension dropped later
  (``DROP EXTENSION vector CASCADE`` drops the column and its trigger with it) leaves numpy, even for a store open
  at the time: its next search falls back.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memlens import db
from memlens.postgres import is_postgres

if TYPE_CHECKING:
    import numpy as np

    from memlens.postgres.connection import PgConnection

#: The extension's name, and the column holding each stored vector as its ``vector`` type.
EXTENSION = "vector"
COLUMN = "embedding"
#: The most dimensions pgvector's ``vector`` holds.
MAX_DIM = 16_000
#: Rows fetched beyond ``pool`` by the first statement of a search (more only when the margin asks for them).
_EXTRA = 8

#: A blob's float32 values as ``real[]``, exactly (sign, exponent and mantissa taken apart; subnormals and -0
#: included), or NULL when one is NaN or infinite. Plain SQL, so it is part of the schema with or without pgvector.
FLOATS_FUNCTION = """
CREATE OR REPLACE FUNCTION memlens_vector_floats(b bytea) RETURNS real[] LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN bool_or(e = 255) THEN NULL
                ELSE array_agg((CASE WHEN e = 0 THEN m * 2.0::float8 ^ -149 ELSE (m + 8388608) * 2.0::float8 ^ (e - 150) END)
                               * (1 - 2 * s) ORDER BY i)::real[] END
    FROM (SELECT i, (w >> 31) & 1 AS s, (w >> 23) & 255 AS e, w & 8388607 AS m
          FROM (SELECT i, get_byte(b, 4 * i)::bigint | (get_byte(b, 4 * i + 1)::bigint << 8)
                          | (get_byte(b, 4 * i + 2)::bigint << 16) | (get_byte(b, 4 * i + 3)::bigint << 24) AS w
                FROM generate_series(0, length(b) / 4 - 1) AS i) AS words) AS parts
$$
"""

#: What makes a store use pgvector: the column, its trigger, the index of rows it cannot hold, the rows filled.
#: ``{ns}`` is the extension's schema. The blob is stored out of line and the vector inline (``MAIN``), so the scan
#: reads the vectors from the table's pages and never touches the blobs of the rows it does not return.
ENABLE_DDL = [
    f"ALTER TABLE memory_vectors ADD COLUMN {COLUMN} {{ns}}.vector",
    f"ALTER TABLE memory_vectors ALTER COLUMN {COLUMN} SET STORAGE MAIN",
    "ALTER TABLE memory_vectors ALTER COLUMN vector SET STORAGE EXTERNAL",
    f"""
    CREATE OR REPLACE FUNCTION memlens_blob_vector(b bytea, dim bigint) RETURNS {{ns}}.vector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE WHEN dim > {MAX_DIM} OR length(b) <> 4 * dim THEN NULL
                    ELSE coalesce(memlens_vector_floats(b), array_fill(0::real, ARRAY[dim::integer]))::{{ns}}.vector END
    $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION memlens_fill_embedding() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN NEW.{COLUMN} := memlens_blob_vector(NEW.vector, NEW.dim); RETURN NEW; END $$
    """,
    # UPDATE OF names the column, so that dropping it (with the extension) drops the trigger too.
    f"CREATE TRIGGER memory_vectors_embedding BEFORE INSERT OR UPDATE OF vector, dim, {COLUMN} ON memory_vectors "
    "FOR EACH ROW EXECUTE FUNCTION memlens_fill_embedding()",
    f"UPDATE memory_vectors SET {COLUMN} = NULL",  # the trigger fills every row
    f"CREATE INDEX memory_vectors_unfilled ON memory_vectors(memory_id) WHERE {COLUMN} IS NULL",
]

#: Where the connections of open stores stand: the extension's schema for a store searching with pgvector.
_enabled: weakref.WeakKeyDictionary[PgConnection, str] = weakref.WeakKeyDictionary()
#: Connections known to search with numpy.
_numpy: weakref.WeakSet[PgConnection] = weakref.WeakSet()

#: The extension's schema (NULL without it) and whether ``memory_vectors`` has the column.
STATE_SQL = (
    f"SELECT (SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = '{EXTENSION}'), "
    f"EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('memory_vectors') AND attname = '{COLUMN}' AND NOT attisdropped)"
)


def _log() -> Any:
    import logging  # here, not at the top: logging costs every command that opens a store

    return logging.getLogger(__name__)


def namespace(conn: Any) -> str | None:
    """The schema of the pgvector extension when ``conn``'s store searches with it, else None (numpy)."""
    if not is_postgres(conn):
        return None
    found = _enabled.get(conn)
    if found is not None or conn in _numpy:
        return found
    ns, has_column = conn.raw.execute(STATE_SQL).fetchone()  # a connection no open has settled (not the store's)
    _record(conn, ns if has_column else None)
    return _enabled.get(conn)


def _record(conn: PgConnection, ns: str | None) -> None:
    if ns is None:
        _enabled.pop(conn, None)
        _numpy.add(conn)
    else:
        _numpy.discard(conn)
        _enabled[conn] = ns


def settle(conn: PgConnection, ns: str | None, has_column: bool, *, readonly: bool) -> None:
    """At an open, with the schema current: use pgvector when the column is there; add it when the extension is
    installed and the store may be written (else numpy until such an open). Never fails the open."""
    if ns is not None and not has_column and not readonly:
        conn.execute("BEGIN IMMEDIATE")
        try:
            ns, has_column = conn.raw.execute(STATE_SQL).fetchone()  # under the write lock: another opener may have
            if ns is not None and not has_column:
                enable(conn, ns)
                has_column = True
            conn.raw.execute("COMMIT")
        except BaseException:
            conn.raw.execute("ROLLBACK")
            raise
    elif ns is not None and not has_column:
        _log().info("memlens: pgvector is installed but this store, open read-only, has no vector column yet: numpy scan")
    _record(conn, ns if ns is not None and has_column else None)


def set_up(conn: PgConnection) -> None:
    """While the schema is set up or migrated (inside that transaction, under the write lock): create the extension
    when the server has it and this role may, then :func:`enable`. A refusal is logged, not raised."""
    import psycopg

    raw = conn.raw
    ns, has_column = raw.execute(STATE_SQL).fetchone()
    if ns is None and raw.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = %s)", (EXTENSION,)).fetchone()[0]:
        raw.execute("SAVEPOINT memlens_pgvector")
        try:
            raw.execute(f"CREATE EXTENSION IF NOT EXISTS {EXTENSION}")
            raw.execute("RELEASE SAVEPOINT memlens_pgvector")
        except psycopg.Error as exc:
            raw.execute("ROLLBACK TO SAVEPOINT memlens_pgvector")
            _log().warning(
                "memlens: the server has pgvector but this role may not create the extension (%s); nearest-vector search "
                "runs in memlens (numpy). A database owner or superuser can run `CREATE EXTENSION vector;` in this "
                "database: memlens uses it from the next open.",
                str(exc).strip().splitlines()[0],
            )
        ns, has_column = raw.execute(STATE_SQL).fetchone()
    if ns is not None and not has_column:
        enable(conn, ns)


def enable(conn: PgConnection, ns: str) -> None:
    """Add the column, its trigger and index, and fill it (inside the caller's write transaction, which holds the
    write lock: about 0.4 ms of the server's time per stored vector of 384 dimensions, once)."""
    for sql in ENABLE_DDL:
        conn.raw.execute(sql.replace("{ns}", ns))


def _margin(dim: int) -> float:
    """More than the two roundings can part the server's cosine from numpy's: each is a float32 dot product and
    two norms over ``dim`` values (error at most about ``3 * dim * 2**-24`` each)."""
    return 8 * dim * 2.0**-24 + 1e-6


def nearest(
    conn: Any,
    model: str,
    unit: np.ndarray,
    where: Sequence[str],
    params: Sequence[Any],
    pool: int,
    score: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> list[tuple[int, float]] | None:
    """``(id, cosine)`` of the ``pool`` memories passing the filters ``where`` (SQL over ``memories m``) whose stored
    vectors of ``model`` are most similar to the unit vector ``unit``, best first, positive cosines only: the answer
    of the numpy scan, found by the server. ``score(matrix, unit)`` is the scan's cosine function; it scores the
    rows the server hands back. None when the store does not search with pgvector (the caller scans with numpy)."""
    ns = namespace(conn)
    dim = int(unit.shape[0])
    if ns is None or dim > MAX_DIM:
        return None
    import numpy as np

    from memlens.embeddings import blobs_to_matrix

    probe = "[" + ",".join(map(repr, unit.astype(np.float64).tolist())) + "]"  # exact: each value is a float32's
    filters = "".join(f" AND {clause}" for clause in where)
    sql = (
        f"(SELECT v.memory_id, v.vector, v.{COLUMN} OPERATOR({ns}.<=>) ?::{ns}.vector AS distance "
        "FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
        f"WHERE v.model = ? AND v.dim = ? AND v.{COLUMN} IS NOT NULL{filters} ORDER BY distance, v.memory_id LIMIT ?) "
        "UNION ALL (SELECT v.memory_id, v.vector, NULL FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
        f"WHERE v.model = ? AND v.dim = ? AND v.{COLUMN} IS NULL{filters})"
    )
    margin = _margin(dim)
    limit = pool + _EXTRA
    while True:
        rows = _fetch(conn, sql, [probe, model, dim, *params, limit, model, dim, *params])
        if rows is None:
            return None
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        scores = score(blobs_to_matrix([r[1] for r in rows], dim), unit)
        order = np.lexsort((ids, -scores))  # most similar first, ties to the lower id: the scan's order
        order = order[scores[order] > 0.0][:pool]
        found = [(int(ids[i]), float(scores[i])) for i in order]
        ranked = [r[2] for r in rows if r[2] is not None]
        if len(ranked) < limit:
            return found  # every row passing the filters was scored
        last = float(ranked[-1])
        if math.isnan(last) or last >= 1.0 + margin:
            return found  # the rows not fetched are not similar at all (NaN: a zero vector, sorted last)
        if len(found) == pool and 1.0 - last + margin < found[-1][1]:
            return found  # none of the rows not fetched can reach the pool's last
        limit *= 4


def _fetch(conn: Any, sql: str, params: list[Any]) -> list[tuple[Any, ...]] | None:
    """The rows of the search statement; None, and numpy from now on, when the extension or its column has gone
    since the store was opened (``DROP EXTENSION vector CASCADE``)."""
    inside = bool(conn.in_transaction)
    if inside:
        conn.execute("SAVEPOINT memlens_pgvector_search")
    try:
        rows = conn.execute(sql, params).fetchall()
    except db.sqlite.OperationalError as exc:
        if not _extension_gone(exc):
            raise
        if inside:
            conn.execute("ROLLBACK TO SAVEPOINT memlens_pgvector_search")
        _log().warning("memlens: pgvector is no longer usable in this database (%s); nearest-vector search falls back to numpy", exc)
        _record(conn, None)
        return None
    if inside:
        conn.execute("RELEASE SAVEPOINT memlens_pgvector_search")
    return rows


def _extension_gone(exc: BaseException) -> bool:
    import psycopg

    cause = exc.__cause__
    errors = psycopg.errors
    return isinstance(cause, errors.UndefinedColumn | errors.UndefinedFunction | errors.UndefinedObject | errors.UndefinedFile | errors.InvalidSchemaName)


__all__ = ["COLUMN", "EXTENSION", "FLOATS_FUNCTION", "MAX_DIM", "enable", "namespace", "nearest", "set_up", "settle"]
