"""Forgetting-aware ranking: bm25 candidates, then final = (1 - bias) * relevance + bias * retention score; context
tags demote; every hit explains its score."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from memlens import InvalidInput, MemoryStore
from memlens.cli import main
from memlens.decay import composite_score

DAY = timedelta(days=1)


def twins(store: MemoryStore, t0, *, second_at=None, **second):
    """Two memories equally relevant to 'rotate signing keys' (same length, same term counts)."""
    a = store.remember("Rotate the signing keys for payments monthly", supersede=False, now=t0)
    b = store.remember("Rotate the signing keys for invoices monthly", supersede=False, now=second_at or t0, **second)
    return a, b


def test_final_score_blends_relevance_and_retention(store: MemoryStore, t0):
    store.remember("The signing keys live in the hardware module", now=t0)
    store.remember("Rotate the signing keys every month; rotate the keys after incidents too", now=t0)
    store.remember("Keys for the office are at the front desk", now=t0)
    now = t0 + 3 * DAY
    hits = store.search("rotate signing keys", now=now)
    assert len(hits) == 3
    best_bm25 = min(h.bm25 for h in hits)
    for h in hits:
        assert h.relevance == pytest.approx(h.bm25 / best_bm25)
        assert h.retention == pytest.approx(composite_score(h.memory, now, store.settings.decay))
        assert h.score == pytest.approx(0.7 * h.relevance + 0.3 * h.retention)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert max(h.relevance for h in hits) == pytest.approx(1.0)


def test_retention_breaks_ties_between_equally_relevant_memories(store: MemoryStore, t0):
    old, fresh = twins(store, t0, second_at=t0 + 30 * DAY)
    now = t0 + 30 * DAY
    hits = store.search("rotate signing keys", now=now)
    assert hits[0].bm25 == pytest.approx(hits[1].bm25)
    assert [h.memory.id for h in hits] == [fresh.id, old.id]  # the unused one has faded
    assert hits[0].retention > hits[1].retention


def test_a_used_memory_outranks_a_slightly_more_relevant_unused_one(store: MemoryStore, t0):
    relevant = store.remember("Deploy payments: deploy the payments service after the payments migration", importance=0.2, now=t0)
    used = store.remember("Deploy notes for payments", importance=0.9, now=t0)
    store.recall([used.id], now=t0 + 9 * DAY)
    for day in range(10, 30):
        store.recall([used.id], now=t0 + day * DAY)
    now = t0 + 30 * DAY
    plain = store.search("deploy payments", rank_bias=0.0, now=now)
    assert [h.memory.id for h in plain] == [relevant.id, used.id]
    assert all(h.score == h.relevance for h in plain)  # bias 0: ranking by relevance alone
    aware = store.search("deploy payments", now=now)
    assert [h.memory.id for h in aware] == [used.id, relevant.id]
    only_retention = store.search("deploy payments", rank_bias=1.0, now=now)
    assert all(h.score == pytest.approx(h.retention) for h in only_retention)


def test_rank_bias_is_a_store_setting(store: MemoryStore, t0):
    _old, fresh = twins(store, t0, second_at=t0 + 30 * DAY)
    now = t0 + 30 * DAY
    store.configure({"rank_bias": 0.0}, now=t0)
    hits = store.search("rotate signing keys", now=now)
    assert all(h.score == h.relevance for h in hits)
    store.configure({"rank_bias": 0.3}, now=t0)
    assert store.search("rotate signing keys", now=now)[0].memory.id == fresh.id
    with pytest.raises(InvalidInput):
        store.search("rotate", rank_bias=1.5, now=now)
    with pytest.raises(InvalidInput):
        store.configure({"rank_bias": 2}, now=t0)


def test_context_tags_demote_memories_without_them(store: MemoryStore, t0):
    untagged, tagged = twins(store, t0, tags=["billing"])
    # The untagged one is used, so without context it wins.
    store.recall([untagged.id], now=t0 + DAY)
    now = t0 + 2 * DAY
    assert store.search("rotate signing keys", now=now)[0].memory.id == untagged.id
    hits = store.search("rotate signing keys", context_tags=["billing"], now=now)
    assert [h.memory.id for h in hits] == [tagged.id, untagged.id]
    demoted = hits[1]
    assert demoted.context_penalty > 0 and hits[0].context_penalty == 0
    undemoted = 0.7 * demoted.relevance + 0.3 * demoted.retention
    assert demoted.context_penalty == pytest.approx(0.9 * undemoted)  # the design's x0.1 (was x0.5 before issue 13)
    assert demoted.score == pytest.approx(undemoted - demoted.context_penalty)
    assert "demoted" in demoted.explain() and "demoted" not in hits[0].explain()


def test_every_hit_explains_its_score(store: MemoryStore, t0):
    store.remember("Rotate the signing keys every month", tags=["security"], now=t0)
    [hit] = store.search("signing keys", context_tags=["ops"], now=t0 + DAY)
    text = hit.explain()
    assert text == (
        f"bm25 {hit.bm25:.3f} -> relevance {hit.relevance:.3f}; retention score {hit.retention:.3f}; final {hit.score:.3f}"
        f" (context factor x0.10, demoted by {hit.context_penalty:.2f}: none of the query's context tags)"
    )
    data = hit.to_dict()
    assert data["explanation"] == text and data["score"] == round(hit.score, 6) and data["retention"] == round(hit.retention, 6)


def test_ranking_travels_in_time(store: MemoryStore, t0):
    early, late = twins(store, t0, second_at=t0 + 20 * DAY)
    # Seen from just after the first was written, only it exists; seen from day 20, the newer one leads.
    assert [h.memory.id for h in store.search("rotate signing keys", until=t0 + DAY, now=t0 + DAY)] == [early.id]
    assert store.search("rotate signing keys", now=t0 + 20 * DAY)[0].memory.id == late.id
    store.recall([early.id], now=t0 + 40 * DAY)
    assert store.search("rotate signing keys", now=t0 + 40 * DAY)[0].memory.id == early.id


def test_cli_search_prints_the_explanation(capsys, db_path, t0):
    with MemoryStore.open(db_path) as s:
        s.remember("Rotate the signing keys every month", now=t0)
    assert main(["--db", str(db_path), "search", "signing keys", "--json", "--now", (t0 + DAY).isoformat()]) == 0
    [hit] = json.loads(capsys.readouterr().out)
    assert hit["explanation"].startswith("bm25 ") and "final" in hit["explanation"]
