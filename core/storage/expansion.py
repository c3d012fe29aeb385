"""A second retrieval round: the query widened with the rare words of its best hits (pseudo-relevance feedback).

An answer can share no word with the question and still share one with what the question finds first: "What
events has Caroline joined to help children?" finds a turn about a pride event that says "LGBTQ", and the
mentorship turn that answers it says "LGBTQ youth", not "children". So after the first round, the words of the best
``expansion_hits`` hits that are rare in the store (by how many memories hold them, no word lists) are searched on
their own, and each match joins the candidates with ``expansion_weight`` of that round's normalised bm25
(``search.expansion_weight``; 0, the default, turns the round off). A candidate keeps the larger of its two
relevances, and a share below 1 never lifts a second-round match above the first round's best hit, so a clear
answer stays on top: the round only fills and lifts places below it.

Cheap by construction: a word's count is read from the supersede index (which holds every latest memory's words)
and stops one past ``expansion_max_matches``, since a word held by more memories than that is never searched; the
round is one FTS5 query over at most ``expansion_terms`` rare words.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memlens import db, supersede
from memlens.text import STOPWORDS, QueryTerm, highlight_spans, match_expression, query_terms, similarity_tokens, token_key

#: Characters of a hit read for its words: a long memory's opening says what it is about, and reading whole
#: 100 KB texts on every search would cost more than the search.
SEED_CHARS = 2000
#: Most words of the best hits whose counts are read (the ones in most hits first, then the earlier ones).
MAX_LOOKUPS = 64


@dataclass(frozen=True)
class ExpansionTerm:
    """A word the second round searched: the first-round hit it came from and how rare it is."""

    text: str
    #: The best first-round hit holding it, and that hit's 1-based place in the first round.
    seed_id: int
    seed_rank: int
    #: How many latest memories hold the word.
    matches: int

    def describe(self) -> str:
        """Where the word came from, for ``Hit.explain()``."""
        return f"'{self.text}' from hit #{self.seed_rank} (memory {self.seed_id})"


@dataclass(frozen=True)
class Seed:
    """A first-round hit the second round reads words from."""

    memory_id: int
    rank: int
    relevance: float
    text: str


def choose_terms(
    seeds: Sequence[Seed],
    query: Sequence[QueryTerm],
    counts_of: Callable[[list[str]], dict[str, int]],
    total: int,
    max_terms: int,
    max_matches: int,
) -> list[ExpansionTerm]:
    """The at most ``max_terms`` words of the ``seeds`` worth a second search, best first.

    A word qualifies when it is no stop word, no number and no form of a query word, and when ``counts_of`` says
    at least 2 and at most ``max_matches`` memories hold it (a word only its own seed holds finds nothing new; a
    common one finds everything, slowly). It scores the summed relevance of the seeds holding it times its idf
    over ``total`` memories; ties go to the word read first, so the choice is deterministic."""
    asked = {t.text[:4]: t.text for t in query}
    weight: dict[str, float] = {}
    origin: dict[str, Seed] = {}
    for seed in seeds:
        for word in _words(seed.text):
            if word in STOPWORDS or word.isdigit() or _form_of(word, asked):
                continue
            origin.setdefault(word, seed)
            weight[word] = weight.get(word, 0.0) + seed.relevance
    order = {word: i for i, word in enumerate(origin)}
    looked_up = sorted(weight, key=lambda w: (-weight[w], order[w]))[:MAX_LOOKUPS]
    counts = counts_of(looked_up)
    scored: list[tuple[float, int, str]] = []
    for word in looked_up:
        matches = counts.get(word, 0)
        if 2 <= matches <= max_matches:
            scored.append((weight[word] * math.log(1.0 + max(total, matches) / matches), order[word], word))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [ExpansionTerm(word, origin[word].memory_id, origin[word].rank, counts[word]) for _score, _order, word in scored[:max_terms]]


def _words(text: str) -> list[str]:
    """A seed's countable words in reading order, each once: the tokens the supersede index holds (lower-cased,
    longer than 2 characters, CJK as bigrams)."""
    lowered = text[:SEED_CHARS].lower()
    return sorted(similarity_tokens(lowered), key=lambda token: (lowered.find(token), token))


def _form_of(word: str, asked: dict[str, str]) -> bool:
    """Whether ``word`` is a form of a query word (``asked`` by its first four characters): the same, or one
    starting with the other over at least four characters, at most three apart. Searching "painting" again when the
    query said "paint" adds nothing."""
    other = asked.get(word[:4])
    if other is None:
        return False
    if word == other:
        return True
    shorter = min(len(word), len(other))
    return shorter >= 4 and word[:shorter] == other[:shorter] and abs(len(word) - len(other)) <= 3


def token_counts(conn: db.Connection, words: list[str], cap: int) -> dict[str, int]:
    """How many latest memories hold each word, from the supersede index, counted up to ``cap`` (exact below it;
    a word no memory holds is left out)."""
    keys = {token_key(w): w for w in words}
    counts = supersede.holder_counts(conn, list(keys), cap)
    return {word: n for word, n in zip(keys.values(), counts, strict=True) if n}


def second_round(
    conn: db.Connection,
    ranked: Sequence[tuple[int, float]],
    query: Sequence[QueryTerm],
    search: Callable[[str], list[tuple[tuple[Any, ...], float]]],
    *,
    hits: int,
    max_terms: int,
    max_matches: int,
) -> tuple[list[tuple[tuple[Any, ...], float]], list[ExpansionTerm]]:
    """The second round for a first round ``ranked`` as ``(memory id, relevance)`` best first: what ``search``
    returns for the chosen words (``(row, bm25)`` pairs; empty when no word qualifies) and the words."""
    best = list(ranked[:hits])
    texts = {
        int(r[0]): str(r[1])
        for r in db.select_in(conn, f"SELECT id, substr(content, 1, {SEED_CHARS}) FROM memories WHERE id IN ({{marks}})", [i for i, _r in best])
    }
    seeds = [Seed(memory_id, rank, relevance, texts[memory_id]) for rank, (memory_id, relevance) in enumerate(best, start=1) if memory_id in texts]
    # The highest id stands for the store's size: one index step, and gaps (forgotten memories) only lower the idf.
    total = int(conn.execute("SELECT max(id) FROM memories").fetchone()[0] or 0)
    chosen = choose_terms(seeds, query, lambda words: token_counts(conn, words, max_matches + 1), total, max_terms, max_matches)
    if not chosen:
        return [], []
    # query_terms marks a CJK bigram as one, so FTS5 gets it as the phrase it indexed.
    return search(match_expression([q for t in chosen for q in query_terms(t.text)], "OR")), chosen


def found_through(terms: Sequence[ExpansionTerm], text: str) -> tuple[ExpansionTerm, ...]:
    """The second-round words ``text`` holds (as snippets highlight them), in the order they were chosen."""
    return tuple(t for t in terms if highlight_spans(text, query_terms(t.text)))
