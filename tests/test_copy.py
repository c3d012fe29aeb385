"""``memlens copy`` (memlens.storage.copying): a store copied SQLite -> PostgreSQL -> SQLite arrives row for row, with
the same search hits and an audit log that verifies and ends at the same head; an interrupted copy resumes to the
same result as an uninterrupted one; foreign or diverged destinations are refused; the CLI end to end."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlens import MemoryStore, db
from memlens.cli import main
from memlens.storage import audit_seal, copying
from memlens.storage.copying import CopyError, CopyProgress, copy_store

HOUR = timedelta(hours=1)
#: Every table the copy carries, and the supersede index it rebuilds (the other FTS internals are derived and left out).
COMPARED = [*copying.WHOLE_TABLES, *(t.name for t in copying.TABLES), *copying.REBUILT_TABLES]
QUERIES = ["deploy script", "Wednesday", "tabs", "design review", "staging OR production", "会议", "Bash", "café"]


class _Embedder:
    """A stand-in embedding client (``model`` and ``embed``): vectors from the text's shape."""

    model = "stand-in-3"

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([[len(t), t.count("e"), 1.5] for t in texts], dtype=np.float32)


def _fill(store: MemoryStore, t0: datetime) -> dict[str, int]:
    """A store with a row in every table the copy carries."""
    store.configure({"supersede_threshold": 0.75}, now=t0)
    first = store.remember("The deploy script lives in scripts/deploy.sh and needs the staging key", layer="semantic", tags=["ops", "deploy"], now=t0)
    second = store.remember("The deploy script lives in scripts/deploy.sh and needs the production key", layer="semantic", now=t0 + HOUR)
    assert second.parent_id == first.id  # a version chain
    tabs = store.remember("Alice prefers tabs over spaces in the café project", project="café", pinned=True, now=t0)
    store.remember("周三下午开会讨论发布计划", tags=["会议"], ttl_days=30, now=t0)
    store.relate(tabs.id, second.id, "related", score=0.4, now=t0)
    store.start_session("s-1", project="café", metadata={"title": "release planning"}, now=t0)
    store.observe("s-1", "Bash", {"command": "make deploy"}, "deployed to staging", project="café", now=t0 + HOUR)
    store.observe("s-1", "Read", {"path": "README.md"}, "the readme", project="café", now=t0 + 2 * HOUR)
    store.end_session("s-1", now=t0 + 3 * HOUR)
    store.observe("s-2", "Bash", {"command": "rm -rf build"}, "gone", now=t0)
    store.forget_session("s-2", reason="test", now=t0 + HOUR)
    # The same memory recalled twice at one time: access_log rows with equal keys (no primary key there).
    for when in (t0 + HOUR, t0 + HOUR, t0 + 2 * HOUR):
        store.recall([tabs.id, first.id], now=when)
    doomed = store.remember("A passing note to forget", now=t0)
    store.forget(doomed.id, reason="test", now=t0 + HOUR)  # a tombstone, and a sequence above the highest id
    store.update(tabs.id, importance=0.9, tags=["style"], now=t0 + HOUR)
    store.remember("The weekly design review is on Wednesday.", origin="user", now=t0)
    store.remember("The weekly design review moved to Thursday.", now=t0 + HOUR)
    [conflict] = store.list_conflicts()
    store.resolve_conflict(conflict.id, now=t0 + 2 * HOUR)
    assert store.embed_pending(_Embedder(), now=t0 + 2 * HOUR) > 0
    return {"tabs": tabs.id, "first": first.id}


def _normal(value: Any) -> Any:
    # SQLite's REAL and PostgreSQL's double come back alike; an int stored in a REAL column reads as a float in both.
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _rows(conn: Any, table: str) -> list[tuple[Any, ...]]:
    # SQLite's contentless FTS5 gives back rowids only: the memories the supersede index holds.
    cur = conn.execute(f"SELECT {'rowid' if table == 'similarity_index' else '*'} FROM {table}")
    names = [d[0] for d in cur.description]
    # By column name, so that the two backends' column orders do not matter.
    return sorted((tuple((n, _normal(v)) for n, v in sorted(zip(names, row, strict=True))) for row in cur.fetchall()), key=repr)


def _dump(location: str | Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every compared table of the store at ``location``, read past memlens."""
    if isinstance(location, str):
        import psycopg

        with psycopg.connect(location) as conn:
            return {t: _rows(conn, t) for t in COMPARED}
    # The SQLite memlens writes with: the supersede index's FTS5 format may be newer than the interpreter's own.
    conn = db.sqlite.connect(location)
    try:
        return {t: _rows(conn, t) for t in COMPARED}
    finally:
        conn.close()


def _observed(location: str | Path, now: datetime) -> dict[str, Any]:
    """What the store answers: search hits, a supersede decision, the audit check and head."""
    with MemoryStore.open(location, create=False) as store:
        hits = {q: [h.memory.id for h in store.search(q, now=now)] for q in QUERIES}
        preview = store.preview_supersede("The deploy script lives in scripts/deploy.sh and needs the release key", layer="semantic", now=now)
        check = store.verify_audit()
        head = store.audit(limit=1)[0].hash
    return {
        "hits": hits,
        "supersede": (preview.action, preview.target.id if preview.target else None, preview.similarity),
        "audit": (check.ok, check.checked, head),
    }


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def source(db_path: Path, t0: datetime) -> Path:
    with MemoryStore.open(db_path) as store:
        _fill(store, t0)
    return db_path


def test_a_store_goes_to_postgresql_and_back_row_for_row(source: Path, pg_url: str, tmp_path: Path, t0: datetime):
    now = t0 + 3 * HOUR
    before, digest = _dump(source), _file_digest(source)
    assert all(before[t] for t in COMPARED), [t for t in COMPARED if not before[t]]  # the store holds every kind of row
    expected = _observed(source, now)
    assert expected["audit"][0] and any(expected["hits"].values()) and expected["supersede"][0] == "supersede"

    there = copy_store(source, pg_url)
    assert not there.resumed and there.copied == there.rows == sum(len(before[t]) for t in COMPARED if t not in copying.REBUILT_TABLES)
    back = copy_store(pg_url, tmp_path / "back.db")
    assert back.audit_head == there.audit_head == expected["audit"][2] and back.audit_entries == expected["audit"][1]

    assert _file_digest(source) == digest  # the source is only read
    on_server, returned = _dump(pg_url), _dump(tmp_path / "back.db")
    for table in COMPARED:
        assert on_server[table] == before[table], table
        assert returned[table] == before[table], table
    assert _observed(pg_url, now) == expected
    assert _observed(tmp_path / "back.db", now) == expected


def _interrupt_after(batches: int) -> Any:
    seen: list[CopyProgress] = []

    def progress(p: CopyProgress) -> None:
        seen.append(p)
        if len(seen) == batches:
            raise KeyboardInterrupt

    return progress


def test_an_interrupted_copy_continues_to_the_same_result(source: Path, tmp_path: Path):
    ticks: list[CopyProgress] = []
    whole = copy_store(source, tmp_path / "whole.db", batch=2, progress=ticks.append)
    expected = _dump(tmp_path / "whole.db")
    cut_inside = {p.table for p in ticks if p.table_done < p.table_total}
    assert {"memories", "access_log", "audit", "audit_targets"} <= cut_inside  # tables of many batches, unique and repeating keys
    for n in range(1, len(ticks) + 1):  # stopped after each batch in turn
        target = tmp_path / f"cut-{n}.db"
        with pytest.raises(KeyboardInterrupt):
            copy_store(source, target, batch=2, progress=_interrupt_after(n))
        partial = _dump(target)
        with MemoryStore.open(target, create=False) as store, store.ctx.read() as conn:
            assert conn.execute("SELECT value FROM meta WHERE key = ?", (copying.MARKER_KEY,)).fetchone() is not None
        resumed = copy_store(source, target, batch=2)
        already = sum(len(partial[t.name]) for t in copying.TABLES)  # meta and sqlite_sequence are written whole by every run
        assert resumed.resumed and resumed.copied == whole.rows - already and resumed.rows == whole.rows, n
        assert _dump(target) == expected, n


def test_an_interrupted_copy_to_postgresql_continues(source: Path, pg_url: str, tmp_path: Path):
    with pytest.raises(KeyboardInterrupt):
        copy_store(source, pg_url, batch=3, progress=_interrupt_after(7))
    resumed = copy_store(source, pg_url, batch=3)
    assert resumed.resumed and 0 < resumed.copied < resumed.rows
    copy_store(source, tmp_path / "whole.db")
    assert _dump(pg_url) == _dump(tmp_path / "whole.db")


def test_a_source_changed_since_the_interruption_is_not_resumed(source: Path, tmp_path: Path, t0: datetime):
    target = tmp_path / "copy.db"
    with pytest.raises(KeyboardInterrupt):
        copy_store(source, target, batch=2, progress=_interrupt_after(5))
    with MemoryStore.open(source) as store:
        store.update(1, importance=0.1, now=t0 + 5 * HOUR)  # a row already copied changes
    with pytest.raises(CopyError, match="changed since that copy began"):
        copy_store(source, target)


def test_a_destination_of_another_store_is_refused_and_left_alone(source: Path, tmp_path: Path, t0: datetime):
    other = tmp_path / "other.db"
    with MemoryStore.open(other) as store:
        store.remember("someone else's memory", now=t0)
    before = _dump(other)
    with pytest.raises(CopyError, match="already holds another store"):
        copy_store(source, other)
    assert _dump(other) == before
    with pytest.raises(CopyError, match="the same store"):
        copy_store(source, source.parent / "." / source.name)


def test_a_finished_copy_is_recognised_and_a_diverged_one_refused(source: Path, tmp_path: Path, t0: datetime):
    target = tmp_path / "copy.db"
    copy_store(source, target)
    again = copy_store(source, target)
    assert again.already_complete and again.copied == 0 and again.audit_head == copy_store(source, tmp_path / "fresh.db").audit_head
    with MemoryStore.open(target) as store:
        store.remember("written into the copy afterwards", now=t0)
    with pytest.raises(CopyError, match="in another state"):
        copy_store(source, target)


def test_a_destination_edited_between_runs_fails_verification(source: Path, tmp_path: Path):
    target = tmp_path / "copy.db"

    # Stop once memory_tags is done, then take a row out of its middle: the resumed run cannot see the hole.
    def progress(p: CopyProgress) -> None:
        if p.table == "access_log":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_store(source, target, batch=2, progress=progress)
    raw = sqlite3.connect(target)
    (tag, memory_id) = raw.execute("SELECT tag, memory_id FROM memory_tags ORDER BY tag, memory_id LIMIT 1").fetchone()  # not the last one
    raw.execute("DELETE FROM memory_tags WHERE tag = ? AND memory_id = ?", (tag, memory_id))
    raw.commit()
    raw.close()
    with pytest.raises(CopyError, match="memory_tags has"):
        copy_store(source, target)


def test_a_source_whose_audit_log_does_not_verify_is_not_copied(source: Path, tmp_path: Path):
    with MemoryStore.open(source, create=False) as store, store.ctx.read() as conn:
        sid = audit_seal.store_id(conn)
    assert sid is not None
    audit_seal.key_path(sid).unlink()  # the key: seals and checkpoints can no longer be checked
    with pytest.raises(CopyError, match="does not verify"):
        copy_store(source, tmp_path / "copy.db")
    assert not (tmp_path / "copy.db").exists()


def test_the_cli_copies_both_ways_shows_progress_and_hides_the_password(
    source: Path, pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], t0: datetime
):
    # The throwaway server trusts its socket: the password is accepted, ignored, and must never be printed.
    with_password = pg_url.replace("postgres@", "postgres:s3cret-pw@", 1)
    assert with_password != pg_url
    assert main(["copy", str(source), with_password, "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["audit"]["verified"] and report["copied"] == report["rows"] > 0 and report["tables"]["memories"]["rows"] == 8
    assert "memories 8/8 rows" in err and "in all" in err
    assert "s3cret-pw" not in out + err

    back = tmp_path / "back.db"
    assert main(["copy", with_password, str(back)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("copied ") and "audit log verified" in out and "s3cret-pw" not in out + err
    assert _dump(back) == _dump(source)

    assert main(["copy", str(source), str(back)]) == 0  # already there: nothing to do
    assert "already holds a verified copy" in capsys.readouterr().out
    other = tmp_path / "other.db"
    with MemoryStore.open(other) as store:
        store.remember("someone else's memory", now=t0)
    assert main(["copy", str(source), str(other)]) == 1
    assert "already holds another store" in capsys.readouterr().err
