"""The PostgreSQL bulk path's fast forms against the slow ones they replace: exactly the same rows.

- :func:`memlens.postgres.fts.postings_copy_text` (postings grouped and formatted by SQLite) against the postings of
  :func:`memlens.postgres.fts.tokenize_documents` formatted one by one in Python, as ``fts.index`` wrote them before;
- :func:`memlens.postgres.connection.multi_row_insert` (an ``executemany`` of an INSERT sent as multi-row INSERTs)
  against psycopg's ``executemany`` of one row at a time, statement by statement and for a whole ``remember_many``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlens.bench import stores
from memlens.bench.generator import EPOCH, Generator
from memlens.postgres import connection, fts
from memlens.store import MemoryStore
from memlens.text import default_title, index_text

Docs = list[tuple[int, list[str]]]


def slow_copy_text(docs: Docs) -> tuple[dict[int, int], str]:
    """The postings as fts.index formatted them before postings_copy_text: tokenize_documents, then Python."""
    tokens = fts.tokenize_documents(docs)
    counts = tokens.counts
    lines = []
    for term, memory_id, column, offsets in tokens.postings:
        long_term = term.translate(fts._COPY_ESCAPES) if len(term) > fts.KEY_CHARS else fts._COPY_NULL
        lines.append(
            f"{fts.term_key(term).translate(fts._COPY_ESCAPES)}\t{long_term}\t{memory_id}\t{column}\t{{{','.join(map(str, offsets))}}}\t{counts[memory_id]}\n"
        )
    return counts, "".join(lines)


def assert_same_postings(docs: Docs) -> None:
    want_counts, want = slow_copy_text(docs)
    got_counts, got = fts.postings_copy_text(docs)
    assert got_counts == want_counts
    # The same lines, offsets in the same order; SQLite lists the rare terms it leaves to Python last.
    assert sorted(got.splitlines()) == sorted(want.splitlines())
    rare = [line for line in want.splitlines() if line.split("\t")[1] != "\\N"]
    common = [line for line in want.splitlines() if line.split("\t")[1] == "\\N"]
    assert got.splitlines()[: len(common)] == common
    assert sorted(got.splitlines()[len(common) :]) == sorted(rare)


def generated_docs(count: int, seed: int = 7) -> Docs:
    docs = []
    for i, record in enumerate(stores.records(Generator(seed), count), start=1):
        content = str(record["content"])
        tags = json.dumps(record.get("tags") or [])
        docs.append((i, [index_text(default_title(content)), index_text(content), index_text(tags), index_text("context of the turn"), "2024-01-02"]))
    return docs


def test_generated_memories_give_the_same_postings() -> None:
    docs = generated_docs(1500)
    for start in range(0, len(docs), 500):
        assert_same_postings(docs[start : start + 500])


def test_hand_written_documents_give_the_same_postings() -> None:
    long_word = "k" * (fts.KEY_CHARS + 40)
    docs: Docs = [
        (1, ["", "", "", "", ""]),  # no tokens: counted, no postings
        (2, ["Repeated repeated REPEATED", "repeated words, repeated again", '["repeated"]', "", ""]),
        (3, [index_text("Café naïve résumé"), index_text("東京の天気は晴れ"), index_text("emoji 🚀 and symbols ≥ ∑"), "", ""]),
        (4, [long_word, f"{long_word} short {long_word}x", "", "", long_word]),
        (5, ["tab\tand\nnewline\rand\\backslash", "", "", "", ""]),
        (10**12, ["big id", "", "", "", "2030-01-01"]),
    ]
    assert_same_postings(docs)


words = st.one_of(
    st.sampled_from(["deploy", "deploys", "deployed", "Kafka", "naïve", "東京", "🚀", "x" * (fts.KEY_CHARS + 1), "the", "a1b2"]),
    st.text(min_size=1, max_size=12),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.lists(words, max_size=12).map(" ".join), min_size=5, max_size=5), min_size=1, max_size=8))
def test_random_documents_give_the_same_postings(columns: list[list[str]]) -> None:
    docs = [(i, [index_text(c.replace("\x00", "")) for c in cols]) for i, cols in enumerate(columns, start=1)]
    assert_same_postings(docs)


def test_index_stores_the_postings_the_slow_path_gives(pg_url: str) -> None:
    docs = generated_docs(1200)
    rows = [(i, *texts) for i, texts in docs]
    rows.append((5000, "k" * (fts.KEY_CHARS + 5), "word", "", "", ""))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in fts.FTS_DDL:
            conn.execute(statement)
        fts.index(conn, rows)
        got = conn.execute("SELECT term, long_term, id, col, positions, doc_tokens FROM memory_fts_postings ORDER BY term, id, col").fetchall()
        docs_rows = conn.execute("SELECT id, tokens FROM memory_fts_docs ORDER BY id").fetchall()
        stats = conn.execute("SELECT rows, tokens FROM memory_fts_stats").fetchone()
    tokens = fts.tokenize_documents([(int(r[0]), [index_text(t) for t in r[1:]]) for r in rows])
    want = sorted(
        (fts.term_key(term), term if len(term) > fts.KEY_CHARS else None, memory_id, column, offsets, tokens.counts[memory_id])
        for term, memory_id, column, offsets in tokens.postings
    )
    assert [tuple(r) for r in got] == [tuple(r) for r in sorted(want, key=lambda r: (r[0].encode(), r[2], r[3]))]
    assert docs_rows == sorted(tokens.counts.items())
    assert stats == (len(tokens.counts), sum(tokens.counts.values()))


# --- multi-row INSERT ------------------------------------------------------------------------------------------------


@pytest.fixture
def two_stores(pg_server: Any) -> Iterator[tuple[str, str]]:
    """Two fresh PostgreSQL stores on the test server."""
    admin = pg_server.url()
    names = [f"bulk_{id(pg_server)}_{n}" for n in ("fast", "slow")]
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in names:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
    try:
        urls = (pg_server.url(names[0]), pg_server.url(names[1]))
        for url in urls:
            MemoryStore.open(url).close()
        yield urls
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def one_row_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "multi_row_insert", lambda text, batch: None)


def run_many(url: str, sql: str, batch: Sequence[Sequence[Any]]) -> tuple[int, int, list[tuple[Any, ...]]]:
    """``executemany`` in a write transaction: the cursor's rowcount, total_changes, and the table's rows after."""
    conn = connection.connect(url)
    try:
        conn.execute("BEGIN IMMEDIATE")
        cur = conn.executemany(sql, batch)
        changes = conn.total_changes
        conn.execute("COMMIT")
        table = sql.split("INTO", 1)[1].split("(", 1)[0].strip()
        where = " WHERE key <> 'store_id'" if table == "meta" else ""  # the store's own id differs from store to store
        rows = conn.raw.execute(f"SELECT * FROM {table}{where} ORDER BY 1, 2").fetchall()
        return cur.rowcount, changes, rows
    finally:
        conn.close()


CASES = [
    # duplicates ignored by OR IGNORE, inside one statement too
    ("INSERT OR IGNORE INTO memory_tags(tag, memory_id) VALUES (?, ?)", [("t", 1), ("u", 1), ("t", 1)]),
    # an upsert with distinct keys (one statement), and one whose keys repeat (falls back: applied in order, which
    # the concatenation shows)
    ("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = meta.value || excluded.value", [("a", "1"), ("b", "2")]),
    (
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = meta.value || excluded.value",
        [("a", "1"), ("a", "2"), ("b", "5")],
    ),
    ("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [("k1", "v1"), ("k2", "v2"), ("k1", "v3")]),
    # NULLs beside values, and more rows than one statement takes
    ("INSERT INTO similarity_changes(memory_id, latest) VALUES (?, ?)", [(None if i % 7 == 0 else i, i % 2) for i in range(2500)]),
]


@pytest.mark.parametrize(("sql", "batch"), CASES)
def test_executemany_of_an_insert_writes_what_one_row_at_a_time_writes(
    two_stores: tuple[str, str], monkeypatch: pytest.MonkeyPatch, sql: str, batch: list[tuple[Any, ...]]
) -> None:
    fast_url, slow_url = two_stores
    if "memory_tags" in sql:  # the tags' memory must exist
        for url in two_stores:
            with MemoryStore.open(url) as store:
                store.remember("a memory to tag", now=EPOCH)
    fast = run_many(fast_url, sql, batch)
    one_row_at_a_time(monkeypatch)
    slow = run_many(slow_url, sql, batch)
    if "similarity_changes" in sql:  # its tag column is random
        fast, slow = ((f[0], f[1], [r[:3] for r in f[2]]) for f in (fast, slow))
    assert fast == slow


def test_multi_row_shapes() -> None:
    t = connection.translate
    assert connection.multi_row_insert(t("INSERT INTO x(a, b) VALUES (?, lower(?))"), [(1, "A"), (2, "B")]) == [
        ("INSERT INTO x(a, b) VALUES ($1, lower($2)), ($3, lower($4))", [1, "A", 2, "B"])
    ]
    # ?1 twice (the bulk insert's id and chain): renumbered per row
    assert connection.multi_row_insert("INSERT INTO x (a, b, c) VALUES ($1, $2, $1)", [(1, 2), (3, 4)]) == [
        ("INSERT INTO x (a, b, c) VALUES ($1, $2, $1), ($3, $4, $3)", [1, 2, 3, 4])
    ]
    not_batched = [
        ("INSERT INTO x(a) VALUES ('?')", [(), ()]),  # no parameter
        ("INSERT INTO x(a) SELECT $1", [(1,), (2,)]),  # not VALUES
        ("UPDATE x SET a = $1 WHERE b = $2", [(1, 2), (3, 4)]),
        ("INSERT INTO x(a, b) VALUES ($1, $2) ON CONFLICT (a) DO UPDATE SET b = $2", [(1, 2), (3, 4)]),  # a parameter after VALUES
        ("INSERT INTO x(a, b) VALUES ($1, $2)", [(1, 2), (3,)]),  # a row of the wrong length: psycopg says so
        ("INSERT INTO x(a, b) VALUES ($1, $3)", [(1, 2, 3), (4, 5, 6)]),  # a parameter missing from the row
        ("INSERT INTO x(a, b) VALUES ($1, $2) ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.b", [(1, 2), (1.0, 3)]),  # 1 and 1.0: one key
        ("INSERT INTO x(a, b) VALUES ($1, $2)", [(1, 2)]),  # one row
    ]
    for text, batch in not_batched:
        assert connection.multi_row_insert(text, batch) is None, text
    many = connection.multi_row_insert("INSERT INTO x(a, b) VALUES ($1, $2)", [(i, i) for i in range(2 * connection.MULTI_ROW_MAX + 1)])
    assert many is not None and [len(params) // 2 for _, params in many] == [connection.MULTI_ROW_MAX, connection.MULTI_ROW_MAX, 1]


def test_a_bad_row_fails_as_one_row_at_a_time_fails(two_stores: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    sql = "INSERT INTO memory_tags(tag, memory_id) VALUES (?, ?)"
    errors = []
    for n, url in enumerate(two_stores):
        if n == 1:
            one_row_at_a_time(monkeypatch)
        with pytest.raises(Exception) as caught:
            run_many(url, sql, [("t", 10**9), ("u", 10**9)])  # no such memory: the foreign key refuses it at commit
        errors.append(type(caught.value))
    assert errors[0] == errors[1]


def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table a bulk remember writes, in a fixed order (the audit entries' times and hashes aside)."""
    queries = {
        "memories": "SELECT * FROM memories ORDER BY id",
        "sqlite_sequence": "SELECT * FROM sqlite_sequence ORDER BY name",
        "memory_tags": "SELECT * FROM memory_tags ORDER BY tag, memory_id",
        "sessions": "SELECT * FROM sessions ORDER BY id",
        "similarity_index": "SELECT * FROM similarity_index ORDER BY rowid",
        "similarity_changes": "SELECT seq, memory_id, latest FROM similarity_changes ORDER BY seq",
        "postings": "SELECT * FROM memory_fts_postings ORDER BY term, id, col",
        "docs": "SELECT * FROM memory_fts_docs ORDER BY id",
        "stats": "SELECT * FROM memory_fts_stats",
        "pending": "SELECT * FROM fts_pending",
        "audit": "SELECT operation, target_ids, details FROM audit ORDER BY id",
    }
    with psycopg.connect(url) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in queries.items()}


def test_remember_many_writes_the_same_store_either_way(two_stores: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    recs = stores.records(Generator(11), 1200)
    for i, rec in enumerate(recs):
        if i % 5 == 0:
            rec["tags"] = ["alpha", f"t{i % 3}", "alpha"]
        if i % 9 == 0:
            rec["session_id"] = f"s{i % 4}"
    fast_url, slow_url = two_stores
    with MemoryStore.open(fast_url, actor="bench") as store:
        store.remember_many(recs, batch_size=500, now=EPOCH)
    one_row_at_a_time(monkeypatch)
    monkeypatch.setattr(fts, "postings_copy_text", slow_copy_text)
    with MemoryStore.open(slow_url, actor="bench") as store:
        store.remember_many(recs, batch_size=500, now=EPOCH)
    fast, slow = dump(fast_url), dump(slow_url)
    assert fast["memories"] and fast["postings"] and fast["memory_tags"]
    for name in fast:
        assert fast[name] == slow[name], name
