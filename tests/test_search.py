"""Search: bm25 over title/content/tags, CJK and accents, filters, snippets, hostile queries, raw syntax."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlens import MemoryStore, QueryError


def ids(hits):
    return [h.memory.id for h in hits]


def test_cjk_words_of_any_length_are_found(store: MemoryStore, t0):
    m = store.remember("我们决定使用机器学习模型来排序", now=t0)
    other = store.remember("今天天气很好", now=t0)
    assert ids(store.search("机器", now=t0)) == [m.id]
    assert ids(store.search("机器学习模型", now=t0)) == [m.id]
    assert ids(store.search("序", now=t0)) == [m.id]  # one character, at the end of a run
    assert ids(store.search("排", now=t0)) == [m.id]
    assert ids(store.search("天气", now=t0)) == [other.id]
    assert ids(store.search("学机", now=t0)) == []  # not a substring
    assert "«机器»" in store.search("机器", now=t0)[0].snippet


def test_japanese_and_korean(store: MemoryStore, t0):
    ja = store.remember("東京のサーバーでデプロイする", now=t0)
    ko = store.remember("서버 배포는 금요일에 하지 않는다", now=t0)
    assert ids(store.search("サーバー", now=t0)) == [ja.id]
    assert ids(store.search("배포", now=t0)) == [ko.id]


def test_accent_insensitive_latin(store: MemoryStore, t0):
    m = store.remember("Le café à Zürich est très bon; naïve façade", now=t0)
    for q in ("cafe", "CAFÉ", "zurich", "Zürich", "naive", "facade", "tres"):
        assert ids(store.search(q, now=t0)) == [m.id], q
    assert "«café»" in store.search("cafe", now=t0)[0].snippet


def test_stemming_and_ranking(store: MemoryStore, t0):
    a = store.remember("Deploying the service requires running migrations first", now=t0)
    b = store.remember("The cat sat on the mat", now=t0)
    assert ids(store.search("deploy migration", now=t0)) == [a.id]
    assert b.id not in ids(store.search("deploy", now=t0))


def test_title_and_tags_are_searched(store: MemoryStore, t0):
    m = store.remember("uses port 8080", title="Webserver configuration", tags=["networking"], now=t0)
    assert ids(store.search("webserver", now=t0)) == [m.id]
    assert ids(store.search("networking", now=t0)) == [m.id]


def test_and_first_then_or(store: MemoryStore, t0):
    both = store.remember("postgres connection pool size is 20", now=t0)
    one = store.remember("postgres runs on the db host", now=t0)
    hits = store.search("postgres pool", limit=10, now=t0)
    assert ids(hits)[0] == both.id and one.id in ids(hits)  # widened to OR because AND found too little


def test_filters(store: MemoryStore, t0):
    a = store.remember("alpha config value one", project="web", tags=["cfg"], type="decision", now=t0)
    b = store.remember("alpha config value two", project="api", now=t0 + timedelta(days=2))
    c = store.remember("alpha procedure", type="workflow", now=t0)
    o = store.observe("s1", "Bash", "alpha command", "ok", now=t0)
    later = t0 + timedelta(days=3)
    assert ids(store.search("alpha", project="web", now=later)) == [a.id]
    assert ids(store.search("alpha", tags=["cfg"], now=later)) == [a.id]
    assert ids(store.search("alpha", types=["decision"], now=later)) == [a.id]
    assert ids(store.search("alpha", layers=["procedural"], now=later)) == [c.id]
    assert ids(store.search("alpha", layers=["working"], now=later)) == [o.id]
    assert ids(store.search("alpha", session_id="s1", now=later)) == [o.id]
    assert set(ids(store.search("alpha", since=t0 + timedelta(days=1), now=later))) == {b.id}
    assert b.id not in ids(store.search("alpha", until=t0 + timedelta(days=1), now=later))


def test_ttl_hides_at_once(store: MemoryStore, t0):
    m = store.remember("temporary token rotation note", ttl_days=1, now=t0)
    assert ids(store.search("rotation", now=t0 + timedelta(hours=23))) == [m.id]
    assert ids(store.search("rotation", now=t0 + timedelta(hours=25))) == []
    assert ids(store.search("rotation", include_expired=True, now=t0 + timedelta(hours=25))) == [m.id]


def test_reading_is_not_use_recall_is(store: MemoryStore, t0):
    m = store.remember("the staging host is stg-3", now=t0)
    store.search("staging", now=t0 + timedelta(hours=1))
    store.get(m.id)
    assert store.get(m.id).access_count == 0
    later = t0 + timedelta(hours=2)
    (r,) = store.recall([m.id], now=later)
    assert r.access_count == 1 and r.last_accessed_at == later
    assert store.access_times(m.id) == [later]


def test_raw_fts_syntax_is_opt_in(store: MemoryStore, t0):
    m = store.remember("alpha beta gamma", now=t0)
    assert ids(store.search("alpha NOT beta", raw=True, now=t0)) == []
    assert ids(store.search("alpha OR zeta", raw=True, now=t0)) == [m.id]
    with pytest.raises(QueryError):
        store.search('"unbalanced', raw=True, now=t0)
    # The same text without raw is just words.
    assert ids(store.search('alpha "unbalanced', now=t0)) == [m.id]


HOSTILE = ['"', "*", "NEAR(", "AND", "OR", "NOT", "a AND OR b", "col:foo", "^x", "(((", "😀🔥", "a\x00b", "x" * 100_000, "-", "{title}:x", "''", "\ud800"]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(store: MemoryStore, t0, query):
    store.remember("some ordinary memory about AND and OR and x", now=t0)
    assert isinstance(store.search(query, now=t0), list)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_any_text_is_a_valid_query(store: MemoryStore, t0, query):
    if not hasattr(store, "_seeded"):
        store.remember("hypothesis seed memory alpha beta", now=t0)
        store._seeded = True  # type: ignore[attr-defined]
    hits = store.search(query, now=t0)
    assert isinstance(hits, list)


def test_snippet_marks_terms_and_cuts_long_text(store: MemoryStore, t0):
    text = "filler " * 100 + "the important needle is here " + "filler " * 100
    store.remember(text, now=t0)
    (hit,) = store.search("needle", now=t0)
    assert "«needle»" in hit.snippet and hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet) < 260
