"""Search's fast path against the computation it replaced (issue 14.4).

:class:`ReferenceSearch` is stage 1 as it was before the plan was chosen from match counts: the strict query,
then one "more than N matches?" probe per term, then the widened queries, each a ranked statement plus a read of
the rows by id; and retention's text part computed from each candidate's text instead of read from
``memories.text_importance``. Stages 2-5 are shared. Every search here must give the same hits in the same order,
with the same scores, snippets and explanations, on a generated store of a few thousand memories.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from memlens import db, decay, schema
from memlens.bench.generator import EPOCH, Generator
from memlens.config import SearchTuning
from memlens.errors import QueryError, StoreEnvironmentError
from memlens.io import export_file, import_file
from memlens.models import ts_from_dt
from memlens.storage import coverage, expansion
from memlens.storage import search as search_module
from memlens.storage.expansion import ExpansionTerm
from memlens.storage.filters import MemoryFilter, filter_sql
from memlens.storage.results import Hit
from memlens.storage.rows import memory_from_row
from memlens.storage.search import Candidate, SearchRepository, _and, _row_test, plan_query
from memlens.store import MemoryStore
from memlens.text import QueryTerm, clean_text, match_expression, query_terms

NOW = EPOCH + timedelta(days=1)


class ReferenceSearch(SearchRepository):
    """Search as it was before issue 14.4 (stage 1 and the text importance); see the module docstring."""

    def _candidate_columns(self, conn: db.Connection) -> str:
        # The text part of retention computed from each candidate's text, as every search did before.
        columns = super()._candidate_columns(conn).replace("COALESCE(m.text_importance, ml_text_importance(m.content))", "ml_text_importance(m.content)")
        assert "m.text_importance" not in columns
        return columns

    def _candidates(
        self,
        conn: db.Connection,
        query: str,
        terms: list[QueryTerm],
        raw: bool,
        where: list[str],
        params: list[Any],
        pool: int,
        limit: int,
        tuning: SearchTuning,
    ) -> list[tuple[tuple[Any, ...], float]]:
        if raw:
            return self._fts_rows(conn, clean_text(query.replace("\x00", " ")), where, params, pool, raw, tuning)
        if not terms:
            return []
        rows = self._fts_rows(conn, match_expression(terms, "AND"), where, params, pool, raw, tuning)
        if len(rows) < limit and len(terms) > 1:
            selective = [
                t
                for t in terms
                if conn.execute(
                    "SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT 1 OFFSET ?", (match_expression([t]), tuning.common_term_matches)
                ).fetchone()
                is None
            ]
            if 0 < len(selective) < len(terms):
                rows = self._fts_rows(conn, match_expression(selective, "OR"), where, params, pool, raw, tuning) or rows
            if len(rows) < limit:
                rows = self._fts_rows(conn, match_expression(terms, "OR"), where, params, pool, raw, tuning) or rows
        return rows

    def _fts_rows(
        self, conn: db.Connection, expression: str, where: list[str], params: list[Any], pool: int, raw: bool, tuning: SearchTuning
    ) -> list[tuple[tuple[Any, ...], float]]:
        # The rows as they were, bm25 last, handed on as the (row, bm25) pairs the later stages now take.
        return [(row, row[-1]) for row in self._old_fts_rows(conn, expression, where, params, pool, raw, tuning)]

    def _old_fts_rows(
        self, conn: db.Connection, expression: str, where: list[str], params: list[Any], pool: int, raw: bool, tuning: SearchTuning
    ) -> list[tuple[Any, ...]]:
        window = pool + pool // 5 + 1
        weights = f"{float(tuning.title_weight)!r}, {float(tuning.content_weight)!r}, {float(tuning.tags_weight)!r}"
        ranked_sql = f"SELECT rowid, bm25(memory_fts, {weights}) FROM memory_fts WHERE memory_fts MATCH ? ORDER BY 2 LIMIT ?"
        filters = _and(where)
        columns = self._candidate_columns(conn)
        try:
            ranked = conn.execute(ranked_sql, (expression, window + 1)).fetchall()
            if not ranked:
                return []
            score = dict(ranked[:window])
            marks = ",".join("?" * len(score))
            rows = conn.execute(f"SELECT {columns} FROM memories m WHERE m.id IN ({marks}){filters}", [*score, *params]).fetchall()
            if len(rows) < pool and len(ranked) > window:
                sql = (
                    f"SELECT {columns}, f.score FROM (SELECT rowid, bm25(memory_fts, {weights}) AS score FROM memory_fts "
                    f"WHERE memory_fts MATCH ?) f JOIN memories m ON m.id = f.rowid WHERE 1{filters} ORDER BY f.score LIMIT ?"
                )
                return [tuple(r) for r in conn.execute(sql, [expression, *params, pool]).fetchall()]
        except db.sqlite.OperationalError as exc:
            err = db.classify(exc, self.ctx.path)
            if raw and not isinstance(err, StoreEnvironmentError):
                raise QueryError(f"not a valid FTS5 query: {exc}") from None
            raise err from exc
        return sorted(((*row, score[row[0]]) for row in rows), key=lambda r: (r[-1], r[0]))[:pool]


# --- a generated store ------------------------------------------------------------------------------------------

#: Texts that exercise the text importance (0.9, 0.8), CJK, emoji and tags, mixed into the generated ones.
SPECIAL = [
    ("Remember this: the staging password rotates every friday", ("ops", "secrets")),
    ("The team decided to keep the deploy protocol for the payment service", ("ops",)),
    ("数据库密码保存在保险箱里，不要告诉别人", ("db",)),
    ("我们决定下周发布新版本，记住这个日期", ("release",)),
    ("東京のサーバーのパスワードを変更した", ("ops",)),
    ("the build is on fire 🔥 again after the merge", ("ci",)),
    ("don't forget to renew the certificate before it expires", ("ops",)),
    ("keep in mind that the cache key includes the branch name", ("ci", "db")),
]


def _build(path: Path, size: int) -> list[str]:
    """A store of ``size`` generated memories plus the :data:`SPECIAL` ones, some in sessions, some tagged, some
    superseded, some expired at :data:`NOW`; returns its texts."""
    gen = Generator(11)
    records: list[dict[str, Any]] = []
    tags = itertools.cycle([(), (), ("ops",), ("db", "ops"), ("ci",)])
    for i, m in enumerate(gen.memories(size)):
        rec: dict[str, Any] = {**m.record(), "tags": list(next(tags))}
        if i % 7 == 0:
            rec["session_id"] = f"session-{i // 70}"
        if i % 97 == 0:
            rec["ttl_days"] = (NOW - m.created_at) / timedelta(days=1) - 0.5  # expired a few hours before NOW
        records.append(rec)
    for j, (text, labels) in enumerate(SPECIAL * 3):
        records.append({"content": f"{text} ({j})", "tags": list(labels), "project": "alpha" if j % 2 else None, "session_id": "session-special"})
    with MemoryStore.open(path) as store:
        store.remember_many(records, now=EPOCH)
        # A few new versions through remember's supersede, so superseded rows sit in the index.
        for k, rec in enumerate(records[:: max(1, size // 20)]):
            store.remember(str(rec["content"]).rstrip(".") + " again", project=rec.get("project"), now=EPOCH + timedelta(minutes=k + 1))  # type: ignore[arg-type]
    return [str(r["content"]) for r in records]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryStore, list[str]]]:
    path = tmp_path_factory.mktemp("fast") / "memory.db"
    texts = _build(path, 3000)
    with MemoryStore.open(path, readonly=True) as store:
        yield store, texts


def _queries(texts: list[str]) -> list[str]:
    gen = Generator(11)
    picked = gen.queries(texts, 60)
    special = [
        "password",  # one term, in a handful of memories
        "the",  # a stop word alone: kept, matches most memories
        "staging password friday rotates",  # many terms, rare
        "deploy protocol team service payment keep cache branch name build merge fire",  # many terms, some common
        "密码",  # CJK, a phrase of bigrams
        "密",  # one CJK character: a prefix query
        "数据库 保险箱",
        "パスワード 変更",
        "🔥",
        "build 🔥",
        "nothingmatchesthis",
        "nothingmatchesthis password",
        "\x00 \"weird' (query) OR NOT AND*",
    ]
    return special + picked


def _signature(hits: list[Hit]) -> list[tuple[Any, ...]]:
    return [(h.memory.id, h.snippet, h.explain(), h.to_dict()["memory"]) for h in hits]


def _same(fast: list[Hit], slow: list[Hit]) -> None:
    assert _signature(fast) == _signature(slow)
    for a, b in zip(fast, slow, strict=True):
        for field in ("score", "relevance", "retention", "bm25", "context_penalty"):
            assert math.isclose(getattr(a, field), getattr(b, field), rel_tol=1e-12, abs_tol=1e-12), field


FILTERS = [
    MemoryFilter(),
    MemoryFilter(layers=("semantic",)),
    MemoryFilter(layers=("procedural", "episodic")),
    MemoryFilter(project="alpha"),
    MemoryFilter(tags=("ops",)),
    MemoryFilter(tags=("db", "ops"), layers=("semantic",)),
    MemoryFilter(include_superseded=True, include_expired=True),
]


@pytest.mark.parametrize("limit", [1, 3, 10, 40])
def test_fast_search_gives_the_reference_results(generated, limit):
    store, texts = generated
    ref = ReferenceSearch(store.ctx)
    queries = _queries(texts)
    for query in queries[:13] + queries[13::2] if limit == 10 else queries[::4]:
        for memory_filter in FILTERS:
            _same(store.finder.search(query, memory_filter, limit=limit, now=NOW), ref.search(query, memory_filter, limit=limit, now=NOW))


@pytest.mark.parametrize("tuning", [{"common_term_matches": 5}, {"common_term_matches": 60, "candidate_pool": 5}, {"common_term_matches": 400}])
def test_fast_search_matches_with_other_tunings(generated, tuning, monkeypatch):
    """Small thresholds make the rarer-terms stage and the full-query fallback run on a small store."""
    store, texts = generated
    ref = ReferenceSearch(store.ctx)
    settings = store.settings
    changed = type(settings).from_dict({**settings.to_dict(), "search": {**settings.search.to_dict(), **tuning}})
    monkeypatch.setattr(store.ctx, "settings", changed)
    for query in _queries(texts)[::6]:
        for memory_filter in FILTERS[:5]:
            for limit, bias, context in ((10, 0.3, None), (3, 0.0, ("ops",)), (25, 1.0, ("db",))):
                fast = store.finder.search(query, memory_filter, limit=limit, rank_bias=bias, context_tags=context, now=NOW)
                slow = ref.search(query, memory_filter, limit=limit, rank_bias=bias, context_tags=context, now=NOW)
                _same(fast, slow)


def test_raw_queries_match_and_bad_ones_still_say_so(generated):
    store, _texts = generated
    ref = ReferenceSearch(store.ctx)
    for raw in ("password OR protocol", '"deploy protocol"', "密码", "cache NOT branch"):
        _same(store.finder.search(raw, MemoryFilter(), raw=True, now=NOW), ref.search(raw, MemoryFilter(), raw=True, now=NOW))
    with pytest.raises(QueryError):
        store.finder.search('"unterminated', MemoryFilter(), raw=True, now=NOW)


def test_the_plan_leaves_out_only_stages_that_cannot_find_enough():
    terms = query_terms("alpha beta gamma")
    tuning = SearchTuning(common_term_matches=100)
    every = [match_expression(terms, "AND"), match_expression(terms[:2], "OR"), match_expression(terms, "OR")]
    assert plan_query(terms, [50, 30, 500], 10, tuning) == every
    assert plan_query(terms, [5, 30, 500], 10, tuning) == every[1:]  # AND finds at most 5
    assert plan_query(terms, [50, 12, 500], 10, tuning) == every  # each may find 10
    assert plan_query(terms, [3, 4, 500], 10, tuning) == every[2:]  # the rarer terms find at most 7
    assert plan_query(terms, [50, 30, 90], 10, tuning) == [every[0], every[2]]  # no common term: nothing between
    assert plan_query(terms[:1], [], 10, tuning) == [match_expression(terms[:1], "AND")]
    # Each term is common enough, but fewer than `limit` memories hold all three: AND cannot find enough.
    assert plan_query(terms, [50, 30, 500], 10, tuning, together=9) == every[1:]
    assert plan_query(terms, [50, 30, 500], 10, tuning, together=10) == every


def test_the_strict_stage_is_left_out_when_too_few_memories_hold_every_term(tmp_path: Path):
    """Two words in thirty memories each, both in only three: the search runs OR alone (it ran AND first before,
    an FTS5 ranking that could not find ten), and gives the reference search's hits. With the counts kept, a
    repeated search runs one ranked statement."""
    path = tmp_path / "memory.db"
    records = [{"content": f"the {word} note number {i} about item {i * 7 + len(word)}"} for word in ("quartz", "zephyr") for i in range(30)]
    records += [{"content": f"quartz and zephyr together, case {i}"} for i in range(3)]
    with MemoryStore.open(path) as store:
        store.remember_many(records, now=EPOCH)
    with MemoryStore.open(path, readonly=True) as store:
        first = [sql for sql in _statements(store, "quartz zephyr") if "MATCH" in sql and "count(*)" not in sql]
        again = [sql for sql in _statements(store, "quartz zephyr") if "MATCH" in sql]
        assert len(first) == 1 and " OR " in first[0], first
        assert len(again) == 1 and " OR " in again[0], again
        _same(store.search("quartz zephyr", now=NOW), ReferenceSearch(store.ctx).search("quartz zephyr", MemoryFilter(), now=NOW))
        assert len(store.search("quartz zephyr", limit=3, now=NOW)) == 3  # three hold both: the strict stage is enough


def _statements(store: MemoryStore, query: str) -> list[str]:
    """The statements one search issues (not the ones FTS5 runs inside them, nor its reads of its own tables)."""
    seen: list[str] = []
    store.conn.set_trace_callback(lambda sql: seen.append(sql) if not sql.startswith("--") and "'memory_fts_" not in sql else None)
    try:
        store.search(query, now=NOW)
    finally:
        store.conn.set_trace_callback(None)
    return seen


def _counted(store: MemoryStore, query: str) -> bool:
    """Whether a search counted its terms' matches."""
    return any("count(*)" in sql for sql in _statements(store, query))


def test_a_search_runs_few_statements(generated):
    shared, _texts = generated
    query = "staging password friday rotates"  # rare terms: the counts, then OR over all
    with MemoryStore.open(shared.ctx.path, readonly=True) as store:  # nothing kept from other searches
        first = _statements(store, query)
        stage_1 = [sql for sql in first if "memory_fts" in sql]
        # The terms' counts, then stage 1 with the candidates' whole rows: no further read for coverage or the
        # returned hits (only the neighbours' own statements). Before, 2 statements a query run plus a probe per
        # term: 8 here.
        assert first[0] == "PRAGMA data_version" and len(stage_1) == 2 and "count(*)" in stage_1[0], first
        assert "m.content" in stage_1[1] and not [sql for sql in first if " IN (" in sql], first
        # Again: the counts and the rows were kept, so stage 1 ranks in FTS5 alone (default filters, tested on the
        # kept rows).
        again = [sql for sql in _statements(store, query) if "memory_fts" in sql]
        assert len(again) == 1 and "count(*)" not in again[0] and "JOIN" not in again[0], again
        assert _signature(store.search(query, now=NOW)) == _signature(ReferenceSearch(store.ctx).search(query, MemoryFilter(), now=NOW))


def test_kept_counts_follow_other_writers(tmp_path: Path):
    """Term counts are kept between searches until the store changes, through this connection or another
    process's: a word that became common changes the plan exactly as in a store opened afresh."""
    path = tmp_path / "counts.db"
    tuning = {"search": {"common_term_matches": 5}}
    with MemoryStore.open(path) as writer:
        writer.configure(tuning, now=NOW)
        writer.remember_many([{"content": f"the rotor {i} was balanced"} for i in range(4)] + [{"content": "the rotor and the gearbox"}], now=EPOCH)
        with MemoryStore.open(path, readonly=True) as reader:
            query = "rotor gearbox"
            reader.search(query, now=NOW)
            assert _counted(reader, query) is False  # counts kept
            writer.remember_many([{"content": f"rotor spare part {i}"} for i in range(10)], now=EPOCH)  # "rotor" is common now
            assert _counted(reader, query) is True  # the other connection's commit: counted again
            assert _signature(reader.search(query, now=NOW)) == _signature(ReferenceSearch(reader.ctx).search(query, MemoryFilter(), now=NOW))
            # Kept rows follow other writers too: a changed importance and tags, a forgotten memory, a new one.
            first, second = reader.search(query, now=NOW)[:2]
            writer.update(first.memory.id, importance=0.05, tags=["moved"], now=NOW)
            writer.forget(second.memory.id, now=NOW)
            writer.remember("the gearbox of the second rotor", now=EPOCH)
            after = reader.search(query, now=NOW)
            assert _signature(after) == _signature(ReferenceSearch(reader.ctx).search(query, MemoryFilter(), now=NOW))
            assert second.memory.id not in [h.memory.id for h in after]
            assert next(h.memory for h in after if h.memory.id == first.memory.id).tags == ("moved",)
        writer.search(query, now=NOW)
        writer.remember("rotor gearbox rotor", now=EPOCH)
        assert _counted(writer, query) is True  # its own write: counted again
        assert _signature(writer.search(query, now=NOW)) == _signature(ReferenceSearch(writer.ctx).search(query, MemoryFilter(), now=NOW))


# --- the stored text importance -----------------------------------------------------------------------------------


def _stale(store: MemoryStore) -> list[int]:
    """Ids whose stored text importance is not the one their text gives."""
    rows = store.conn.execute("SELECT id, content, text_importance FROM memories").fetchall()
    return [r[0] for r in rows if r[2] != decay.text_importance(r[1])]


def test_every_write_stores_the_text_importance(tmp_path: Path, t0: datetime):
    with MemoryStore.open(tmp_path / "a.db") as store:
        first = store.remember("Remember this: the vault code is 4411", now=t0)
        store.remember("Remember this: the vault code is 4412 now", now=t0 + timedelta(minutes=1))  # supersedes
        store.remember_many([{"content": "the deadline for the audit is march"}, {"content": "lunch was fine"}], now=t0)
        store.update(first.id, importance=0.1, tags=["x"], now=t0)
        assert _stale(store) == []
        values = dict(store.conn.execute("SELECT content, text_importance FROM memories").fetchall())
        assert values["lunch was fine"] == 0.5 and values["the deadline for the audit is march"] == 0.8
        # A text changed in place by any writer: the trigger recomputes it.
        store.conn.execute("UPDATE memories SET content = 'just a note' WHERE id = ?", (first.id,))
        assert _stale(store) == []
        export_file(store, tmp_path / "a.jsonl")
    with MemoryStore.open(tmp_path / "b.db") as other:
        assert import_file(other, tmp_path / "a.jsonl", now=t0).created == 4
        assert _stale(other) == []


def _make_schema_8_store(path: Path, t0: datetime, *, drop_column: bool = True) -> None:
    with MemoryStore.open(path) as store:
        store.remember_many([{"content": t} for t, _tags in SPECIAL] + [{"content": "a plain note"}], now=t0)
    conn = db.sqlite.connect(str(path), isolation_level=None)
    conn.execute("DROP TRIGGER memories_text_importance")
    if drop_column:
        conn.execute("ALTER TABLE memories DROP COLUMN text_importance")
    conn.execute("PRAGMA user_version = 8")
    conn.close()


def test_the_migration_fills_the_text_importance_of_existing_memories(tmp_path: Path, t0: datetime):
    path = tmp_path / "old.db"
    _make_schema_8_store(path, t0)
    with MemoryStore.open(path, readonly=True) as old:
        # Read-only, an old store is searched without the column, with the same results.
        _same(old.finder.search("password", MemoryFilter(), now=t0), ReferenceSearch(old.ctx).search("password", MemoryFilter(), now=t0))
    with MemoryStore.open(path) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert _stale(store) == [] and store.conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == len(SPECIAL) + 1
        assert sorted({r[0] for r in store.conn.execute("SELECT text_importance FROM memories")}) == [0.5, 0.8, 0.9]
        store.conn.execute("UPDATE memories SET content = 'password' WHERE content = 'a plain note'")
        assert _stale(store) == []  # the trigger came with the migration


def test_a_store_whose_version_record_lags_its_columns_still_migrates(tmp_path: Path, t0: datetime):
    path = tmp_path / "lag.db"
    _make_schema_8_store(path, t0, drop_column=False)
    with MemoryStore.open(path) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert _stale(store) == []


def test_a_row_without_a_stored_value_is_ranked_from_its_text(tmp_path: Path, t0: datetime):
    with MemoryStore.open(tmp_path / "n.db") as store:
        store.remember_many([{"content": t} for t, _tags in SPECIAL], now=t0)
        before = store.search("password protocol", now=t0 + timedelta(days=3))
        store.conn.execute("UPDATE memories SET text_importance = NULL")
        _same(store.search("password protocol", now=t0 + timedelta(days=3)), before)


def test_only_the_default_filters_are_tested_on_kept_rows():
    """Search tests the default filters (latest, unexpired) on rows kept from earlier searches; any other filter
    stays SQL's. The equivalence tests above run both ways on the same store."""
    for memory_filter in FILTERS:
        where, params = filter_sql(memory_filter, NOW)
        test = _row_test(where, params)
        assert (test is not None) == (not memory_filter.narrows), memory_filter


def test_the_retention_scorer_gives_the_composite_score_exactly():
    """Search scores candidates with decay.retention_scorer; it must give composite_score_at's floats exactly."""
    import random

    rng = random.Random(5)
    for config in (decay.DecayConfig(), decay.DecayConfig(weight_semantic=0.0, recency_half_life_hours=3.5)):
        now = 1_700_000_000.0
        score = decay.retention_scorer(config, now)
        for _ in range(2000):
            importance, accessed, count, semantic = rng.random(), now - rng.random() * 1e7, rng.randrange(0, 50), rng.choice((0.5, 0.8, 0.9, rng.random()))
            expected = decay.composite_score_at(
                content="", importance=importance, last_accessed=accessed, access_count=count, now=now, config=config, semantic=semantic
            )
            assert score(importance, accessed, count, semantic) == expected


def test_a_hit_makes_its_memory_when_first_read(generated):
    """Hits come from the candidates' rows and make their Memory on first use: it is the stored memory, made once,
    and a hit compares, prints and pickles as one made with it."""
    import pickle

    store, _texts = generated
    hits = store.search("password protocol", now=NOW)
    assert hits and all("memory" not in vars(h) for h in hits)
    for hit in hits:
        assert hit.memory == store.get(hit.memory.id) and hit.memory is hit.memory
        eager = Hit(hit.memory, hit.score, hit.relevance, hit.retention, hit.bm25, hit.context_penalty, hit.fused, hit.vector_rank, hit.terms,
                    hit.fusion, hit.coverage, hit.second_round)  # fmt: skip
        assert eager == hit and repr(eager) == repr(hit)
        assert pickle.loads(pickle.dumps(hit)) == hit
    with pytest.raises(AttributeError):
        _ = hits[0].no_such_field  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="score"):
        Hit.deferred(lambda: hits[0].memory, relevance=1.0)


def test_the_search_benchmark_runs_alone(tmp_path: Path, capsys):
    """python -m memlens.bench.search_bench: a line per size, with what searches keep and with the store changing."""
    from memlens.bench import search_bench

    assert search_bench.main(["--sizes", "300", "--rounds", "1", "--cache-dir", str(tmp_path)]) == 0
    assert search_bench.main(["--sizes", "300", "--rounds", "1", "--cache-dir", str(tmp_path), "--store-changing"]) == 0
    kept, changing = capsys.readouterr().out.strip().splitlines()
    assert kept.lstrip().startswith("300: search p50") and "statements a search" in kept and "changing" not in kept
    assert changing.endswith("the store changing before every search")
    assert search_bench.main(["--sizes", "tiny"]) == 2


def test_forgetting_what_is_kept_changes_no_result(generated):
    store, texts = generated
    for query in _queries(texts)[::5]:
        before = store.finder.search(query, MemoryFilter(), now=NOW)
        store.finder.forget_kept(folded_texts=False)
        assert _signature(store.finder.search(query, MemoryFilter(), now=NOW)) == _signature(before)
        store.finder.forget_kept()
        assert _signature(store.finder.search(query, MemoryFilter(), now=NOW)) == _signature(before)


# --- stages 1-5 against their frozen copies (issue 14.4, the Python side) ------------------------------------------
#
# Search carries (row, bm25) pairs from stage 1 on, takes the kept rows passing the default filters without copying
# them, lets SQL break bm25 ties by id, and sorts tuples instead of key functions. The functions below are what those
# stages were before (the rows with their bm25 appended, each stage copying them), frozen here: every search must give
# exactly the same hits, in the same order, with the same floats.


def _old_coverage_apply(rows: list[tuple[Any, ...]], terms: list[QueryTerm], weight: float) -> tuple[list[tuple[Any, ...]], coverage.Coverage]:
    if weight <= 0.0 or len(terms) < 2 or not rows:
        return rows, coverage.Coverage(len(terms), {})
    tests = [coverage.needles(term) for term in terms]
    stems = [wanted[0] for wanted, word_start in tests if word_start]
    substrings = [wanted for wanted, word_start in tests if not word_start]
    asked = len(terms)
    factors = [1.0 - weight + weight * held / asked for held in range(asked + 1)]
    texts = coverage.FoldedTexts().fold(rows, (search_module._TITLE, search_module._CONTENT, search_module._TAGS))  # folded afresh
    found: dict[int, tuple[int, float, float]] = {}
    scaled: list[tuple[Any, ...]] = []
    for row, (text, known) in zip(rows, texts, strict=True):
        held = 0
        for stem in stems:
            has = known.get(stem)
            if has is None:
                at = text.find(stem)
                while at > 0 and text[at - 1].isalnum():
                    at = text.find(stem, at + 1)
                has = known[stem] = at != -1
            held += has
        for wanted in substrings:
            has = known.get(wanted)
            if has is None:
                has = known[wanted] = any(needle in text for needle in wanted)
            held += has
        factor = factors[held]
        bm25 = row[-1]
        found[row[0]] = (held, factor, bm25)
        scaled.append(row[:-1] + (bm25 * factor,))  # noqa: RUF005 - as it was
    scaled.sort(key=lambda r: (r[-1], r[0]))
    return scaled, coverage.Coverage(asked, found)


def _old_initial_relevance(rows: list[tuple[Any, ...]]) -> dict[int, Candidate]:
    best = min(r[-1] for r in rows)
    found: dict[int, Candidate] = {}
    for row in rows:
        bm25 = row[-1]
        found[row[0]] = Candidate(row, bm25, bm25 / best if best < 0 else 0.0)
    return found


def _old_add_session_share(found: dict[int, Candidate], rows: list[tuple[Any, ...]], tuning: SearchTuning) -> None:
    session_sum: dict[tuple[str, Any], float] = {}
    for row in rows:
        candidate = found[row[0]]
        session_sum[candidate.document] = session_sum.get(candidate.document, 0.0) + candidate.relevance
    top_session = max(session_sum.values(), default=0.0)
    if top_session <= 0.0:
        return
    for candidate in found.values():
        candidate.relevance = candidate.relevance + tuning.session_share * session_sum.get(candidate.document, 0.0) / top_session
    top_relevance = max(c.relevance for c in found.values())
    for candidate in found.values():
        candidate.relevance = candidate.relevance / top_relevance


def _old_blend_retention(
    found: dict[int, Candidate], limit: int, bias: float, context: set[str], config: decay.DecayConfig, now: float, tuning: SearchTuning
) -> list[tuple[float, Candidate, float, float]]:
    s = search_module
    ranked: list[tuple[float, float, int, Candidate, float, float]] = []
    kth_best = -math.inf
    best_scores: list[float] = []
    retention_of = decay.retention_scorer(config, now)
    keep = 1.0 - bias
    for candidate in sorted(found.values(), key=lambda c: -c.relevance):
        relevance, row = candidate.relevance, candidate.row
        if keep * relevance + bias < kth_best:
            break
        retention = retention_of(row[s._IMPORTANCE], row[s._ACCESSED], row[s._ACCESSES], row[s._TEXT_IMPORTANCE])
        score = keep * relevance + bias * retention
        confidence = row[s._CONFIDENCE] / 0.5
        score *= confidence if confidence < 1.0 else 1.0
        penalty = 0.0
        if context and not context.intersection(json.loads(row[s._TAGS])):
            penalty = (1.0 - tuning.context_factor) * score
            score -= penalty
        ranked.append((score, candidate.bm25, row[s._ID], candidate, retention, penalty))
        if len(best_scores) < limit:
            heapq.heappush(best_scores, score)
            if len(best_scores) == limit:
                kth_best = best_scores[0]
        else:
            heapq.heappushpop(best_scores, score)
            kth_best = best_scores[0]
    ranked.sort(key=lambda r: (-r[0], r[1], -r[2]))
    return [(score, candidate, retention, penalty) for score, _bm25, _id, candidate, retention, penalty in ranked[:limit]]


class FrozenSearch(SearchRepository):
    """Stages 1-5 as they were (bm25 search, no vectors): rows with their bm25 appended, the ranked window read in
    SQL's order of bm25 alone and sorted here, every stage copying rows."""

    def search(self, query: str, memory_filter: MemoryFilter, *, limit: int = 10, context_tags: Any = None, rank_bias: float | None = None,
               raw: bool = False, now: datetime | None = None, **_ignored: Any) -> list[Hit]:  # fmt: skip
        s = search_module
        limit = max(1, min(limit, 1000))
        settings = self.ctx.settings
        bias = settings.rank_bias if rank_bias is None else float(rank_bias)
        context = set(context_tags or ())
        tuning = settings.search
        assert now is not None
        where, params = filter_sql(memory_filter, now)
        terms = query_terms(query)
        pool = max(tuning.candidate_pool, limit * 3)
        with self.ctx.read() as conn:
            self._sync(conn)
            rows: list[tuple[Any, ...]] = self._candidates(conn, query, terms, raw, where, params, pool, limit, tuning)  # type: ignore[assignment]
            covered = coverage.Coverage(len(terms), {})
            if not raw:
                rows, covered = _old_coverage_apply(rows, terms, tuning.coverage_weight)
            if not rows:
                return []
            found = _old_initial_relevance(rows)
            through: dict[int, tuple[ExpansionTerm, ...]] = {}
            if not raw and tuning.expansion_weight > 0:
                through = self._old_second_round(conn, found, terms, where, params, pool, tuning)
            self._add_neighbours(conn, found, where, params, limit, tuning)
            _old_add_session_share(found, rows, tuning)
            ranked = _old_blend_retention(found, limit, bias, context, settings.decay, ts_from_dt(now), tuning)
        hits: list[Hit] = []
        for score, candidate, retention, penalty in ranked:
            row = candidate.row
            memory_id = row[s._ID]
            hits.append(
                Hit.deferred(
                    partial(memory_from_row, row), score=score, relevance=candidate.relevance, retention=retention, bm25=candidate.bm25,
                    context_penalty=penalty, fused=False, vector_rank=None, terms=tuple(terms), fusion=None, coverage=covered.of(memory_id),
                    second_round=expansion.found_through(through[memory_id], row[s._CONTENT]) if memory_id in through else None,
                )
            )  # fmt: skip
        return hits

    def _old_second_round(
        self, conn: db.Connection, found: dict[int, Candidate], terms: list[QueryTerm], where: list[str], params: list[Any], pool: int, tuning: SearchTuning
    ) -> dict[int, tuple[ExpansionTerm, ...]]:
        ranked = [(c.row[0], c.relevance) for c in sorted(found.values(), key=lambda c: (-c.relevance, c.row[0]))]
        rows, chosen = expansion.second_round(
            conn, ranked, terms, lambda text: self._fts_rows(conn, text, where, params, pool, False, tuning),  # type: ignore[arg-type, return-value]
            hits=tuning.expansion_hits, max_terms=tuning.expansion_terms, max_matches=tuning.expansion_max_matches,
        )  # fmt: skip
        if not rows:
            return {}
        best = min(row[-1] for row in rows)
        raised: dict[int, tuple[ExpansionTerm, ...]] = {}
        for row in rows:
            share = tuning.expansion_weight * (row[-1] / best if best < 0 else 0.0)
            known = found.get(row[0])
            if known is None:
                found[row[0]] = Candidate(row, 0.0, share)  # type: ignore[arg-type]
            elif share > known.relevance:
                known.relevance = share
            else:
                continue
            raised[row[0]] = tuple(chosen)
        return raised

    def _fts_rows(  # type: ignore[override]
        self, conn: db.Connection, expression: str, where: list[str], params: list[Any], pool: int, raw: bool, tuning: SearchTuning
    ) -> list[tuple[Any, ...]]:
        window = pool + pool // 5 + 1
        weights = ", ".join(repr(float(w)) for w in (tuning.title_weight, tuning.content_weight, tuning.tags_weight, tuning.context_weight, tuning.dates_weight))
        columns = self._candidate_columns(conn)
        filters = _and(where)
        kept = self._rows
        passes = _row_test(where, params) if kept else None
        if passes is not None:
            ranked_sql = f"SELECT rowid, bm25(memory_fts, {weights}) FROM memory_fts WHERE memory_fts MATCH ? ORDER BY 2 LIMIT ?"
            ranked_args = [expression, window + 1]
        else:
            ranked_sql = (
                f"SELECT {'m.id' if kept else columns}, f.score FROM (SELECT rowid, bm25(memory_fts, {weights}) AS score FROM memory_fts "
                f"WHERE memory_fts MATCH ? ORDER BY 2 LIMIT ?) f LEFT JOIN memories m ON m.id = f.rowid{filters}"
            )
            ranked_args = [expression, window + 1, *params]
        try:
            ranked = conn.execute(ranked_sql, ranked_args).fetchall()
            if passes is not None:
                rows = [row for row in self._kept_rows(conn, ranked[:window]) if passes(row)]
            elif kept:
                rows = self._kept_rows(conn, [r for r in ranked[:window] if r[0] is not None])
            else:
                rows = [r for r in ranked[:window] if r[0] is not None]
                self._keep(rows)
            if len(rows) < pool and len(ranked) > window:
                sql = (
                    f"SELECT {columns}, f.score FROM (SELECT rowid, bm25(memory_fts, {weights}) AS score FROM memory_fts "
                    f"WHERE memory_fts MATCH ?) f JOIN memories m ON m.id = f.rowid WHERE 1{filters} ORDER BY f.score LIMIT ?"
                )
                rows = [tuple(r) for r in conn.execute(sql, [expression, *params, pool]).fetchall()]
                self._keep(rows)
                return rows
        except db.sqlite.OperationalError as exc:
            err = db.classify(exc, self.ctx.path)
            if raw and not isinstance(err, StoreEnvironmentError):
                raise QueryError(f"not a valid FTS5 query: {exc}") from None
            raise err from exc
        return sorted(rows, key=lambda r: (r[-1], r[0]))[:pool]


def _exactly(fast: list[Hit], frozen: list[Hit]) -> None:
    """The same hits in the same order with the same floats, snippets, coverage and explanations."""
    assert _signature(fast) == _signature(frozen)
    for a, b in zip(fast, frozen, strict=True):
        assert (a.score, a.relevance, a.retention, a.bm25, a.context_penalty) == (b.score, b.relevance, b.retention, b.bm25, b.context_penalty)
        assert (a.coverage, a.second_round, a.terms) == (b.coverage, b.second_round, b.terms)


@pytest.mark.parametrize(
    "tuning", [{}, {"common_term_matches": 60, "candidate_pool": 7}, {"expansion_weight": 0.5, "expansion_max_matches": 400}, {"coverage_weight": 0.0}]
)
def test_search_gives_exactly_what_the_frozen_stages_gave(generated, tuning, monkeypatch):
    """Every query twice (the second time from the kept rows and counts), under every filter, limit, bias and
    context: what the new stages give is what the frozen ones give, float for float."""
    store, texts = generated
    settings = store.settings
    if tuning:
        changed = type(settings).from_dict({**settings.to_dict(), "search": {**settings.search.to_dict(), **tuning}})
        monkeypatch.setattr(store.ctx, "settings", changed)
    fresh = SearchRepository(store.ctx)  # nothing kept from the other tests' searches
    frozen = FrozenSearch(store.ctx)
    queries = _queries(texts)
    compared = 0
    for query in queries[:13] + queries[13::8] if not tuning else queries[::9]:
        for memory_filter in FILTERS[::2] if query != queries[0] else FILTERS:
            for limit, bias, context in ((10, None, None), (3, 0.0, ("ops",)), (20, 1.0, None)):
                expected = frozen.search(query, memory_filter, limit=limit, rank_bias=bias, context_tags=context, now=NOW)
                for _again in range(2):
                    _exactly(fresh.search(query, memory_filter, limit=limit, rank_bias=bias, context_tags=context, now=NOW), expected)
                compared += bool(expected)
    assert compared > 30  # most searches find something: the comparison is not vacuous


def test_ties_in_bm25_go_to_the_lower_id_both_ways(tmp_path: Path):
    """Many memories with the same text tie in bm25, more of them than the ranked window holds: with or without
    rows kept, the hits are the lowest ids, as the frozen stages order them."""
    path = tmp_path / "ties.db"
    with MemoryStore.open(path) as store:
        store.remember_many([{"content": f"unrelated filler text {i}"} for i in range(20)], now=EPOCH)
        store.remember_many([{"content": "the same flaky zeppelin test again", "project": f"p{i % 3}"} for i in range(150)], now=EPOCH)
    with MemoryStore.open(path, readonly=True) as store:
        frozen = FrozenSearch(store.ctx)
        for query in ("zeppelin", "flaky zeppelin", "zeppelin nothingelse"):
            for limit in (1, 10, 40):
                expected = frozen.search(query, MemoryFilter(), limit=limit, now=NOW)
                assert len(expected) == limit
                for _again in range(2):
                    _exactly(store.finder.search(query, MemoryFilter(), limit=limit, now=NOW), expected)
