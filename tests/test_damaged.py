"""A store with a damaged page: found when it is opened, read where it can be, never written into.

The attack: a page of random bytes near the end of the file went unnoticed by `stats`, `search` and `remember`, and
`remember` then wrote into the damaged file; `backup` blamed the backup file for the source's damage.
"""

from __future__ import annotations

import hashlib
import random
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memlens import MemoryStore, db
from memlens.cli import main
from memlens.errors import CorruptDatabaseError
from memlens.maintenance import backup

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
PAGE = 4096


def build(path: Path, memories: int = 3000) -> None:
    with MemoryStore.open(path) as store:
        store.remember_many(({"content": f"memory number {i} about caches and deploys " * 5} for i in range(memories)), now=T0)


def damage(path: Path, pages_from_end: int = 3) -> None:
    """Overwrite one page near the end of the (closed) store with random bytes."""
    pages = path.stat().st_size // PAGE
    with path.open("r+b") as fh:
        fh.seek((pages - pages_from_end) * PAGE)
        fh.write(random.Random(16).randbytes(PAGE))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def damaged(db_path: Path) -> Path:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    build(db_path)
    damage(db_path)
    return db_path


def run(db_path: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--db", str(db_path), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_writes_into_a_damaged_store_are_refused_and_reads_still_work(damaged: Path, capsys: pytest.CaptureFixture[str]):
    before = digest(damaged)
    code, out, err = run(damaged, "stats", capsys=capsys)
    assert code == 0 and "semantic" in out
    assert err.startswith(f"memlens: warning: {damaged} is damaged") and "answers may be incomplete" in err, err
    code, out, _err = run(damaged, "search", "memory number 41", capsys=capsys)
    assert code == 0 and "#42" in out
    code, _out, err = run(damaged, "remember", "written after the damage", capsys=capsys)
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith(f"memlens: {damaged} is damaged") and "memlens doctor" in err and "backup" in err, err
    assert digest(damaged) == before  # nothing was written into it
    with MemoryStore.open(damaged) as store, pytest.raises(CorruptDatabaseError, match="will not write into it"):
        store.remember("through the Python API", now=T0)


def test_backup_of_a_damaged_store_names_the_store(damaged: Path, tmp_path: Path):
    target = tmp_path / "backup.db"
    with pytest.raises(CorruptDatabaseError) as caught:
        backup(damaged, target)
    message = str(caught.value)
    assert message.startswith(f"{damaged} is damaged") or message.startswith(f"the backup of {damaged} failed its check"), message
    assert f"{target} is damaged" not in message and not target.exists()


def test_large_stores_get_a_bounded_check_of_the_end_of_the_file(db_path: Path, monkeypatch: pytest.MonkeyPatch):
    db_path.parent.mkdir(parents=True, exist_ok=True)
    build(db_path)
    monkeypatch.setattr(db, "QUICK_CHECK_MAX_PAGES", 16)  # this store counts as large: the tail check runs
    conn = db.connect(db_path, readonly=True)
    try:
        assert db.check_pages(conn) is None  # a healthy store passes
    finally:
        conn.close()
    for back in (1, 3, 10):
        copy = db_path.with_name(f"damaged-{back}.db")
        copy.write_bytes(db_path.read_bytes())  # the healthy store is closed: copying its bytes is safe
        damage(copy, back)
        conn = db.connect(copy, readonly=True)
        try:
            assert db.check_pages(conn), f"a damaged page {back} from the end went unnoticed"
        finally:
            conn.close()


def test_a_healthy_store_after_forgetting_and_updating_is_not_taken_for_damaged(store: MemoryStore, db_path: Path):
    ids = [store.remember(f"memory {i} about something else entirely {i * 7}", now=T0).id for i in range(300)]
    for memory_id in ids[::3]:
        store.forget(memory_id, now=T0)
    store.close()
    with MemoryStore.open(db_path) as reopened:
        assert db.check_pages(reopened.conn) is None
        reopened.remember("still writable", now=T0)


def leaves(path: Path, btree: str) -> list[tuple[int, str]]:
    """(page number, path from the root) of each leaf page of ``btree`` in the (closed) store, read with dbstat."""
    import sqlite3  # the interpreter's build has dbstat; pysqlite3's does not

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT pageno, path FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (btree,)).fetchall()
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table to find the pages with")
    finally:
        conn.close()


def found_when_damaged(healthy: Path, pageno: int) -> str | None:
    """What the bounded check says of a copy of ``healthy`` with page ``pageno`` (1-based) overwritten."""
    copy = healthy.with_name(f"damaged-page-{pageno}.db")
    copy.write_bytes(healthy.read_bytes())  # the healthy store is closed: copying its bytes is safe
    damage(copy, healthy.stat().st_size // PAGE - pageno + 1)
    conn = db.connect(copy, readonly=True)
    try:
        return db.check_pages(conn)
    finally:
        conn.close()


def test_the_bounded_check_reads_the_pages_a_without_rowid_table_wrote_last(db_path: Path, monkeypatch: pytest.MonkeyPatch):
    """memory_tags (WITHOUT ROWID, keyed by tag) gets its newest pages all over its keys, at the end of the file."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with MemoryStore.open(db_path) as store:
        # Tags in no order of the memories' (7919 is prime to 3000): each batch's rows land all over the b-tree.
        store.remember_many(({"content": f"memory number {i} about caches", "tags": [f"tag-{i * 7919 % 3000:04d}-long-enough"]} for i in range(3000)), now=T0)
    monkeypatch.setattr(db, "QUICK_CHECK_MAX_PAGES", 16)
    pages = sorted(leaves(db_path, "memory_tags"), reverse=True)
    assert len(pages) >= 3
    for pageno, _path in pages[:3]:  # the last three pages of the file that hold memory_tags rows
        assert found_when_damaged(db_path, pageno), f"damage in memory_tags page {pageno} went unnoticed"


def test_the_bounded_check_reads_the_last_pages_of_every_index(db_path: Path, monkeypatch: pytest.MonkeyPatch):
    db_path.parent.mkdir(parents=True, exist_ok=True)
    build(db_path)
    monkeypatch.setattr(db, "QUICK_CHECK_MAX_PAGES", 16)
    for index in ("memories_by_layer", "memories_by_chain"):
        last_by_key = max(leaves(db_path, index), key=lambda leaf: leaf[1])[0]  # dbstat paths sort in key order
        assert found_when_damaged(db_path, last_by_key), f"damage in the last page of {index} went unnoticed"
    newest = max(leaves(db_path, "memories_by_chain"))[0]  # the index page written last
    assert found_when_damaged(db_path, newest), "damage in the newest page of memories_by_chain went unnoticed"
