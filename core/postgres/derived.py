"""What SQLite's triggers compute in Python, computed on PostgreSQL just before a write transaction commits.

In SQLite the full-text index and ``memories.text_importance`` follow a row's text through triggers that call
memlens's own Python functions (:func:`memlens.db._register_functions`). A PostgreSQL server cannot call them, so
its trigger only notes the row in ``fts_pending`` (:mod:`memlens.postgres.schema`), and :func:`flush` does the rest
in the same transaction: whatever path wrote the row (remember, import, edits, repairs), the index is exact at
commit. A read of the index inside a write transaction flushes first (:func:`flush` is cheap when nothing is noted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlens.decay import text_importance

if TYPE_CHECKING:
    from memlens.postgres.connection import PgConnection

#: Rows indexed per pass (one COPY of their postings): a bulk write's batch (remember_many's default 5000) in one
#: pass, since each COPY ends with the server finishing its last chunk while this process waits.
_BATCH = 5000


def flush(conn: PgConnection) -> None:
    """Index the rows noted since the last flush, drop the entries of rows gone, fill missing text importance."""
    from memlens.postgres import fts

    raw = conn.raw
    while True:
        noted = [r[0] for r in raw.execute("DELETE FROM fts_pending WHERE memory_id IN (SELECT memory_id FROM fts_pending LIMIT %s) RETURNING memory_id", (_BATCH,))]
        if not noted:
            return
        rows = raw.execute(
            "SELECT id, title, content, tags, index_context, index_dates, text_importance FROM memories WHERE id = ANY(%s)", (noted,)
        ).fetchall()
        present = {r[0] for r in rows}
        fts.delete(raw, [i for i in noted if i not in present])
        fts.index(raw, [r[:6] for r in rows])
        missing = [(text_importance(r[2]), r[0]) for r in rows if r[6] is None]
        if missing:
            with raw.cursor() as cur:
                cur.executemany("UPDATE memories SET text_importance = %s WHERE id = %s", missing)


def flush_pending(conn: object) -> None:
    """Before a read of the full-text index inside a write transaction: index what the transaction wrote so far
    (outside one, every commit has flushed already)."""
    from memlens.postgres import is_postgres

    if is_postgres(conn) and conn.in_transaction:  # type: ignore[attr-defined]
        flush(conn)  # type: ignore[arg-type]
