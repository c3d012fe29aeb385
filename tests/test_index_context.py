"""Context in the index, not in the content (issue 15.2; memlens.storage.index_context, schema 11).

A conversation turn is indexed with the turn before it (lower weight), so an answer is found through the question
it answers; the stored content never changes. The context copies a neighbour's words, so it must follow the
neighbour: forgotten, superseded, or written before it later. Every write path (one by one, bulk, import,
maintenance rebuild, the schema 11 backfill of an old store) gives the same index.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlens import MemoryStore, db, maintenance, schema
from memlens.io import export_file, import_file
from memlens.storage import index_context
from memlens.text import index_text

QUESTION = "Caroline: where did you go kayaking with the kids?"
ANSWER = "Melanie: Lake Tahoe, the water was freezing but they loved it"


def _ids(store: MemoryStore, query: str, now: datetime) -> list[int]:
    return [h.memory.id for h in store.search(query, limit=20, now=now)]


def _turn(store: MemoryStore, text: str, now: datetime, session: str = "chat-1", **kw: Any) -> int:
    return store.remember(text, type="message", session_id=session, supersede=False, now=now, **kw).id


def _fts_docs(store: MemoryStore, term: str) -> list[tuple[int, str]]:
    """(memory id, column) of every indexed instance of ``term`` (as FTS5 stores it: lower-cased, stemmed)."""
    store.conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.ctx_terms USING fts5vocab(main, memory_fts, instance)")
    return [(r[0], r[1]) for r in store.conn.execute("SELECT doc, col FROM temp.ctx_terms WHERE term = ?", (term,))]


@pytest.mark.sqlite_only  # reads what FTS5 holds through fts5vocab
def test_an_answer_is_found_through_the_question_before_it_and_its_text_is_unchanged(store: MemoryStore, t0):
    question = _turn(store, QUESTION, t0)
    answer = _turn(store, ANSWER, t0)
    _turn(store, "Caroline: I started a pottery class", t0, session="chat-2")
    assert store.get(answer).content == ANSWER
    assert store.conn.execute("SELECT index_context FROM memories WHERE id = ?", (answer,)).fetchone()[0] == QUESTION
    found = _ids(store, "kayaking", t0)
    assert found[:2] == [question, answer]  # the turn that says the word ranks above the one found through it
    assert (answer, "context") in _fts_docs(store, "kayak")
    # Neither another session's turn nor a fact gets a previous turn as context.
    fact = store.remember("the team uses kayaks for offsites", session_id="chat-1", supersede=False, now=t0).id
    assert store.conn.execute("SELECT index_context FROM memories WHERE id = ?", (fact,)).fetchone()[0] == ""


def test_forgetting_a_turn_removes_its_words_from_the_next_turns_context_and_from_every_table(db_path: Path, t0):
    with MemoryStore.open(db_path) as store:
        opener = _turn(store, "Caroline: hi Mel, how was the weekend?", t0)
        secret = _turn(store, "Caroline: my passphrase is xylofrumpet, do not tell anyone", t0)
        reply = _turn(store, "Melanie: I promise I will keep it", t0)
        assert reply in _ids(store, "xylofrumpet", t0)  # found through the context before
        store.forget(secret, now=t0)
        assert _ids(store, "xylofrumpet", t0) == []
        # The reply's context is now the turn before the forgotten one.
        row = store.conn.execute("SELECT index_context FROM memories WHERE id = ?", (reply,)).fetchone()[0]
        assert row == store.get(opener).content
        assert _fts_docs(store, "xylofrumpet") == []
        for table in ("memories", "sessions", "audit", "forgotten", "relations", "meta"):
            dump = str(store.conn.execute(f"SELECT * FROM {table}").fetchall())
            assert "xylofrumpet" not in dump, table
        store.conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")
    # Not in the file's bytes either (read from another process: this one must not open the store's files).
    files = [str(db_path), f"{db_path}-wal", f"{db_path}-shm"]
    scan = "import os, sys; print(any(b'xylofrumpet' in open(p, 'rb').read() for p in sys.argv[1:] if os.path.exists(p)))"
    assert subprocess.run([sys.executable, "-c", scan, *files], capture_output=True, text=True, check=True).stdout.strip() == "False"
    assert maintenance.doctor(db_path).check("fts").ok


@pytest.mark.sqlite_only  # checks FTS5's own integrity
def test_forgetting_many_turns_at_once_refreshes_their_neighbours(store: MemoryStore, t0, monkeypatch):
    from memlens.storage import forgetting

    monkeypatch.setattr(forgetting, "BULK_PURGE_ROWS", 2)  # the merge path of a big forget
    ids = [_turn(store, f"turn {i} says word{i}", t0) for i in range(6)]
    store.forget_many(ids[1:3], now=t0)
    assert store.conn.execute("SELECT index_context FROM memories WHERE id = ?", (ids[3],)).fetchone()[0] == "turn 0 says word0"
    assert _ids(store, "word1", t0) == [] and _ids(store, "word2", t0) == []
    store.conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")


def test_forget_by_query_erases_only_what_says_the_words(store: MemoryStore, t0):
    question = _turn(store, QUESTION, t0)
    answer = _turn(store, ANSWER, t0)
    result = store.forget_matching("kayaking", now=t0)
    assert list(result.erased) == [question]
    assert store.exists(answer)
    assert store.conn.execute("SELECT index_context FROM memories WHERE id = ?", (answer,)).fetchone()[0] == ""


def test_superseding_a_turn_gives_the_next_turn_the_new_text(store: MemoryStore, t0):
    first = _turn(store, "Caroline: my cat is called Pumpernickel", t0)
    reply = _turn(store, "Melanie: what a lovely name", t0)
    newer = store.remember("Caroline: my cat is called Biscuit", type="message", supersede_id=first, now=t0 + timedelta(hours=1))
    assert newer.id != first
    context = store.conn.execute("SELECT index_context FROM memories WHERE id = ?", (reply,)).fetchone()[0]
    assert context == "Caroline: my cat is called Biscuit"
    assert reply in _ids(store, "biscuit", t0 + timedelta(hours=2))
    assert reply not in _ids(store, "pumpernickel", t0 + timedelta(hours=2))


def test_a_turn_written_into_the_middle_of_a_session_becomes_the_context_of_the_one_after_it(store: MemoryStore, t0):
    early = _turn(store, "Caroline: first", t0)
    late = _turn(store, "Melanie: third", t0 + timedelta(minutes=2))
    middle = _turn(store, "Caroline: second", t0 + timedelta(minutes=1))
    contexts = index_context.contexts(store.conn, [early, middle, late])
    assert contexts == {early: "", middle: "Caroline: first", late: "Caroline: second"}
    stored = dict(store.conn.execute("SELECT id, index_context FROM memories").fetchall())
    assert stored == contexts


def test_a_session_title_is_context_for_its_memories(store: MemoryStore, t0):
    store.start_session("plan-1", project=None, metadata={"title": "Quarterly roadmap"}, now=t0)
    fact = store.remember("we ship the importer first", session_id="plan-1", supersede=False, now=t0).id
    turn = _turn(store, "Melanie: sounds good", t0, session="plan-1")
    assert fact in _ids(store, "roadmap", t0) and turn in _ids(store, "roadmap", t0)
    # A new title replaces the old one in the index.
    store.start_session("plan-1", project=None, metadata={"title": "Hiring"}, now=t0)
    assert _ids(store, "roadmap", t0) == []
    assert set(_ids(store, "hiring", t0)) == {fact, turn}


# --- every path writes the same index ----------------------------------------------------------------------------


def _records(t0: datetime) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for i in range(40):
        recs.append(
            {
                "content": f"{'Caroline' if i % 2 else 'Melanie'}: turn {i} about topic{i % 7}" + (" yesterday" if i % 5 == 0 else ""),
                "type": "message" if i % 6 else "fact",
                "session_id": f"s{i % 3}" if i % 11 else None,
                "created_at": t0 + timedelta(minutes=i if i % 9 else -i),  # some written out of order
                "source_ref": f"D{i}",
            }
        )
    return recs


def _index_dump(store: MemoryStore) -> dict[str, Any]:
    conn = store.conn
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.eq_terms USING fts5vocab(main, memory_fts, instance)")
    by_source = dict(conn.execute("SELECT id, source_ref FROM memories").fetchall())
    terms = sorted((t, by_source[d], c, o) for t, d, c, o in conn.execute("SELECT term, doc, col, offset FROM temp.eq_terms"))
    rows = sorted(conn.execute("SELECT source_ref, index_context, index_dates FROM memories").fetchall())
    return {"terms": terms, "rows": rows}


def test_one_by_one_bulk_import_rebuild_and_migration_index_the_same(tmp_path: Path, t0):
    recs = _records(t0)
    with MemoryStore.open(tmp_path / "single.db") as single:
        for rec in recs:
            rec = dict(rec)
            created = rec.pop("created_at")
            single.remember(rec.pop("content"), supersede=False, now=created, **rec)
        expected = _index_dump(single)
    assert any(ctx for _src, ctx, _dates in expected["rows"]) and any("yesterday" not in d and d for _s, _c, d in expected["rows"])
    with MemoryStore.open(tmp_path / "bulk.db") as bulk:
        bulk.remember_many(recs, batch_size=7, now=t0)
        assert _index_dump(bulk) == expected
        export_file(bulk, tmp_path / "export.jsonl")
    with MemoryStore.open(tmp_path / "imported.db") as imported:
        import_file(imported, tmp_path / "export.jsonl", now=t0 + timedelta(days=1))
        assert _index_dump(imported) == expected
    # The maintenance rebuild (doctor --repair of an emptied index) replays the stored context and dates.
    conn = db.sqlite.connect(str(tmp_path / "bulk.db"), isolation_level=None)
    conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('delete-all')")
    conn.close()
    assert not maintenance.doctor(tmp_path / "bulk.db").check("fts").ok
    assert maintenance.doctor(tmp_path / "bulk.db", repair=True, now=t0).ok
    with MemoryStore.open(tmp_path / "bulk.db") as bulk:
        assert _index_dump(bulk) == expected


def _as_schema_10(path: Path) -> None:
    """Turn a current store back into what schema 10 left: no context or dates columns, a three-column index."""
    conn = db.sqlite.connect(str(path), isolation_level=None)
    conn.create_function("ml_index_text", 1, lambda t: index_text(t) if t is not None else "", deterministic=True)
    conn.execute("BEGIN")
    for trigger in ("memories_fts_insert", "memories_fts_delete", "memories_fts_update"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE memory_fts")
    for version, statements in schema.MIGRATIONS:
        if version == 1:
            for sql in statements:
                if "memory_fts" in sql and "similarity" not in sql:
                    conn.execute(sql)
    if db.HAS_FTS5_SECURE_DELETE:
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('secure-delete', 1)")  # as the store had it
    conn.execute("ALTER TABLE memories DROP COLUMN index_context")
    conn.execute("ALTER TABLE memories DROP COLUMN index_dates")
    conn.execute("INSERT INTO memory_fts(rowid, title, content, tags) SELECT id, ml_index_text(title), ml_index_text(content), ml_index_text(tags) FROM memories")
    conn.execute("PRAGMA user_version = 10")
    conn.execute("COMMIT")
    conn.close()


def test_a_schema_10_store_is_backfilled_as_a_new_one_is_written(tmp_path: Path, t0):
    recs = _records(t0)
    with MemoryStore.open(tmp_path / "new.db") as new:
        new.remember_many(recs, now=t0)
        expected = _index_dump(new)
        secure = new.conn.execute("SELECT v FROM memory_fts_config WHERE k = 'secure-delete'").fetchone()
    with MemoryStore.open(tmp_path / "old.db") as old:
        old.remember_many(recs, now=t0)
    _as_schema_10(tmp_path / "old.db")
    with MemoryStore.open(tmp_path / "old.db") as old:
        assert old.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert _index_dump(old) == expected
        # The recreated index keeps purging deleted terms in place, as the one it replaced did.
        assert old.conn.execute("SELECT v FROM memory_fts_config WHERE k = 'secure-delete'").fetchone() == secure
        old.forget(old.find_by_source("D3").id, now=t0)  # deletes replay what the backfill indexed
        old.conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")
    assert maintenance.doctor(tmp_path / "old.db").check("fts").ok
