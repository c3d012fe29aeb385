"""Term coverage (issue 15): a memory holding more of the query's terms ranks above a shorter one holding fewer,
the factor shows in Hit.explain(), 0 turns it off, and its matching agrees with the snippets' highlighting."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memlens import MemoryStore
from memlens.config import SearchTuning
from memlens.storage.coverage import folded, holds
from memlens.text import highlight_spans, query_terms

DAY = timedelta(days=1)


def test_holding_more_of_the_query_outranks_a_shorter_match_of_one_word(store: MemoryStore, t0):
    # "billing" and "service" are common here, "deploy" rare: bm25 alone puts the shorter memory first, though it
    # holds one of the query's three terms.
    for i in range(6):
        store.remember(f"The billing service sent invoice batch {i} overnight", type="observation", now=t0)
    shorter = store.remember("Deploy it", type="observation", now=t0)
    covering = store.remember("Deploy the billing service by tagging a release", type="observation", now=t0)
    question = "how do I deploy billing service"
    store.configure({"search": {"coverage_weight": 0.0}}, now=t0)
    assert [h.memory.id for h in store.search(question, now=t0 + DAY)][:2] == [shorter.id, covering.id]
    store.configure({"search": {"coverage_weight": 0.5}}, now=t0)
    hits = store.search(question, now=t0 + DAY)
    assert [h.memory.id for h in hits][:2] == [covering.id, shorter.id]
    top, below = hits[:2]
    assert top.coverage is not None and (top.coverage.held, top.coverage.asked, top.coverage.factor) == (3, 3, 1.0)
    assert below.coverage is not None and (below.coverage.held, below.coverage.asked) == (1, 3)
    assert below.coverage.factor == pytest.approx(1 - 0.5 + 0.5 / 3)
    assert below.bm25 == pytest.approx(below.coverage.bm25 * below.coverage.factor)
    assert f"(x{below.coverage.factor:.2f} of bm25 {below.coverage.bm25:.3f}: holds 1 of the query's 3 terms)" in below.explain()
    assert "holds" not in top.explain()  # a factor of 1 goes unsaid


def test_a_one_word_query_and_a_raw_query_are_left_alone(store: MemoryStore, t0):
    store.remember("Rotate the signing keys every month", now=t0)
    [hit] = store.search("signing", now=t0 + DAY)
    assert hit.coverage is None
    [raw] = store.search("signing OR nothing", raw=True, now=t0 + DAY)
    assert raw.coverage is None


def test_coverage_is_on_by_default_and_checked():
    assert SearchTuning().coverage_weight == 0.5
    assert SearchTuning.from_dict({"coverage_weight": 0}).coverage_weight == 0.0
    with pytest.raises(ValueError, match="coverage_weight"):
        SearchTuning.from_dict({"coverage_weight": 1.5})


@pytest.mark.parametrize(
    "text",
    [
        "Painting the lighthouse at Brixham, painted again",
        "Café crème at the Zürich station; naïve résumé",
        "the_underscored word and e-mail and x2y",
        "我们昨天去了北京 and 上海的博物馆",
        "Party time 🎉🎂 with friends 👩‍👩‍👧",
        "CAPITALS and Mixed Case Words, interesting",
    ],
)
def test_coverage_matches_terms_as_snippets_highlight_them(text):
    """Each query term is held exactly when the snippet highlighter marks it (both fold accents and stem loosely)."""
    words = (
        "paint painting lighthouses brixham cafe creme zurich naive resume underscored mail e x2y 北京 博物 昨天 🎉 🎂 👩 capital case interest word"
    )
    for term in query_terms(words):
        assert holds(term)(folded(text)) == bool(highlight_spans(text, [term])), term


def test_texts_folded_together_fold_as_each_alone():
    """FoldedTexts folds a search's new texts in one call and keeps them by memory id: the result must be each
    text's own folding, also where lower-casing or NFD look at neighbouring characters (a final sigma, combining
    marks at a text's edges), and a memory whose text changed is folded afresh."""
    from memlens.storage.coverage import FoldedTexts, own_text

    texts = [
        "ΟΔΟΣ", "Σ", "ΑΣ\u0301", "\u0301leading mark", "trailing mark e\u0301", "İstanbul İ", "Café crème…", "plain ascii",
        "a\x00text holding the separator", "ﬁ ligature Ⅻ", "", "数据库密码", "👩‍👩‍👧 🎉",
    ]  # fmt: skip
    rows = [(i, t[:3], t, '["Σ"]' if i % 2 else "[]") for i, t in enumerate(texts)]
    folds = FoldedTexts(budget=200)  # small: it starts afresh on the way
    for _ in range(3):
        for batch in (rows, rows[::-1], rows[2:5]):
            assert [text for text, _known in folds.fold(batch, (1, 2, 3))] == [folded(own_text(*row[1:])) for row in batch]
    changed = [(i, title, content + " ΣΑΣ", tags) for i, title, content, tags in rows]
    assert [text for text, _known in folds.fold(changed, (1, 2, 3))] == [folded(own_text(*row[1:])) for row in changed]
