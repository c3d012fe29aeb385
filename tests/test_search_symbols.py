"""Emoji and other symbols are searchable, as CJK is; a store made before that is upgraded by a migration."""

from __future__ import annotations

import pytest

from memlens import MemoryStore, db, maintenance, schema
from memlens.text import highlight_spans, index_text, query_terms


def _ids(store: MemoryStore, query: str, t0) -> list[int]:
    return [h.memory.id for h in store.search(query, now=t0)]


def test_an_emoji_finds_the_memory_that_holds_it(store: MemoryStore, t0):
    fire = store.remember("the deploy pipeline is on 🔥 again", now=t0)
    heart = store.remember("the team ❤️ the new dashboard; thumbs 👍🏽", now=t0)
    store.remember("nothing to see here", now=t0)
    assert _ids(store, "🔥", t0) == [fire.id]
    assert _ids(store, "deploy 🔥", t0) == [fire.id]
    assert _ids(store, "🔥deploy", t0) == [fire.id]  # a symbol glued to a word is a term of its own
    assert _ids(store, "❤", t0) == [heart.id] == _ids(store, "❤️", t0)  # with or without the variation selector
    assert _ids(store, "👍", t0) == [heart.id]  # the skin tone refines the emoji, it does not hide it
    assert _ids(store, "💧", t0) == []
    assert "«🔥»" in store.search("🔥", now=t0)[0].snippet


def test_symbols_outside_ascii_are_searchable_but_ascii_operators_stay_separators(store: MemoryStore, t0):
    price = store.remember("the plan costs €20 a month → billed yearly", now=t0)
    code = store.remember("use a+b or a|b in the config", now=t0)
    assert _ids(store, "€", t0) == [price.id]
    assert _ids(store, "→", t0) == [price.id]
    assert _ids(store, "a+b", t0) == [code.id]  # "+" is no term: the query is the words
    assert index_text("a+b") == "a+b"


def test_emoji_sequences_are_phrases_of_their_symbols():
    terms = query_terms("family 👨‍👩‍👧")
    assert [t.fts() for t in terms] == ['"family"', '"mlsym128104 mlsym128105 mlsym128103"']
    assert highlight_spans("a 👨‍👩‍👧 b", terms[1:]) == [(2, 3), (4, 5), (6, 7)]


@pytest.mark.sqlite_only  # checks FTS5's own integrity
def test_forgetting_a_memory_with_emoji_leaves_the_index_consistent(store: MemoryStore, t0):
    m = store.remember("hot take 🔥🔥", now=t0)
    store.forget(m.id, now=t0)
    assert _ids(store, "🔥", t0) == []
    store.conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")


def _make_schema_3_store(path, t0) -> int:
    """A store as memlens with schema 3 left it: no tombstone creation times, emoji not in the index."""
    with MemoryStore.open(path) as s:
        kept = s.remember("the deploy pipeline is on 🔥 again", now=t0).id
        gone = s.remember("a forgotten 🔥 note", now=t0)
        s.forget(gone.id, now=t0)
    conn = db.sqlite.connect(str(path), isolation_level=None)
    # What schema 3's ml_index_text() returned for this text: unicode61 drops the emoji either way.
    conn.create_function("ml_index_text", 1, lambda t: t or "", deterministic=True)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('delete-all')")
    conn.execute(
        "INSERT INTO memory_fts(rowid, title, content, tags) SELECT id, ml_index_text(title), ml_index_text(content), ml_index_text(tags) FROM memories"
    )
    conn.execute("ALTER TABLE forgotten DROP COLUMN memory_created_at")
    conn.execute("PRAGMA user_version = 3")
    conn.execute("COMMIT")
    assert conn.execute("SELECT COUNT(*) FROM memory_fts WHERE memory_fts MATCH 'mlsym128293'").fetchone()[0] == 0
    conn.close()
    return kept


def test_a_schema_3_store_is_upgraded_and_finds_emoji(db_path, t0):
    kept = _make_schema_3_store(db_path, t0)
    with MemoryStore.open(db_path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert _ids(s, "🔥", t0) == [kept]
        assert _ids(s, "deploy", t0) == [kept]
        # The old tombstone (no creation time) still matches on its text.
        assert s.conn.execute("SELECT memory_created_at FROM forgotten").fetchall() == [(None,)]
        # Deletes replay the new index text: the index stays consistent after forgetting.
        s.forget(kept, now=t0)
        assert _ids(s, "🔥", t0) == []
        s.remember("after the upgrade ✅", now=t0)
        assert len(_ids(s, "✅", t0)) == 1
    report = maintenance.doctor(db_path)
    assert report.check("fts").ok, report.check("fts")
