"""Forget erases: the text leaves the table, the FTS index and the WAL; the audit keeps only a hash."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from memlens import MemoryStore, NotFound

SECRET = "zanzibarquokka"  # a word that appears nowhere else


def file_bytes(path: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(path) + suffix)
        if p.exists():
            data += p.read_bytes()
    return data


def _fill(store: MemoryStore, t0, n: int = 300) -> None:
    # Enough other rows that the FTS index has several segments and pages get reused.
    store.remember_many({"content": f"ordinary memory number {i} about builds and deploys", "created_at": t0} for i in range(n))


def test_forget_erases_from_file_and_wal(db_path: Path, t0):
    with MemoryStore.open(db_path) as store:
        _fill(store, t0)
        m = store.remember(f"the vault phrase is {SECRET} for the backup", tags=[SECRET + "tag"], now=t0)
        _fill(store, t0, 50)
        store.search(SECRET, now=t0)
        assert SECRET.encode() in file_bytes(db_path)
        store.forget(m.id, reason="secret", now=t0)
        assert store.search(SECRET, now=t0) == []
    data = file_bytes(db_path)
    assert SECRET.encode() not in data
    assert (SECRET + "tag").encode() not in data
    with MemoryStore.open(db_path) as store:  # never comes back after a restart
        with pytest.raises(NotFound):
            store.get(m.id)
        assert store.search(SECRET, include_superseded=True, include_expired=True, now=t0) == []
        entry = store.audit(operation="forget")[0]
        assert entry.target_ids == (m.id,)
        assert entry.details["content_sha256"][str(m.id)] == hashlib.sha256(m.content.encode()).hexdigest()
        assert entry.details["reason"] == "secret"


ERASE_SCRIPT = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timezone
    from memlens import MemoryStore
    from memlens import db
    assert db.sqlite.sqlite_version == sys.argv[2], db.sqlite.sqlite_version
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with MemoryStore.open(sys.argv[1]) as store:
        store.remember_many({"content": f"ordinary memory {i} about builds", "created_at": now} for i in range(300))
        m = store.remember("the vault phrase is %s here", now=now)
        store.remember_many({"content": f"more memory {i}", "created_at": now} for i in range(50))
        store.forget(m.id, now=now)
    """
).replace("%s", SECRET)


def test_forget_erases_on_the_system_sqlite(tmp_path: Path):
    import sqlite3

    path = tmp_path / "sys.db"
    env = {**os.environ, "MEMLENS_SQLITE": "system"}
    subprocess.run([sys.executable, "-c", ERASE_SCRIPT, str(path), sqlite3.sqlite_version], check=True, env=env, cwd=Path(__file__).parent.parent)
    assert path.exists()
    assert SECRET.encode() not in file_bytes(path)


def test_whole_chain(store: MemoryStore, t0):
    a = store.remember("Use yarn to install dependencies in this project", now=t0)
    b = store.remember("Use pnpm to install dependencies in this project", now=t0)
    result = store.forget(a.id, whole_chain=True, reason="stale", now=t0)
    assert set(result.erased) == {a.id, b.id}
    assert store.count_memories(latest_only=False, now=t0) == 0


def test_forget_a_middle_version_keeps_the_rest(store: MemoryStore, t0):
    a = store.remember("Use yarn to install dependencies in this project", now=t0)
    b = store.remember("Use pnpm to install dependencies in this project", now=t0)
    c = store.remember("Use bun to install dependencies in this project", now=t0)
    store.forget(b.id, now=t0)
    assert [m.id for m in store.history(c.id)] == [a.id, c.id]
    assert store.get(c.id).is_latest and store.get(c.id).parent_id is None


def test_forget_session(store: MemoryStore, t0):
    store.observe("s1", "Bash", "ls", "a b c", now=t0)
    store.observe("s1", "Read", {"file_path": "x.py"}, "print(1)", now=t0)
    keep = store.observe("s2", "Bash", "ls", "a", now=t0)
    result = store.forget_session("s1", reason="private session", now=t0)
    assert len(result.erased) == 2
    assert [m.id for m in store.list_memories(layers=["working"], now=t0)] == [keep.id]
    with pytest.raises(NotFound):
        store.session("s1")


def test_forget_matching(store: MemoryStore, t0):
    a = store.remember("customer ACME uses the blue plan", project="crm", now=t0)
    store.remember("customer Globex uses the red plan", project="crm", now=t0)
    store.remember("ACME office is in Berlin", project="other", now=t0)
    result = store.forget_matching("acme", project="crm", reason="gdpr request", now=t0)
    assert result.erased == (a.id,)
    assert len(store.search("acme", now=t0)) == 1
    with pytest.raises(ValueError):
        store.forget_matching(None, now=t0)


def test_forget_many(store: MemoryStore, t0):
    ms = [store.remember(f"distinct memory {w}", now=t0) for w in ("alpha", "bravo", "charlie")]
    result = store.forget_many([ms[0].id, ms[2].id], reason="cleanup", now=t0)
    assert set(result.erased) == {ms[0].id, ms[2].id}
    assert [m.id for m in store.list_memories(now=t0)] == [ms[1].id]


def test_ttl_sets_forget_after(store: MemoryStore, t0):
    m = store.remember("expires soon", ttl_days=2, now=t0)
    assert m.forget_after == t0 + timedelta(days=2)
    assert m.is_expired(t0 + timedelta(days=3)) and not m.is_expired(t0)
    assert store.stats(now=t0 + timedelta(days=3))["expired"] == 1
    with pytest.raises(ValueError):
        store.remember("bad", ttl_days=-1, now=t0)
