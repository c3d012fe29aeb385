"""The second retrieval round (issue 15, point 4): the rare words of the best hits are searched again, what that
finds joins below them, it is a setting that is off by default, deterministic, and explained in Hit.explain()."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memlens import MemoryStore
from memlens.config import SearchTuning, StoreSettings
from memlens.storage.expansion import ExpansionTerm, Seed, choose_terms, found_through
from memlens.text import query_terms

DAY = timedelta(days=1)
FILLER = [
    "Booked the dentist for Tuesday morning",
    "The kitchen tap drips again, call the plumber",
    "Finished reading the novel about the lighthouse keeper",
    "Bought oat milk, eggs and coffee beans",
    "The quarterly report is due at the end of the month",
    "Watered the tomatoes and the basil on the balcony",
]


def remember_all(store: MemoryStore, texts: list[str], t0: datetime) -> list[int]:
    return [store.remember(text, type="observation", now=t0 + i * timedelta(minutes=1)).id for i, text in enumerate(texts)]


def with_round(store: MemoryStore, weight: float, t0: datetime) -> None:
    store.configure({"search": {"expansion_weight": weight}}, now=t0)


def test_the_answer_reachable_only_through_the_second_round(store: MemoryStore, t0):
    """The question's words are in one memory; the answer shares only a rare word of that memory with it."""
    parade, mentoring = remember_all(
        store,
        [
            "Caroline marched in the pride parade with the LGBTQ choir",
            "Signed up to mentor LGBTQ teenagers on Saturdays",
            *FILLER,
        ],
        t0,
    )[:2]
    asked = "Which parade did Caroline march in?"
    assert [h.memory.id for h in store.search(asked, now=t0 + DAY)] == [parade]  # off by default: bm25 alone
    with_round(store, 0.3, t0)
    hits = store.search(asked, now=t0 + DAY)
    assert [h.memory.id for h in hits] == [parade, mentoring]
    first, second = hits
    assert first.second_round is None and "second round" not in first.explain()
    assert second.bm25 == 0.0 and second.second_round is not None
    [word] = second.second_round
    assert (word.text, word.seed_id, word.seed_rank, word.matches) == ("lgbtq", parade, 1, 2)
    assert f"found in the second round through 'lgbtq' from hit #1 (memory {parade})" in second.explain()
    assert second.score < first.score
    # The same query, the same answer: the choice of words is deterministic.
    assert [(h.memory.id, h.score) for h in store.search(asked, now=t0 + DAY)] == [(h.memory.id, h.score) for h in hits]
    with_round(store, 0.0, t0)  # and 0 turns it off again
    assert [h.memory.id for h in store.search(asked, now=t0 + DAY)] == [parade]


def test_a_clear_single_hop_top_hit_keeps_its_place(store: MemoryStore, t0):
    """The round only adds and lifts below the best hit: here it finds a memory saying the rare word of the top hit
    three times, which bm25 would put first, and the top hit stays first with the first round's order kept above it."""
    ids = remember_all(
        store,
        [
            "The backup server rsync job runs nightly at 02:00 via cron",
            "rsync rsync rsync: the mirror is slow again",
            "The backup drive is nearly full",
            *FILLER,
        ],
        t0,
    )
    question = "When does the backup server job run?"
    before = store.search(question, now=t0 + DAY)
    assert before[0].memory.id == ids[0]
    with_round(store, 0.9, t0)
    after = store.search(question, now=t0 + DAY)
    assert after[0].memory.id == ids[0] and after[0].score == pytest.approx(before[0].score)
    assert ids[1] in [h.memory.id for h in after] and ids[1] not in [h.memory.id for h in before]
    found = next(h for h in after if h.memory.id == ids[1])
    assert found.relevance < after[0].relevance and "through 'rsync' from hit #1" in found.explain()
    first_round = [h.memory.id for h in after if h.second_round is None]
    assert first_round == [h.memory.id for h in before if h.memory.id in first_round]


def test_a_raw_query_has_no_second_round(store: MemoryStore, t0):
    parade, _mentoring = remember_all(
        store, ["Caroline marched in the pride parade with the LGBTQ choir", "Signed up to mentor LGBTQ teenagers", *FILLER], t0
    )[:2]
    with_round(store, 0.5, t0)
    assert [h.memory.id for h in store.search("parade", raw=True, now=t0 + DAY)] == [parade]


def test_choose_terms_keeps_rare_words_of_the_best_hits_and_nothing_else():
    seeds = [
        Seed(10, 1, 1.0, "Painting the lighthouse at Brixham harbour, painting again tomorrow"),
        Seed(11, 2, 0.5, "Harbour walk with Ada"),
    ]
    counts = {"lighthouse": 3, "brixham": 2, "harbour": 5, "again": 900, "tomorrow": 40, "walk": 1, "ada": 2}
    asked: list[list[str]] = []

    def counts_of(words: list[str]) -> dict[str, int]:
        asked.append(words)
        return {w: counts[w] for w in words if w in counts}

    chosen = choose_terms(seeds, query_terms("What did she paint?"), counts_of, 1000, 4, 100)
    # "painting" is a form of the query's "paint"; "again" is too common, "walk" only its own seed holds.
    # "harbour" is in both seeds (1.5 x idf), "brixham" the rarest of the best one; "ada" (0.5 x idf) comes fifth.
    assert [t.text for t in chosen] == ["harbour", "brixham", "lighthouse", "tomorrow"]
    assert chosen[:2] == [ExpansionTerm("harbour", 10, 1, 5), ExpansionTerm("brixham", 10, 1, 2)]  # the best seed holding it
    assert "painting" not in asked[0] and "the" not in asked[0]
    assert choose_terms(seeds, query_terms("What did she paint?"), counts_of, 1000, 4, 100) == chosen
    assert [t.text for t in choose_terms(seeds, query_terms("paint"), counts_of, 1000, 2, 100)] == ["harbour", "brixham"]  # capped


def test_found_through_names_the_words_a_text_holds():
    terms = (ExpansionTerm("lgbtq", 1, 1, 2), ExpansionTerm("choir", 1, 1, 3))
    assert found_through(terms, "Sang with the choirs") == (terms[1],)
    assert found_through(terms, "nothing here") == ()


def test_the_settings_are_checked_and_kept():
    tuning = SearchTuning.from_dict({"expansion_weight": 0.25, "expansion_hits": 5, "expansion_terms": 3, "expansion_max_matches": 50})
    assert (tuning.expansion_weight, tuning.expansion_hits, tuning.expansion_terms, tuning.expansion_max_matches) == (0.25, 5, 3, 50)
    assert StoreSettings.from_dict(StoreSettings(search=tuning).to_dict()).search == tuning
    assert SearchTuning().expansion_weight == 0.0  # off unless chosen
    for bad in ({"expansion_weight": 1.0}, {"expansion_weight": -0.1}, {"expansion_hits": 0}, {"expansion_terms": 2.5}):
        with pytest.raises(ValueError, match="expansion_"):
            SearchTuning.from_dict(bad)


def test_the_words_chosen_from_capped_counts_are_the_ones_exact_counts_choose(store: MemoryStore, t0):
    """token_counts counts a word's holders in the supersede index only one past expansion_max_matches: the words
    chosen, and the counts they carry, are those that exact counts over every latest memory's words give."""
    from memlens.bench.generator import Generator
    from memlens.storage import expansion
    from memlens.text import similarity_tokens

    texts = [m.content for m in Generator(9).memories(400)]
    store.remember_many([{"content": t} for t in texts], now=t0)
    latest = [similarity_tokens(c) for (c,) in store.conn.execute("SELECT content FROM memories WHERE is_latest = 1")]

    def exact(words: list[str]) -> dict[str, int]:
        counts = {w: sum(w in tokens for tokens in latest) for w in words}
        return {w: n for w, n in counts.items() if n}

    seeds = [Seed(i + 1, i + 1, 1.0 / (i + 1), texts[i]) for i in range(5)]
    query = query_terms("what happened")
    for max_matches in (3, 10, 40):
        with store.ctx.read() as conn:
            capped = expansion.token_counts(conn, sorted({w for s in seeds for w in similarity_tokens(s.text)}), max_matches + 1)
            chosen = choose_terms(seeds, query, lambda words, conn=conn, cap=max_matches + 1: expansion.token_counts(conn, words, cap), len(latest), 6, max_matches)
        truth = exact(list(capped))
        assert capped == {w: min(n, max_matches + 1) for w, n in truth.items()}
        assert chosen == choose_terms(seeds, query, exact, len(latest), 6, max_matches)
        assert chosen  # some words are rare enough to be chosen
