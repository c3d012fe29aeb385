"""Opening: defaults, identification before any write, migrations, newer and foreign files refused untouched."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from memlens import MemoryStore, NewerDatabaseError, NotAMemlensDatabase, schema
from memlens.config import default_store_path
from memlens.errors import CorruptDatabaseError


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_default_path_comes_from_env_or_platformdirs(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLENS_DB", str(tmp_path / "x.db"))
    assert default_store_path() == tmp_path / "x.db"
    monkeypatch.delenv("MEMLENS_DB")
    path = default_store_path()
    assert path.name == "memory.db" and path.parent.name == "memlens"


def test_new_store_is_private_and_versioned(db_path: Path):
    with MemoryStore.open(db_path) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert store.conn.execute("PRAGMA application_id").fetchone()[0] == schema.APPLICATION_ID
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(db_path.parent.stat().st_mode) == 0o700


def test_reopening_keeps_data(db_path: Path, t0):
    with MemoryStore.open(db_path) as store:
        m = store.remember("persisted", now=t0)
    with MemoryStore.open(db_path) as store:
        assert store.get(m.id).content == "persisted"


def test_newer_database_is_refused_untouched(db_path: Path):
    with MemoryStore.open(db_path):
        pass
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = digest(db_path)
    with pytest.raises(NewerDatabaseError, match="newer memlens"):
        MemoryStore.open(db_path)
    assert digest(db_path) == before
    assert not Path(str(db_path) + "-wal").exists()


def test_not_sqlite_is_refused_untouched(tmp_path: Path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"just some text, definitely not a database\n" * 100)
    before = digest(path)
    with pytest.raises(NotAMemlensDatabase, match="not a SQLite database"):
        MemoryStore.open(path)
    assert digest(path) == before


def test_foreign_sqlite_is_refused_untouched(tmp_path: Path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers(name) VALUES ('x')")
    conn.commit()
    conn.close()
    before = digest(path)
    with pytest.raises(NotAMemlensDatabase, match="another application"):
        MemoryStore.open(path)
    assert digest(path) == before
    assert not Path(str(path) + "-wal").exists()


def test_corrupt_file_is_refused_untouched(db_path: Path, t0):
    with MemoryStore.open(db_path) as store:
        store.remember_many({"content": f"memory {i}", "created_at": t0} for i in range(200))
    data = bytearray(db_path.read_bytes())
    # Keep the header (so it still looks like SQLite) and scramble the schema page.
    data[100:4096] = os.urandom(4096 - 100)
    db_path.write_bytes(bytes(data))
    before = digest(db_path)
    with pytest.raises((CorruptDatabaseError, NotAMemlensDatabase)):
        MemoryStore.open(db_path)
    assert digest(db_path) == before


def test_empty_file_becomes_a_store(tmp_path: Path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with MemoryStore.open(path) as store:
        assert store.stats()["memories"] == 0


def test_missing_file_without_create(tmp_path: Path):
    with pytest.raises(NotAMemlensDatabase, match="does not exist"):
        MemoryStore.open(tmp_path / "nope.db", create=False)
    assert not (tmp_path / "nope.db").exists()


def test_migrations_apply_in_order_with_their_version(tmp_path: Path, monkeypatch):
    path = tmp_path / "m.db"
    with MemoryStore.open(path):
        pass
    extra = (schema.SCHEMA_VERSION + 1, ["CREATE TABLE migration_probe (x INTEGER)", "INSERT INTO migration_probe VALUES (42)"])
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, extra])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", extra[0])
    with MemoryStore.open(path) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == extra[0]
        assert store.conn.execute("SELECT x FROM migration_probe").fetchone()[0] == 42
    # A failing migration rolls back whole: the version stays and nothing of it remains.
    broken = (extra[0] + 1, ["CREATE TABLE half_done (x INTEGER)", "THIS IS NOT SQL"])
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, broken])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", broken[0])
    with pytest.raises(Exception, match="syntax error"):
        MemoryStore.open(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == extra[0]
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchone() is None
    conn.close()


def test_readonly_open_refuses_writes(db_path: Path, t0):
    with MemoryStore.open(db_path) as store:
        store.remember("x", now=t0)
    with MemoryStore.open(db_path, readonly=True) as ro:
        assert ro.count_memories(now=t0) == 1
        with pytest.raises(ValueError, match="read-only"):
            ro.remember("y", now=t0)



def test_identifying_a_file_reads_one_snapshot(tmp_path: Path):
    """Another process's first migration may commit while this one identifies the file: the answers must come
    from one snapshot, or a brand-new memlens store looks like another application's (tables, no app id yet)."""
    from memlens import db

    path = tmp_path / "racing.db"
    other = db.sqlite.connect(str(path), isolation_level=None)
    other.execute("PRAGMA journal_mode = WAL")

    class Reader:
        """This process's connection; the other process commits right after the first question is answered."""

        def __init__(self) -> None:
            self.conn = db.sqlite.connect(str(path), isolation_level=None)

        def execute(self, sql: str, *args: object):
            cursor = self.conn.execute(sql, *args)
            if sql == "PRAGMA application_id":
                other.execute("BEGIN IMMEDIATE")
                other.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY)")
                other.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
                other.execute("COMMIT")
            return cursor

    reader = Reader()
    try:
        db._check_identity(reader, path)  # sees the file as it was before: empty, ours to initialise
    finally:
        reader.conn.close()
        other.close()
