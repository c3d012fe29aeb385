"""A long sweep: erased in batches of one transaction and one index purge each (the text is gone from the file),
with progress between batches and a cancel that leaves a consistent store and an audit entry saying it stopped."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from memlens import MemoryStore
from memlens import sweep as sweep_engine
from memlens.storage import forgetting

DAY = timedelta(days=1)
SCAN = "import sys, os; print(any(sys.argv[1].encode() in open(p, 'rb').read() for p in sys.argv[2:] if os.path.exists(p)))"


def _needle(n: int) -> str:
    return f"quokka{n:04d}zanzibar"


def _expiring(store: MemoryStore, t0, count: int) -> list[int]:
    return [store.remember(f"The temporary passphrase {_needle(n)} rotates", ttl_days=1, now=t0).id for n in range(count)]


def _in_files(db_path: Path, text: str) -> bool:
    # Read by another process: this one holds the store open and must not open its files a second time.
    files = [str(db_path), f"{db_path}-wal", f"{db_path}-shm"]
    out = subprocess.run([sys.executable, "-c", SCAN, text, *files], capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


@pytest.mark.sqlite_only  # reads the file's bytes (a server's erasure: tests/test_pg_erasure.py)
def test_a_bulk_sweep_erases_the_text_from_the_indexes_and_the_file(store: MemoryStore, db_path: Path, t0):
    count = forgetting.BULK_PURGE_ROWS + 20
    ids = _expiring(store, t0, count)
    kept = store.remember("The API lives at https://api.example.com", now=t0)
    report = store.sweep(now=t0 + 2 * DAY)
    assert sorted(d.memory_id for d in report.decisions) == ids and not report.stopped
    assert store.search("zanzibar passphrase", now=t0 + 2 * DAY) == []
    assert store.search("API", now=t0 + 2 * DAY)[0].memory.id == kept.id
    # The indexes delete securely again for the next single forget, and nothing of the text is left in the files.
    assert store.conn.execute("SELECT v FROM memory_fts_config WHERE k = 'secure-delete'").fetchone()[0] == 1
    assert store.conn.execute("SELECT v FROM similarity_index_config WHERE k = 'secure-delete'").fetchone()[0] == 1
    assert not _in_files(db_path, _needle(7)) and not _in_files(db_path, "zanzibar")
    # One audit entry per decision, with its hash, as before.
    entries = store.audit(operation="sweep", limit=1000)
    assert len(entries) == count and all(len(e.details["content_sha256"]) == 1 for e in entries)


def test_progress_between_batches_and_cancel_leaves_a_consistent_store(store: MemoryStore, t0, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sweep_engine, "APPLY_BATCH", 4)
    ids = _expiring(store, t0, 10)
    seen: list[tuple[int, int]] = []
    report = store.sweep(now=t0 + 2 * DAY, progress=lambda done, total: seen.append((done, total)), cancel=lambda: len(seen) >= 2)
    assert seen == [(4, 10), (8, 10)]
    assert report.stopped and [d.memory_id for d in report.decisions] == ids[:8]
    assert "stopped" in report.summary()
    assert sorted(m.id for m in store.list_memories(include_expired=True, latest_only=False, now=t0)) == ids[8:]
    [run] = store.audit(operation="sweep_run", limit=1)
    assert run.details["stopped"] is True and run.details["planned"] == 10 and run.details["decisions"] == 8
    assert len(store.audit(operation="sweep", limit=100)) == 8
    # The next sweep carries out the rest.
    rest = store.sweep(now=t0 + 2 * DAY)
    assert [d.memory_id for d in rest.decisions] == ids[8:] and not rest.stopped
    assert store.audit(operation="sweep_run", limit=1)[0].details.get("stopped") is None


def test_progress_of_a_sweep_in_one_batch(store: MemoryStore, t0):
    _expiring(store, t0, 3)
    seen: list[tuple[int, int]] = []
    report = store.sweep(now=t0 + 2 * DAY, progress=lambda done, total: seen.append((done, total)), cancel=lambda: True)
    assert seen == [(3, 3)] and not report.stopped and report.total == 3
