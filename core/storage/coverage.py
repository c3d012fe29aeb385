"""Term coverage: a memory that holds more of the query's words ranks above one that repeats fewer of them.

bm25 sums what each query word adds, and a word's weight saturates slowly, so a short memory saying one word of
a four-word question twice can outrank the memory that says three of them once. Lucene called the fix
coordination: scale each candidate's bm25 by how much of the query it holds. Here the factor is
``1 - coverage_weight + coverage_weight * held / asked`` (``search.coverage_weight``; 0 turns it off), where
``asked`` is the number of the query's terms and ``held`` the number the memory's own text (title, content,
tags) holds, matched as snippets highlight them (accent-insensitive, loosely stemmed). What a memory's indexed
context or grounded dates hold does not count: a memory found only through the turn before it ranks below one that
says the words itself, and is still found.

One read of the candidates' texts per search (at most ``candidate_pool`` rows by id, :data:`TEXT_CHARS` each).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memlens import db
from memlens.text import QueryTerm, fold

#: Characters of a memory's text read for its terms: beyond them a long memory counts as not holding a term, which
#: only lowers its factor; reading whole 100 KB texts for each of fifty candidates would cost more than the search.
TEXT_CHARS = 20_000


@dataclass(frozen=True)
class TermCoverage:
    """How many of the query's terms a memory's own text holds, and what that multiplied its bm25 by."""

    held: int
    asked: int
    factor: float
    #: The memory's bm25 before the factor (lower is better).
    bm25: float

    def describe(self) -> str:
        """The factor in words, for ``Hit.explain()``."""
        return f"x{self.factor:.2f} of bm25 {self.bm25:.3f}: holds {self.held} of the query's {self.asked} terms"


def apply(
    conn: db.Connection, rows: list[tuple[Any, ...]], terms: Sequence[QueryTerm], weight: float
) -> tuple[list[tuple[Any, ...]], dict[int, TermCoverage]]:
    """The candidate ``rows`` (id first, bm25 last) with each bm25 scaled by the memory's coverage of ``terms``,
    best first again (ties to the lower id), and each candidate's :class:`TermCoverage` by id. Unchanged when the
    query has fewer than two terms (every match holds all of it) or ``weight`` is 0."""
    if weight <= 0.0 or len(terms) < 2 or not rows:
        return rows, {}
    texts = _texts(conn, [row[0] for row in rows])
    tests = [holds(term) for term in terms]
    asked = len(terms)
    coverage: dict[int, TermCoverage] = {}
    scaled: list[tuple[Any, ...]] = []
    for row in rows:
        text = folded(texts.get(row[0], ""))
        held = sum(1 for test in tests if test(text))
        factor = 1.0 - weight + weight * held / asked
        coverage[row[0]] = TermCoverage(held, asked, factor, row[-1])
        scaled.append((*row[:-1], row[-1] * factor))
    scaled.sort(key=lambda r: (r[-1], r[0]))
    return scaled, coverage


def _texts(conn: db.Connection, ids: list[int]) -> dict[int, str]:
    """Each memory's title, text (its first :data:`TEXT_CHARS` characters) and tags, by id."""
    sql = f"SELECT id, title || char(10) || substr(content, 1, {TEXT_CHARS}) || char(10) || tags FROM memories WHERE id IN ({{marks}})"
    return {int(r[0]): str(r[1]) for r in db.select_in(conn, sql, ids)}


# Matching as snippets highlight (memlens.text.highlight_spans: accent-insensitive, loosely stemmed), but only asking
# whether a term is there, with each text folded once: highlight_spans folds the text again for every term,
# character by character when it is not ASCII, which cost 0.1 s a search here. tests/test_search_coverage.py checks
# that both agree.

#: Combining marks left by NFD: what folding removes.
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "ly", "s")


def folded(text: str) -> str:
    """``text`` lower-cased without accents (its length may change: only membership is asked of it)."""
    lowered = text.lower()
    return lowered if lowered.isascii() else _COMBINING.sub("", unicodedata.normalize("NFD", lowered))


def holds(term: QueryTerm) -> Callable[[str], bool]:
    """A test of whether a :func:`folded` text holds ``term``: a CJK phrase or a symbol as a substring (any of an
    emoji run's symbols), a word as a word starting with its loose stem."""
    if term.symbols:
        needles = list(term.text)
        return lambda text: any(n in text for n in needles)
    if term.cjk:
        needle = fold(term.text)
        return lambda text: needle in text
    word = fold(term.text)
    stem = next((word[: -len(s)] for s in _SUFFIXES if word.endswith(s) and len(word) - len(s) >= 3), word)

    def starts_a_word(text: str) -> bool:
        # str.find, not a regex with a look-behind: the look-behind is tried at every character (0.6 ms a search).
        at = text.find(stem)
        while at != -1:
            if at == 0 or not text[at - 1].isalnum():
                return True
            at = text.find(stem, at + 1)
        return False

    return starts_a_word
