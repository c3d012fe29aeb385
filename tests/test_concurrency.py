"""Several writers at once: nothing committed is lost, chains keep one latest version, no lock error reaches a caller
unless the lock is held past the retry window, and then the error says so."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from memlens import MemoryStore, StoreLockedError, db
from memlens.cli import main
from memlens.tools import stress


def test_short_stress_run_loses_nothing(tmp_path: Path):
    # The full run is `python -m memlens.tools.stress --processes 4 --writes 2000`; this is its CI-sized version.
    # The sweep is left out here: its near-duplicate rule leaves chains without a latest version (reported).
    result = stress.run(processes=3, writes=60, seed=3, workdir=tmp_path)
    assert result.ok, result.describe()
    assert 180 <= result.attempted < 180 + 30  # a batch of ten may overshoot each writer's 60
    assert result.committed >= result.attempted - result.conflicts  # everything not refused as a race was committed
    assert result.lost == 0 and result.lock_errors == 0 and result.bad_chains == 0
    assert result.memories > 0 and result.doctor_ok


def test_stress_with_a_short_busy_timeout_goes_through_memlens_retries(tmp_path: Path):
    # A 1 ms busy timeout hands almost every conflict to memlens's own retry loop instead of SQLite's.
    result = stress.run(processes=3, writes=40, seed=5, busy_timeout_ms=1, with_reader=False, workdir=tmp_path)
    assert result.lost == 0 and result.lock_errors == 0 and not result.other_errors, result.describe()


def test_opening_a_store_another_process_is_creating_waits_for_its_switch_to_wal(tmp_path: Path):
    # Processes that open a new store at the same moment all switch the fresh file into WAL. The switch reads the
    # header and then writes it, and SQLite refuses a reader's write at once, without its busy handler: so one of
    # them got "locked" from open after a few milliseconds, despite the 5 s busy timeout (seen in the stress run).
    # Here the other process's switch is a connection holding the write lock of the fresh, still rollback-mode file.
    path = tmp_path / "new.db"
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    # Through memlens's own bookkeeping, so that open() does not read the header with a descriptor of its own.
    other = db.open_connection(path, f"file:{path.as_posix()}?mode=rw")
    other.execute("PRAGMA busy_timeout = 0")
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.5, lambda: other.execute("COMMIT"))
    release.start()
    try:
        with MemoryStore.open(path) as store:
            assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            store.remember("written after the other process let go")
    finally:
        release.join()
        other.close()
    with MemoryStore.open(path) as store:
        assert [m.content for m in store.iter_memories()] == ["written after the other process let go"]


class _SchemaChangedUnderTheCheck:
    """A connection on which the page check's first ``times`` runs meet another process's schema change."""

    def __init__(self, conn: db.Connection, times: int) -> None:
        self.conn, self.times, self.refused = conn, times, 0

    def execute(self, sql: str, *args: object):
        if "quick_check" in sql and self.refused < self.times:
            self.refused += 1
            # What SQLite raised in the stress run, seen with its code: another process's migration had committed.
            exc = db.sqlite.OperationalError("vtable constructor failed: memory_fts")
            exc.sqlite_errorcode, exc.sqlite_errorname = 17, "SQLITE_SCHEMA"
            raise exc
        return self.conn.execute(sql, *args)


def test_the_check_on_open_runs_again_when_another_process_changes_the_schema(store: MemoryStore):
    conn = _SchemaChangedUnderTheCheck(store.conn, times=3)
    assert db.check_pages(conn) is None  # healthy, once the other process's migrations are done
    assert conn.refused == 3


def test_a_schema_that_never_settles_still_fails_the_check(store: MemoryStore, monkeypatch):
    monkeypatch.setattr(db, "SCHEMA_RETRY_SECONDS", 0.05)
    conn = _SchemaChangedUnderTheCheck(store.conn, times=10**6)
    with pytest.raises(db.sqlite.OperationalError, match="vtable constructor failed"):
        db.check_pages(conn)
    assert conn.refused > 1


def test_threads_sharing_one_store(store: MemoryStore, t0):
    errors: list[BaseException] = []
    ids: list[int] = []
    guard = threading.Lock()

    def work(n: int) -> None:
        try:
            for i in range(40):
                m = store.remember(f"thread {n % 2} says the cache size is {i % 5} gigabytes", now=t0)
                with guard:
                    ids.append(m.id)
        except BaseException as exc:  # collected and re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(ids) == [m.id for m in store.iter_memories()]
    bad = store.conn.execute("SELECT COUNT(*) FROM (SELECT chain_id FROM memories GROUP BY chain_id HAVING SUM(is_latest) != 1)").fetchone()[0]
    assert bad == 0


@pytest.fixture
def blocker(db_path: Path, store: MemoryStore):
    """Another process's connection holding the write lock until the test lets go."""
    conn = db.sqlite.connect(str(db_path), isolation_level=None, timeout=0)
    conn.execute("BEGIN IMMEDIATE")
    yield conn
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    conn.close()


def test_a_held_lock_is_waited_out_with_retries(store: MemoryStore, blocker, t0, monkeypatch):
    store.conn.execute("PRAGMA busy_timeout = 0")  # skip SQLite's own wait: straight to memlens's retries
    retried = threading.Event()
    real_sleep = db.time.sleep

    def sleep(seconds: float) -> None:
        retried.set()
        real_sleep(seconds)

    monkeypatch.setattr(db.time, "sleep", sleep)
    before = db.lock_retries
    result: list[object] = []
    writer = threading.Thread(target=lambda: result.append(store.remember("written once the lock is free", now=t0)))
    writer.start()
    assert retried.wait(timeout=30)  # the writer is now retrying
    blocker.execute("COMMIT")  # the other process finishes
    writer.join(timeout=60)
    assert not writer.is_alive()
    (memory,) = result
    assert store.get(memory.id).content == "written once the lock is free"  # type: ignore[attr-defined]
    assert db.lock_retries > before


def test_a_lock_held_too_long_gives_a_clear_error_and_writes_nothing(store: MemoryStore, blocker, t0, monkeypatch):
    store.conn.execute("PRAGMA busy_timeout = 0")
    monkeypatch.setattr(db, "LOCK_RETRY_SECONDS", 0.2)
    audit_before = len(store.audit())
    with pytest.raises(StoreLockedError, match="is locked by another process; try again in a moment"):
        store.remember("this cannot get in", now=t0)
    assert store.count_memories() == 0 and len(store.audit()) == audit_before


def test_reads_go_on_while_another_process_writes(store: MemoryStore, db_path: Path, t0):
    store.remember("the staging database is postgres", now=t0)
    writer = db.sqlite.connect(str(db_path), isolation_level=None)
    db._register_functions(writer)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE memories SET importance = 0.9")
    try:
        assert [h.memory.content for h in store.search("staging postgres", now=t0)] == ["the staging database is postgres"]
        assert store.count_memories() == 1 and store.stats(now=t0)["memories"] == 1
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_cli_reports_a_lock_held_too_long(capsys, store: MemoryStore, db_path: Path, blocker, monkeypatch):
    monkeypatch.setattr(db, "LOCK_RETRY_SECONDS", 0.2)
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 1)
    assert main(["--db", str(db_path), "remember", "blocked memory"]) == 1
    assert capsys.readouterr().err == f"memlens: {db_path} is locked by another process; try again in a moment\n"
