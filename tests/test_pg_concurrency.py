"""Many writers on one PostgreSQL database: processes standing for agents on several hosts remember (with
supersede), import, observe, recall, sweep and forget at once. Nothing committed is lost, every chain keeps exactly
one latest version, no supersede is made twice, and the audit chain verifies. The writers are serialised by one
advisory lock per database (memlens.postgres.connection.WRITE_LOCK_KEY), taken by every write transaction."""

from __future__ import annotations

from pathlib import Path

from memlens import MemoryStore
from memlens.tools import stress


def test_stress_on_one_server_loses_nothing(pg_url: str, tmp_path: Path):
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
