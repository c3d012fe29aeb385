"""The audit log: every change recorded, append-only at the SQL level, hash-chained, free of memory text."""

from __future__ import annotations

import pytest

from memlens import MemoryStore


def test_every_change_is_audited(store: MemoryStore, t0):
    a = store.remember("Use yarn to install dependencies in this project", now=t0)
    b = store.remember("Use pnpm to install dependencies in this project", now=t0)
    store.update(b.id, importance=0.9, tags=["tooling"], pinned=True, now=t0)
    store.recall([b.id], now=t0)
    store.observe("s1", "Bash", "ls", "ok", now=t0)
    store.forget(a.id, reason="old", now=t0)
    ops = [e.operation for e in reversed(store.audit())]
    assert ops == ["remember", "supersede", "update", "recall", "remember", "forget"]
    upd = store.audit(operation="update")[0]
    assert upd.details["importance"] == [0.5, 0.9] and upd.details["pinned"] == [False, True]
    assert upd.details["tags"] == {"added": 1, "removed": 0}
    assert [e.operation for e in store.audit(target_id=b.id)] == ["recall", "update", "supersede"]


def test_audit_holds_no_memory_text(store: MemoryStore, t0, db_path):
    m = store.remember("the secret codename is bluewhale42", title="codename bluewhale42", tags=["bluewhale42"], now=t0)
    store.update(m.id, tags=["bluewhale42", "other"], now=t0)
    store.forget(m.id, now=t0)
    rows = store.conn.execute("SELECT target_ids, details FROM audit").fetchall()
    assert "bluewhale42" not in repr(rows)


def test_append_only_at_sql_level(store: MemoryStore, t0, raw_sql):
    store.remember("x", now=t0)
    for sql in ("UPDATE audit SET operation = 'nothing'", "DELETE FROM audit", "DELETE FROM audit_targets"):
        with pytest.raises(raw_sql.errors, match="append-only"):
            raw_sql.execute(sql)
    if raw_sql.backend == "postgresql":  # TRUNCATE fires no row trigger: it has a guard of its own
        with pytest.raises(raw_sql.errors, match="append-only"):
            raw_sql.execute("TRUNCATE audit_targets")


def test_hash_chain_detects_tampering(store: MemoryStore, t0, raw_sql):
    for i in range(5):
        store.remember(f"memory {i}", now=t0)
    assert store.verify_audit().ok and store.verify_audit().checked == 5
    raw_sql.drop_audit_guards()
    raw_sql.execute("UPDATE audit SET details = '{\"forged\":true}' WHERE id = 3")
    check = store.verify_audit()
    assert not check.ok and check.first_bad_id == 3 and "altered" in (check.problem or "")


def test_hash_chain_detects_a_missing_entry(store: MemoryStore, t0, raw_sql):
    for i in range(4):
        store.remember(f"memory {i}", now=t0)
    raw_sql.drop_audit_guards()
    raw_sql.execute("DELETE FROM audit WHERE id = 2")
    check = store.verify_audit()
    assert not check.ok and check.first_bad_id == 2 and "missing" in (check.problem or "")
