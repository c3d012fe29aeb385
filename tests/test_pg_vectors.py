"""Nearest-vector search in the server with pgvector (memlens.postgres.vectors) answers as the numpy scan does.

The pgvector tests run on a second throwaway server, PostgreSQL 16 with pgvector from the ``pgserver`` wheel
(tests/pgvector_server.py); the fallback tests on the main one (Debian's PostgreSQL 15, no pgvector)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector_server import as_user, fresh_database, pgvector_server  # noqa: F401  (the fixture)

from memlens import MemoryStore
from memlens import embeddings as embeddings_module
from memlens.postgres import schema
from memlens.postgres import vectors as pg_vectors
from memlens.storage.copying import copy_store
from memlens.storage.filters import MemoryFilter, filter_sql
from memlens.storage.search import SearchRepository

NOW = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
DIM = 384
FILTERS = [
    MemoryFilter(),
    MemoryFilter(project="alpha"),
    MemoryFilter(layers=("semantic",)),
    MemoryFilter(layers=("working",), project="alpha"),
    MemoryFilter(include_superseded=True),
]


class RandomEmbedder:
    """A stand-in model: a text's vector is drawn from a generator seeded by the text before any ``|`` (so texts
    sharing that part share a vector, exactly); ``zero ...`` gives a zero vector and ``nan ...`` one with a NaN."""

    model = "random"

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim

    def vector(self, text: str) -> np.ndarray:
        key = text.split("|", 1)[0].strip()
        if key.startswith("zero"):
            return np.zeros(self.dim, dtype=np.float32)
        seed = int(hashlib.sha256(key.encode()).hexdigest()[:12], 16)
        vector = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        if key.startswith("nan"):
            vector[3] = np.nan
        return vector

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray([self.vector(t) for t in texts], dtype=np.float32)

    def unit(self, text: str) -> np.ndarray:
        vector = self.vector(text)
        return (vector / np.linalg.norm(vector)).astype(np.float32)


def _fill(store: MemoryStore, n: int = 400, *, seed: int = 3) -> None:
    """``n`` memories in two projects and layers, some sharing a vector, a zero and a NaN vector, one superseded."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        key = f"cluster {i % 7}" if i % 10 == 0 else f"memory {i}"  # every tenth shares its vector with others
        records.append({
            "content": f"{key} | copy {i} {rng.integers(1 << 30)}",
            "layer": "semantic" if i % 3 else "working",
            "project": "alpha" if i % 2 else None,
        })  # fmt: skip
    records += [{"content": "zero vector | a"}, {"content": "nan vector | b"}]
    store.remember_many(records, supersede=False, now=NOW)
    store.embed_pending(RandomEmbedder(), now=NOW)
    store.remember("memory 1 | a newer version", supersede_id=2, now=NOW)  # memory 2 is superseded, keeps its vector
    store.embed_pending(RandomEmbedder(), now=NOW)


@pytest.fixture
def vec_url(pgvector_server: Any) -> Iterator[str]:  # noqa: F811
    """A fresh database on the pgvector server."""
    with fresh_database(pgvector_server) as url:
        yield url


@pytest.fixture
def vec_store(vec_url: str) -> Iterator[MemoryStore]:
    with MemoryStore.open(vec_url, actor="test") as store:
        _fill(store)
        yield store


@contextlib.contextmanager
def _numpy_only() -> Iterator[None]:
    """Within it, a store searches with the numpy scan, as on a server without pgvector."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pg_vectors, "namespace", lambda conn: None)
        yield


def _nearest(store: MemoryStore, probe: np.ndarray, memory_filter: MemoryFilter, pool: int) -> list[tuple[int, float]]:
    where, params = filter_sql(memory_filter, NOW)
    with store.ctx.read() as conn:
        return store.finder._nearest_vectors(conn, (RandomEmbedder.model, probe), where, params, pool)


def _probes(n: int) -> list[np.ndarray]:
    embedder = RandomEmbedder()
    probes = [embedder.unit(f"query {i}") for i in range(n - 2)]
    # A stored vector itself (its copies tie) and a probe near it.
    probes.append(embedder.unit("cluster 3"))
    probes.append(((embedder.unit("cluster 5") + 0.05 * embedder.unit("query x")) / 1.0).astype(np.float32))
    probes[-1] /= np.linalg.norm(probes[-1])
    return probes


def _assert_same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert [i for i, _ in got] == [i for i, _ in want]
    assert np.allclose([c for _, c in got], [c for _, c in want], rtol=0, atol=1e-6)


def _answers(store: MemoryStore, queries: list[str], **filters: Any) -> list[list[tuple[int, float, str]]]:
    embedder = RandomEmbedder()
    return [[(h.memory.id, h.score, h.explain()) for h in store.search(q, limit=10, embedder=embedder, now=NOW, **filters)] for q in queries]


QUERIES = ["memory 17", "cluster 3", "copy 40", "query nothing alike", "memory 1"]


# --- on the pgvector server -----------------------------------------------------------------------------------------


def test_the_server_scans_and_memlens_scores_only_what_it_hands_back(vec_store: MemoryStore, monkeypatch: pytest.MonkeyPatch):
    conn = vec_store.ctx.conn
    assert pg_vectors.namespace(conn) == "public"
    total = conn.execute("SELECT count(*), count(embedding) FROM memory_vectors").fetchone()
    assert total[0] == total[1] == 403
    converted: list[int] = []
    real = embeddings_module.blobs_to_matrix

    def counting(blobs: Any, dim: int) -> Any:
        converted.append(len(blobs))
        return real(blobs, dim)

    monkeypatch.setattr(embeddings_module, "blobs_to_matrix", counting)
    monkeypatch.setattr(SearchRepository, "_kept_vectors", lambda *a: pytest.fail("the numpy scan read the vectors"))
    found = _nearest(vec_store, RandomEmbedder().unit("query 1"), MemoryFilter(), 50)
    assert len(found) == 50
    assert converted == [50 + pg_vectors._EXTRA], "memlens scored only the rows the server handed back"
    converted.clear()
    assert _answers(vec_store, QUERIES)
    assert converted and max(converted) < 100, converted  # never all 403
    assert not vec_store.finder._vectors, "nothing kept in the client"
    # Without pgvector the same search reads every vector (so the counts above can tell the paths apart).
    monkeypatch.undo()
    converted.clear()
    monkeypatch.setattr(embeddings_module, "blobs_to_matrix", counting)
    with _numpy_only():
        assert _nearest(vec_store, RandomEmbedder().unit("query 1"), MemoryFilter(), 50) == found
    assert converted == [403]


def test_the_same_ids_order_and_cosines_as_the_numpy_scan(vec_store: MemoryStore):
    probes = _probes(12)
    cases = [(probe, f, pool) for probe in probes for f in FILTERS for pool in (1, 5, 50, 1000)]
    server = [_nearest(vec_store, probe, f, pool) for probe, f, pool in cases]
    server_answers = {repr(f): _answers(vec_store, QUERIES, **_search_filter(f)) for f in FILTERS}
    with _numpy_only():
        numpy = [_nearest(vec_store, probe, f, pool) for probe, f, pool in cases]
        assert vec_store.finder._vectors, "the reference is the numpy scan"
        numpy_answers = {repr(f): _answers(vec_store, QUERIES, **_search_filter(f)) for f in FILTERS}
    for got, want in zip(server, numpy, strict=True):
        _assert_same(got, want)
    assert sum(len(found) for found in server) > 5000
    assert any(len(found) > 150 for found in server), "a pool of 1000 holds every positive cosine"
    for key, answers in server_answers.items():
        assert [[i for i, _s, _e in hits] for hits in answers] == [[i for i, _s, _e in hits] for hits in numpy_answers[key]], key
        for got_hits, want_hits in zip(answers, numpy_answers[key], strict=True):
            assert np.allclose([s for _i, s, _e in got_hits], [s for _i, s, _e in want_hits], rtol=0, atol=1e-6)


def _search_filter(f: MemoryFilter) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if f.project:
        out["project"] = f.project
    if f.layers:
        out["layers"] = list(f.layers)
    if f.include_superseded:
        out["include_superseded"] = True
    return out


def test_ties_go_to_the_lower_id_when_more_must_be_fetched(vec_url: str, monkeypatch: pytest.MonkeyPatch):
    with MemoryStore.open(vec_url, actor="test") as store:
        store.remember_many([{"content": f"same | {i}"} for i in range(60)] + [{"content": f"other {i}"} for i in range(100)], now=NOW)
        store.embed_pending(RandomEmbedder(), now=NOW)
        fetches: list[int] = []
        real = pg_vectors._fetch
        monkeypatch.setattr(pg_vectors, "_fetch", lambda conn, sql, params: fetches.append(len(fetches)) or real(conn, sql, params))
        probe = RandomEmbedder().unit("same")
        found = _nearest(store, probe, MemoryFilter(), 5)
        assert [i for i, _ in found] == [1, 2, 3, 4, 5]
        assert len({c for _, c in found}) == 1
        assert len(fetches) > 1, "the first fetch ended inside the tie: more were fetched"
        with _numpy_only():
            _assert_same(found, _nearest(store, probe, MemoryFilter(), 5))


def test_the_column_holds_each_blob_bit_for_bit(vec_store: MemoryStore):
    conn = vec_store.ctx.conn
    raw = conn.raw
    # Values a float32 can take that a text round trip would lose or reject: subnormals, -0, the extremes.
    special = np.array([1e-45, -1e-40, -0.0, 3.4028235e38, -1.1754944e-38, 0.1, 1 / 3] + [0.5] * (DIM - 7), dtype="<f4")
    raw.execute("UPDATE memory_vectors SET vector = %s WHERE memory_id = 1", (special.tobytes(),))
    rows = raw.execute("SELECT memory_id, vector, embedding::real[] FROM memory_vectors ORDER BY memory_id").fetchall()
    assert len(rows) == 403
    for memory_id, blob, values in rows:
        stored = np.frombuffer(blob, dtype="<f4")
        got = np.asarray(values, dtype=np.float32)
        if np.isfinite(stored).all():
            assert np.array_equal(got.view(np.uint32), stored.view(np.uint32)), memory_id
        else:
            assert not got.any(), "a vector with a NaN is a zero vector: similar to nothing, as for numpy"
    # A row the column cannot hold (its length is not 4 * dim) has none, and the search still answers.
    raw.execute("INSERT INTO memory_vectors(memory_id, model, dim, vector) VALUES (5, 'other', 3, '\\x00')"
                " ON CONFLICT (memory_id) DO UPDATE SET model = 'other', dim = 3, vector = '\\x00'")  # fmt: skip
    assert raw.execute("SELECT embedding IS NULL FROM memory_vectors WHERE memory_id = 5").fetchone()[0]


def test_every_write_path_keeps_the_column(vec_store: MemoryStore, tmp_path: Path, pgvector_server: Any):  # noqa: F811
    """Embedding, a changed text (the vector dropped), forget, and `memlens copy` there and back."""
    conn = vec_store.ctx.conn
    target = vec_store.list_memories(limit=1, order_by="id", descending=False)[0]
    vec_store.remember(target.content + " | changed", supersede_id=target.id, layer=target.layer, project=target.project, now=NOW)
    vec_store.embed_pending(RandomEmbedder(), now=NOW)
    gone = 10
    vec_store.forget(gone, now=NOW)
    assert conn.execute("SELECT count(*) FROM memory_vectors WHERE memory_id = ?", (gone,)).fetchone()[0] == 0
    _assert_column_matches(conn.raw)
    probes = _probes(4)
    before = [_nearest(vec_store, p, f, 50) for p in probes for f in FILTERS]
    assert all(gone not in {i for i, _ in found} for found in before)
    file_copy = tmp_path / "copy.db"
    copy_store(vec_store.path, file_copy)
    with fresh_database(pgvector_server) as back_url:
        copy_store(file_copy, back_url)
        with MemoryStore.open(back_url, actor="test") as back:
            _assert_column_matches(back.ctx.conn.raw)
            assert [_nearest(back, p, f, 50) for p in probes for f in FILTERS] == before
        with MemoryStore.open(file_copy, actor="test") as on_file:
            for got, want in zip([_nearest(on_file, p, f, 50) for p in probes for f in FILTERS], before, strict=True):
                _assert_same(got, want)


def _assert_column_matches(raw: Any) -> None:
    rows = raw.execute("SELECT vector, embedding::real[] FROM memory_vectors WHERE embedding IS NOT NULL").fetchall()
    assert raw.execute("SELECT count(*) FROM memory_vectors WHERE embedding IS NULL").fetchone()[0] == 0
    for blob, values in rows:
        stored = np.frombuffer(blob, dtype="<f4")
        if np.isfinite(stored).all():
            assert np.array_equal(np.asarray(values, dtype=np.float32).view(np.uint32), stored.view(np.uint32))


def test_forget_erases_the_vector_from_the_server(vec_store: MemoryStore, vec_url: str):
    conn = vec_store.ctx.conn
    blob = conn.execute("SELECT vector FROM memory_vectors WHERE memory_id = 20").fetchone()[0]
    vec_store.forget(20, now=NOW)
    assert conn.execute("SELECT count(*) FROM memory_vectors WHERE memory_id = 20 OR vector = ?", (blob,)).fetchone()[0] == 0
    probe = np.frombuffer(blob, dtype="<f4").astype(np.float32)
    assert 20 not in {i for i, _ in _nearest(vec_store, probe / np.linalg.norm(probe), MemoryFilter(include_superseded=True), 1000)}
    # The forget vacuumed memory_vectors and its TOAST table (where the blobs live): a second VACUUM finds no dead
    # row version to remove. (The statistics' n_dead_tup cannot tell: the DELETE's count may reach them after the
    # VACUUM's, as it did once in CI.)
    reports: list[str] = []
    with psycopg.connect(vec_url, autocommit=True) as raw:
        raw.add_notice_handler(lambda notice: reports.append(notice.message_primary or ""))
        raw.execute("VACUUM (VERBOSE) memory_vectors")
    finished = [report for report in reports if report.startswith("finished vacuuming")]
    assert len(finished) == 2, reports  # the table and its TOAST table
    for report in finished:
        # No dead row version left, and no dead line pointer either (a read may have pruned a page before: that
        # frees the row but leaves its line pointer for VACUUM).
        assert "tuples: 0 removed," in report and "0 are dead but not yet removable" in report, report
        assert "had 0 dead item identifiers removed" in report, report


def _agent_role(server: Any) -> str:
    with psycopg.connect(server.url(), autocommit=True) as admin:
        admin.execute("DO $$ BEGIN CREATE ROLE memlens_agent LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    return "memlens_agent"


def test_a_role_that_may_not_create_the_extension_opens_with_numpy_then_uses_the_dbas(
    pgvector_server: Any,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
):
    role = _agent_role(pgvector_server)
    with fresh_database(pgvector_server, owner=role) as url:
        agent = as_user(url, role)
        with caplog.at_level(logging.WARNING, logger="memlens.postgres.vectors"):
            store = MemoryStore.open(agent, actor="agent")
        with store:
            assert "may not create the extension" in caplog.text and "CREATE EXTENSION vector" in caplog.text
            assert pg_vectors.namespace(store.ctx.conn) is None
            _fill(store)
            numpy_found = [_nearest(store, p, f, 50) for p in _probes(4) for f in FILTERS]
            numpy_answers = _answers(store, QUERIES)
            assert store.finder._vectors, "the numpy scan"
        with psycopg.connect(url, autocommit=True) as dba:  # the superuser, in the same database
            dba.execute("CREATE EXTENSION vector")
        caplog.clear()
        with MemoryStore.open(agent, actor="agent") as store:
            assert pg_vectors.namespace(store.ctx.conn) == "public"
            _assert_column_matches(store.ctx.conn.raw)
            for got, want in zip([_nearest(store, p, f, 50) for p in _probes(4) for f in FILTERS], numpy_found, strict=True):
                _assert_same(got, want)
            assert [[i for i, _s, _e in hits] for hits in _answers(store, QUERIES)] == [[i for i, _s, _e in hits] for hits in numpy_answers]
            assert not store.finder._vectors
        assert "pgvector" not in caplog.text


def test_a_schema_1_store_migrates_and_gets_the_column(vec_url: str, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as old:
        old.setattr(schema, "PG_SCHEMA_VERSION", 1)
        old.setattr(schema, "PG_MIGRATIONS", schema.PG_MIGRATIONS[:1])
        with MemoryStore.open(vec_url, actor="test") as store:
            _fill(store, 200)
            assert pg_vectors.namespace(store.ctx.conn) is None
            before = [_nearest(store, p, f, 50) for p in _probes(4) for f in FILTERS]
    # Read-only, a schema 1 store is read as it is (numpy), not migrated.
    with MemoryStore.open(vec_url, readonly=True) as store:
        assert store.ctx.conn.raw.execute("SELECT max(version) FROM memlens_schema").fetchone()[0] == 1
        assert pg_vectors.namespace(store.ctx.conn) is None
        assert [_nearest(store, p, f, 50) for p in _probes(4) for f in FILTERS] == before
    with MemoryStore.open(vec_url, actor="test") as store:
        raw = store.ctx.conn.raw
        assert raw.execute("SELECT max(version) FROM memlens_schema").fetchone()[0] == schema.PG_SCHEMA_VERSION
        assert raw.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone() is not None
        assert pg_vectors.namespace(store.ctx.conn) == "public"
        _assert_column_matches(raw)
        for got, want in zip([_nearest(store, p, f, 50) for p in _probes(4) for f in FILTERS], before, strict=True):
            _assert_same(got, want)


def test_the_extension_dropped_later_leaves_numpy_even_for_an_open_store(vec_store: MemoryStore, vec_url: str):
    probes = _probes(4)
    before = [_nearest(vec_store, p, f, 50) for p in probes for f in FILTERS]
    with psycopg.connect(vec_url, autocommit=True) as dba:
        dba.execute("DROP EXTENSION vector CASCADE")  # the column, its trigger and index go with it
    conn = vec_store.ctx.conn
    # The open store finds out at its next search, inside a write transaction too (which goes on).
    with vec_store.ctx.write() as writing:
        inside = [_nearest(vec_store, p, f, 50) for p in probes for f in FILTERS]
        writing.execute("UPDATE meta SET value = value WHERE key = 'store_id'")
    assert pg_vectors.namespace(conn) is None
    for got, want in zip(inside, before, strict=True):
        _assert_same(got, want)
    vec_store.remember("memory after the drop | x", now=NOW)
    assert vec_store.embed_pending(RandomEmbedder(), now=NOW) == 1  # writes need no trigger now
    with MemoryStore.open(vec_url, actor="test") as again:
        assert pg_vectors.namespace(again.ctx.conn) is None
        assert again.ctx.conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 404


# --- on the main server (no pgvector) --------------------------------------------------------------------------------


def test_a_server_without_pgvector_uses_the_numpy_scan(pg_url: str, vec_store: MemoryStore, caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.INFO, logger="memlens.postgres.vectors"), MemoryStore.open(pg_url, actor="test") as store:
        raw = store.ctx.conn.raw
        assert raw.execute("SELECT max(version) FROM memlens_schema").fetchone()[0] == schema.PG_SCHEMA_VERSION
        assert raw.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'").fetchone()[0] == 0
        assert pg_vectors.namespace(store.ctx.conn) is None
        assert raw.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = 'memory_vectors'").fetchone()[0] == 4
        _fill(store)
        found = [_nearest(store, p, f, 50) for p in _probes(6) for f in FILTERS]
        assert store.finder._vectors, "the numpy scan"
        answers = _answers(store, QUERIES)
    assert "pgvector" not in caplog.text, "nothing to say when the server has no pgvector"
    # The same memories and vectors on the pgvector server give the same answers.
    for got, want in zip([_nearest(vec_store, p, f, 50) for p in _probes(6) for f in FILTERS], found, strict=True):
        _assert_same(got, want)
    assert [[i for i, _s, _e in hits] for hits in _answers(vec_store, QUERIES)] == [[i for i, _s, _e in hits] for hits in answers]


def test_a_copy_from_a_pgvector_store_to_a_server_without_it(vec_store: MemoryStore, pg_url: str):
    copy_store(vec_store.path, pg_url)
    with MemoryStore.open(pg_url, actor="test") as copied:
        assert pg_vectors.namespace(copied.ctx.conn) is None
        for p in _probes(3):
            _assert_same(_nearest(copied, p, MemoryFilter(), 50), _nearest(vec_store, p, MemoryFilter(), 50))


def test_doctor_says_where_the_vector_search_runs_and_refills_a_missing_column(vec_store: MemoryStore, vec_url: str, pg_url: str):
    from memlens.maintenance import doctor

    report = doctor(vec_url)
    assert report.ok
    assert "runs in the server (pgvector 0." in report.check("vectors").summary
    with psycopg.connect(vec_url, autocommit=True) as raw:  # damage the column behind the trigger's back
        raw.execute("ALTER TABLE memory_vectors DISABLE TRIGGER memory_vectors_embedding")
        raw.execute("UPDATE memory_vectors SET embedding = NULL WHERE memory_id % 5 = 0")
        raw.execute("ALTER TABLE memory_vectors ENABLE TRIGGER memory_vectors_embedding")
        damaged = raw.execute("SELECT COUNT(*) FROM memory_vectors WHERE embedding IS NULL AND dim = %s", (DIM,)).fetchone()[0]
    assert damaged > 0
    broken = doctor(vec_url)
    assert not broken.check("vectors").ok and broken.check("vectors").count == damaged
    fixed = doctor(vec_url, repair=True)
    assert fixed.ok and f"filled pgvector's column for {damaged} stored vectors" in fixed.repairs
    with psycopg.connect(vec_url) as raw:
        _assert_column_matches(raw)

    with MemoryStore.open(pg_url, actor="test") as plain:  # Debian's server: no pgvector
        plain.remember("a memory on the server without pgvector", now=NOW)
    summary = doctor(pg_url).check("vectors").summary
    assert "runs in memlens (numpy)" in summary and "the server has no pgvector" in summary
