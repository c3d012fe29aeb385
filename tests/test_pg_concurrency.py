"""Many writers on one PostgreSQL database: processes standing for agents on several hosts remember (with
supersede), import, observe, recall, sweep and forget at once. Nothing committed is lost, every chain keeps exactly
one latest version, no supersede is made twice, and the audit chain verifies. The writers are serialised by one
advisory lock per database (memlens.postgres.connection.WRITE_LOCK_KEY), taken by every write transaction."""

from __future__ import annotations

from pathlib import Path

from memlens import MemoryStore
from memlens.tools import stress


def test_two_processes_setting_up_one_new_database_set_it_up_once(pg_url: str, tmp_path: Path):
    # Every process opens the not yet created store at the same moment: the schema is made under the lock.
    result = stress.run(processes=2, writes=5, seed=2, db_path=pg_url, workdir=tmp_path, with_maintainer=False, with_reader=False)
    assert result.ok, result.describe()


def test_stress_on_one_server_loses_nothing(pg_url: str, tmp_path: Path):
    MemoryStore.open(pg_url).close()  # the schema first: what races below is the writes alone
    result = stress.run(processes=3, writes=40, seed=11, db_path=pg_url, workdir=tmp_path)
    assert result.ok, result.describe()
    assert result.lost == 0 and result.lock_errors == 0 and result.bad_chains == 0 and not result.other_errors
    assert result.committed >= result.attempted - result.conflicts and result.memories > 0
    with MemoryStore.open(pg_url) as store:
        # No supersede made twice: each replaced version has exactly one successor.
        twice = store.conn.execute(
            "SELECT COUNT(*) FROM (SELECT parent_id FROM memories WHERE parent_id IS NOT NULL GROUP BY parent_id HAVING COUNT(*) > 1) AS t"
        ).fetchone()[0]
        assert twice == 0


def test_a_write_lock_that_times_out_is_retried_on_a_clean_connection(pg_url: str, t0):
    # With a lock_timeout set on the server, waiting for the write lock fails instead of waiting: memlens retries
    # BEGIN IMMEDIATE as for a locked file, on a connection whose aborted transaction was ended first.
    import threading

    import psycopg

    from memlens import db
    from memlens.postgres.connection import WRITE_LOCK_KEY

    with MemoryStore.open(pg_url) as store:
        store.ctx.conn.raw.execute("SET lock_timeout = '50ms'")
        holder = psycopg.connect(pg_url)
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
        release = threading.Timer(0.6, holder.rollback)
        retries = db.lock_retries
        release.start()
        try:
            memory = store.remember("written once the other writer let go", now=t0)
        finally:
            release.join()
            holder.close()
        assert store.get(memory.id).content == "written once the other writer let go"
        assert db.lock_retries > retries
