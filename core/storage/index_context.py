"""What the full-text index holds about a memory beyond its own text: its context and its grounded dates.

The stored content and what a person sees never change; only ``memory_fts`` gets two more columns, ranked with
lower weights (``SearchTuning.context_weight``/``dates_weight``):

- ``context``: for a conversation turn or an observation (:data:`CONTEXT_TYPES`), the text of the turn before it
  in its session, so an answer found through the question it answers ("the answer turn lacks the query's words,
  which sit in the turn before"); for any memory in a session, the session's ``title`` or ``topic`` (metadata)
  where it has one. "Before" is by time, then id; a superseded turn counts with its chain's latest text.
- ``dates``: the dates its relative time expressions name (:func:`memlens.dates.index_terms`).

The index is contentless, so both are stored on the row (``memories.index_context``, ``memories.index_dates``)
and the FTS triggers replay them on delete. The context copies a neighbour's words, so it is kept true to the
store: when a memory is inserted before another, forgotten, or superseded, the memories whose context it was are
given their new context (:func:`refresh_after_insert`, :func:`followers`, :func:`refresh`), and a forgotten turn's
words leave its neighbour's row and index in the same transaction.

:func:`memlens.schema.context_sql` is the one definition, used by the writers, the migration that backfills old stores, and
``memlens doctor``: every path computes the same context.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memlens import db
from memlens.dates import index_terms_at
from memlens.schema import CONTEXT_TYPES, context_sql


def dates_of(content: str, created_at: float) -> str:
    """The stored date words of a memory with this text, written at this time (UTC epoch seconds): its own day and
    its relative expressions resolved in this machine's time zone (see :mod:`memlens.dates`)."""
    return index_terms_at(content, created_at)


#: Stands for the id of a row not yet inserted: above every id, so every memory of its session came before it.
_NEW_ROW_ID = 2**63 - 1


def context_for_new(conn: db.Connection, session_id: str | None, type_: str, created_at: float) -> str:
    """The context a memory about to be inserted gets (the same expression, for a row with the next id)."""
    if session_id is None:
        return ""
    sql = f"SELECT {context_sql('b')} FROM (SELECT ? AS id, ? AS session_id, ? AS type, ? AS created_at) b"
    return str(conn.execute(sql, (_NEW_ROW_ID, session_id, type_, created_at)).fetchone()[0])


def contexts(conn: db.Connection, ids: Sequence[int]) -> dict[int, str]:
    """The context each of these memories should have now, by id."""
    sql = f"SELECT b.id, {context_sql('b')} FROM memories b WHERE b.id IN ({{marks}})"
    return {int(r[0]): r[1] for r in db.select_in(conn, sql, list(ids))}


def refresh(conn: db.Connection, ids: Iterable[int]) -> int:
    """Give these memories the context the store gives them now, inside the caller's transaction; the FTS update
    trigger re-indexes each row whose context changed. Returns how many changed."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return 0
    sql = f"UPDATE memories SET index_context = {context_sql('memories')} WHERE id IN ({{marks}}) AND index_context IS NOT {context_sql('memories')}"
    changed = 0
    for start in range(0, len(wanted), db.IN_BATCH):
        chunk = wanted[start : start + db.IN_BATCH]
        changed += conn.execute(sql.format(marks=",".join("?" * len(chunk))), chunk).rowcount
    return changed


_TYPES_SQL = ", ".join(f"'{t}'" for t in CONTEXT_TYPES)


def followers(conn: db.Connection, ids: Iterable[int]) -> list[int]:
    """The memories whose previous turn is one of ``ids``: what must be refreshed when those go or change. Read
    before a delete (afterwards the link is gone)."""
    out: list[int] = []
    sql = (
        f"SELECT n.id FROM memories a JOIN memories n ON n.session_id = a.session_id AND n.type IN ({_TYPES_SQL}) "
        f"AND (n.created_at > a.created_at OR (n.created_at = a.created_at AND n.id > a.id)) "
        f"WHERE a.id = ? AND a.session_id IS NOT NULL AND a.type IN ({_TYPES_SQL}) ORDER BY n.created_at, n.id LIMIT 1"
    )
    for memory_id in dict.fromkeys(ids):
        row = conn.execute(sql, (memory_id,)).fetchone()
        if row is not None:
            out.append(int(row[0]))
    return out


def chain_followers(conn: db.Connection, chain_ids: Iterable[int]) -> list[int]:
    """The followers of every version of these chains: a supersede changes the text all of them stand for."""
    ids = [int(r[0]) for r in db.select_in(conn, "SELECT id FROM memories WHERE chain_id IN ({marks})", list(dict.fromkeys(chain_ids)))]
    return followers(conn, ids)


def refresh_after_insert(conn: db.Connection, new_ids: Sequence[int]) -> int:
    """After memories were inserted (with their own context already set), refresh the older memories that now
    follow one of them: a turn written into the middle of a session becomes the context of the one after it.
    Appending (the usual case) finds nothing to do, by one index probe per session."""
    if not new_ids:
        return 0
    first = min(new_ids)
    earliest: dict[str, float] = {}
    for session_id, created_at in db.select_in(conn, "SELECT session_id, created_at FROM memories WHERE id IN ({marks}) AND session_id IS NOT NULL", list(new_ids)):
        if session_id not in earliest or created_at < earliest[session_id]:
            earliest[session_id] = created_at
    return sum(refresh_written_after(conn, session_id, created_at, first) for session_id, created_at in earliest.items())


def refresh_written_after(conn: db.Connection, session_id: str, created_at: float, first_new_id: int) -> int:
    """Refresh the memories of ``session_id`` written before ``first_new_id`` but dated after ``created_at``: the
    only ones whose previous turn a memory inserted at that time can change."""
    later = [int(r[0]) for r in conn.execute("SELECT id FROM memories WHERE session_id = ? AND created_at > ? AND id < ?", (session_id, created_at, first_new_id))]
    return refresh(conn, later)


def refresh_session(conn: db.Connection, session_id: str) -> int:
    """Refresh the context of every memory of a session (its title or topic changed)."""
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM memories WHERE session_id = ?", (session_id,))]
    return refresh(conn, ids)
