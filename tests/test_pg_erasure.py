"""Forgetting on PostgreSQL: the forgotten text is gone from every table and index the store keeps, and VACUUM has
run over the tables a forget touches, so no row version waits in their pages (what PostgreSQL does not promise
beyond that, WAL, replicas and backups, is in the README)."""

from __future__ import annotations

import psycopg

from memlens import MemoryStore
from memlens.maintenance import doctor

SECRET = "zanzibarquokka"


def _tables_holding(url: str, needle: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        names = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        return [n for n in names if conn.execute(f'SELECT 1 FROM "{n}" t WHERE t::text ILIKE %s LIMIT 1', (f"%{needle}%",)).fetchone()]


def _dead_rows_holding(url: str, needle: str) -> dict[str, int]:
    """The dead row versions (deleted or replaced, not yet vacuumed) holding ``needle``, by table, read from the
    tables' pages with the pg_dirtyread extension: what is still on disk though no query returns it."""
    from memlens.storage.context import ERASED_TABLES

    found: dict[str, int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_dirtyread")
        for table in ERASED_TABLES:
            columns = conn.execute(
                "SELECT string_agg(quote_ident(attname) || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
                "FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                (table,),
            ).fetchone()[0]
            n = conn.execute(f"SELECT count(*) FROM pg_dirtyread('{table}') AS t({columns}) WHERE t::text ILIKE %s", (f"%{needle}%",)).fetchone()[0]
            if n:
                found[table] = n
    return found


def test_forget_leaves_the_text_in_no_table(pg_url: str, t0):
    with MemoryStore.open(pg_url) as store:
        kept = store.remember("the deploy key rotates every month", tags=["ops"], now=t0)
        store.start_session("s1", now=t0)
        gone = store.remember(f"the staging password hint is {SECRET} remember it", tags=[SECRET], session_id="s1", now=t0)
        store.recall([gone.id], now=t0)
        store.relate(gone.id, kept.id, "related", now=t0)
        assert _tables_holding(pg_url, SECRET) and _tables_holding(pg_url, "zanzibarquokka"[:8])  # the text and its index terms
        store.update(gone.id, tags=[SECRET, "rotated"], now=t0)  # a replaced row version holding the text, too
        assert _dead_rows_holding(pg_url, SECRET)  # the check can see what lingers in the pages
        store.forget(gone.id, reason="leaked", now=t0)
        assert store.search(SECRET, now=t0) == []
        assert _dead_rows_holding(pg_url, SECRET) == {}  # VACUUM removed the dead versions from the pages
        assert _dead_rows_holding(pg_url, SECRET[:8]) == {}
        assert store.get(kept.id).content == kept.content
    assert _tables_holding(pg_url, SECRET) == []
    assert _tables_holding(pg_url, "zanzibarquokka"[:8]) == []  # no stemmed or prefix form either
    report = doctor(pg_url)
    assert report.check("erasure").ok, report.check("erasure")
    assert report.ok, [c for c in report.checks if not c.ok]


def test_a_vacuum_that_did_not_run_is_reported_and_run_by_the_next_open(pg_url: str, t0):
    with MemoryStore.open(pg_url) as store:
        m = store.remember("a memory about to go", now=t0)
    # As if the process died between a forget's commit and its VACUUM (a store's own close would run it): the rows
    # are deleted and the forget's mark stands.
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("DELETE FROM memories WHERE id = %s", (m.id,))
        raw.execute("INSERT INTO meta(key, value) VALUES ('erasure_pending', %s)", (t0.isoformat(),))
        report = doctor(pg_url)  # read-only: reports, changes nothing
        assert not report.check("erasure").ok and "VACUUM" in report.check("erasure").summary
        assert raw.execute("SELECT value FROM meta WHERE key = 'erasure_pending'").fetchone()
    with MemoryStore.open(pg_url):  # a writable open finishes the erasure
        pass
    assert doctor(pg_url).check("erasure").ok


def test_closing_a_store_that_forgot_nothing_runs_no_vacuum(pg_url: str, t0):
    # VACUUM is for what a forget left behind: a hook opens and closes a store on every tool call of an agent.
    with MemoryStore.open(pg_url) as store:
        store.remember("an ordinary memory", now=t0)
    with MemoryStore.open(pg_url) as store:
        store.remember("another one", now=t0)
    with psycopg.connect(pg_url, autocommit=True) as raw:
        (vacuums,) = raw.execute("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'memories'").fetchone()
    assert vacuums == 0
