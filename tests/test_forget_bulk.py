"""Bulk forgetting (issue 14, point 5): a forget of many memories (the GUI's multi-select, ``memlens forget`` with
several ids, a sweep) erases them in one pass, with one merge of each full-text index instead of FTS5's secure-delete
row by row, and audit entries appended together, while the text still leaves every place in ERASED_FROM."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from memlens import MemoryStore
from memlens.storage import audit_seal, forgetting

DAY = timedelta(days=1)
SCAN = "import sys, os; print(any(sys.argv[1].encode() in open(p, 'rb').read() for p in sys.argv[2:] if os.path.exists(p)))"


def _needle(n: int) -> str:
    return f"wombat{n:04d}kilimanjaro"


def _in_files(db_path: Path, text: str) -> bool:
    # Read by another process: this one holds the store open and must not open its files a second time.
    files = [str(db_path), f"{db_path}-wal", f"{db_path}-shm"]
    out = subprocess.run([sys.executable, "-c", SCAN, text, *files], capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


def _secrets(store: MemoryStore, t0, count: int) -> list[int]:
    return [store.remember(f"The vault code {_needle(n)} opens the east door", ttl_days=1, now=t0).id for n in range(count)]


@pytest.mark.sqlite_only  # reads the file's and the WAL's bytes (a server's erasure: tests/test_pg_erasure.py)
def test_forget_many_erases_every_text_from_the_file_the_wal_and_the_indexes(store: MemoryStore, db_path: Path, t0):
    count = forgetting.BULK_PURGE_ROWS + 30
    ids = _secrets(store, t0, count)
    kept = store.remember("The API lives at https://api.example.com", now=t0)
    result = store.forget_many(ids, reason="rotated", now=t0 + DAY)
    assert sorted(result.erased) == ids and result.pending_erasure is None
    assert not any(store.exists(i) for i in ids)
    assert store.search("vault code east door", now=t0 + DAY) == []
    assert store.search("API", now=t0 + DAY)[0].memory.id == kept.id
    # One audit entry naming every one of them with its hash, and a tombstone each.
    (entry,) = store.audit(operation="forget", limit=10)
    assert entry.details["count"] == count and sorted(int(i) for i in entry.details["content_sha256"]) == ids
    assert store.conn.execute("SELECT COUNT(*) FROM forgotten").fetchone()[0] == count
    # The indexes delete securely again for the next single forget, and nothing of the text is left anywhere.
    assert store.conn.execute("SELECT v FROM memory_fts_config WHERE k = 'secure-delete'").fetchone()[0] == 1
    assert store.conn.execute("SELECT v FROM similarity_index_config WHERE k = 'secure-delete'").fetchone()[0] == 1
    assert not _in_files(db_path, _needle(3)) and not _in_files(db_path, "kilimanjaro")
    assert store.verify_audit().ok


@pytest.mark.sqlite_only  # FTS5's merge and secure-delete settings (a server's erasure: tests/test_pg_erasure.py)
def test_a_large_forget_merges_the_indexes_once_instead_of_deleting_securely_row_by_row(store: MemoryStore, t0):
    if not store.ctx.fts_secure:
        pytest.skip("this SQLite has no FTS5 secure-delete: every forget merges the indexes")
    ids = _secrets(store, t0, forgetting.BULK_PURGE_ROWS)
    seen: list[str] = []
    store.conn.set_trace_callback(seen.append)
    try:
        store.forget_many(ids, reason="rotated", now=t0 + DAY)
    finally:
        store.conn.set_trace_callback(None)
    merges = [sql for sql in seen if "VALUES ('optimize')" in sql]
    assert merges == ["INSERT INTO memory_fts(memory_fts) VALUES ('optimize')", "INSERT INTO similarity_index(similarity_index) VALUES ('optimize')"]


@pytest.mark.sqlite_only  # FTS5's secure-delete setting
def test_a_small_forget_still_deletes_securely_row_by_row(store: MemoryStore, db_path: Path, t0):
    ids = _secrets(store, t0, 3)
    seen: list[str] = []
    store.conn.set_trace_callback(seen.append)
    try:
        store.forget_many(ids, now=t0 + DAY)
    finally:
        store.conn.set_trace_callback(None)
    assert not [sql for sql in seen if "optimize" in sql or "secure-delete" in sql]
    assert not _in_files(db_path, "kilimanjaro")


def test_a_sweep_appends_its_audit_entries_together_and_they_verify(store: MemoryStore, t0, monkeypatch: pytest.MonkeyPatch):
    count = forgetting.BULK_PURGE_ROWS + 10
    ids = _secrets(store, t0, count)
    loads: list[str] = []
    real_load = audit_seal.load_key
    monkeypatch.setattr(audit_seal, "load_key", lambda sid: loads.append(sid) or real_load(sid))
    report = store.sweep(now=t0 + 2 * DAY)
    assert sorted(d.memory_id for d in report.decisions) == ids
    # The store's key is read for the batch of entries, not once an entry (the sweep_run entry and the checkpoint
    # after the commit read it too).
    assert len(loads) <= 4
    entries = store.audit(operation="sweep", limit=1000)
    assert sorted(e.target_ids[0] for e in entries) == ids and all(len(e.details["content_sha256"]) == 1 for e in entries)
    ordered = sorted(entries, key=lambda e: e.id)
    assert [e.target_ids[0] for e in ordered] == [d.memory_id for d in report.decisions]  # in the plan's order
    check = store.verify_audit()
    assert check.ok and check.checked >= count


def test_forget_each_gives_each_group_its_own_entry_and_result(store: MemoryStore, t0):
    ids = _secrets(store, t0, forgetting.BULK_PURGE_ROWS + 2)
    groups = [forgetting.ForgetGroup(ids[:1], "first"), forgetting.ForgetGroup([ids[0], *ids[1:]], "rest", {"rule": "test"})]
    results = store.forgetting.forget_each(groups, now=t0 + DAY, operation="forget")
    assert [r.erased for r in results] == [tuple(ids[:1]), tuple(ids[1:])]  # an id erased by an earlier group is not repeated
    first, rest = sorted(store.audit(operation="forget", limit=10), key=lambda e: e.id)
    assert first.details["reason"] == "first" and list(first.target_ids) == ids[:1]
    assert rest.details["reason"] == "rest" and rest.details["rule"] == "test" and rest.details["count"] == len(ids) - 1
    assert store.verify_audit().ok
