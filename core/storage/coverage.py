"""Term coverage: a memory that holds more of the query's words ranks above one that repeats fewer of them.

bm25 sums what each query word adds, and a word's weight saturates slowly, so a short memory saying one word of
a four-word question twice can outrank the memory that says three of them once. Lucene called the fix
coordination: scale each candidate's bm25 by how much of the query it holds. Here the factor is
``1 - coverage_weight + coverage_weight * held / asked`` (``search.coverage_weight``; 0 turns it off), where
``asked`` is the number of the query's terms and ``held`` the number the memory's own text (title, content,
tags) holds, matched as snippets highlight them (accent-insensitive, loosely stemmed). What a memory's indexed
context or grounded dates hold does not count: a memory found only through the turn before it ranks below one that
says the words itself, and is still found.

The texts come with the candidate rows (search reads each candidate's whole row once); only the first
:data:`TEXT_CHARS` characters of a text are looked at.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

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


@dataclass
class Coverage:
    """What :func:`apply` found for a search's candidates: ``asked`` terms, and by memory id how many of them the
    memory holds, its factor and its bm25 before the factor (a :class:`TermCoverage` is made only for the hits
    returned: fifty candidates a search, ten hits)."""

    asked: int
    found: dict[int, tuple[int, float, float]]

    def of(self, memory_id: int) -> TermCoverage | None:
        """The memory's :class:`TermCoverage`, None when it was not a candidate here."""
        entry = self.found.get(memory_id)
        if entry is None:
            return None
        # Straight into the instance's dict, as Hit.deferred does: a frozen dataclass's __init__ sets each field
        # through object.__setattr__, a microsecond a hit.
        made = TermCoverage.__new__(TermCoverage)
        made.__dict__.update(held=entry[0], asked=self.asked, factor=entry[1], bm25=entry[2])
        return made


def apply(
    scored: list[tuple[tuple[Any, ...], float]],
    terms: Sequence[QueryTerm],
    weight: float,
    text_at: tuple[int, int, int],
    folds: FoldedTexts | None = None,
) -> tuple[list[tuple[tuple[Any, ...], float]], Coverage]:
    """The candidates ``scored`` as (row, bm25) pairs (the row's id first, the memory's title, text and tags at the
    positions ``text_at``) with each bm25 scaled by the memory's coverage of ``terms``, best first again (ties to
    the lower id), and what coverage found. ``folds`` keeps folded texts between searches. Unchanged when the query
    has fewer than two terms (every match holds all of it) or ``weight`` is 0."""
    if weight <= 0.0 or len(terms) < 2 or not scored:
        return scored, Coverage(len(terms), {})
    tests = [needles(term) for term in terms]
    # Words (one stem each, starting a word) and the rest (substrings, any of them), tested as holds() does.
    stems = [wanted[0] for wanted, word_start in tests if word_start]
    substrings = [wanted for wanted, word_start in tests if not word_start]
    asked = len(terms)
    factors = [1.0 - weight + weight * held / asked for held in range(asked + 1)]
    rows = [row for row, _bm25 in scored]
    texts = (folds or FoldedTexts()).fold(rows, text_at)
    found: dict[int, tuple[int, float, float]] = {}
    # (scaled bm25, id, row): sorted as tuples, best first and ties to the lower id, without a key function (ids
    # are unique, so the rows themselves are never compared).
    ranked: list[tuple[float, int, tuple[Any, ...]]] = []
    for (row, bm25), (text, known) in zip(scored, texts, strict=True):
        # held = sum(holds(term)(text) for term in terms), inline: fifty candidates and a few terms a search. What a
        # text was found to hold is kept with it (`known`, by stem or by needles): the next query asks again.
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
        memory_id = row[0]
        found[memory_id] = (held, factor, bm25)
        ranked.append((bm25 * factor, memory_id, row))
    ranked.sort()
    scaled = [(row, score) for score, _id, row in ranked]
    return scaled, Coverage(asked, found)


def own_text(title: str, content: str, tags: str) -> str:
    """What coverage looks for terms in: a memory's title, its text's first :data:`TEXT_CHARS` characters and its
    tags (as stored, JSON), a line each."""
    return f"{title}\n{content[:TEXT_CHARS]}\n{tags}"


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


#: What joins texts folded together: a control character, which no folding step changes or carries context across
#: (lower-casing's final-sigma rule and NFD's reordering of combining marks both stop at it).
_JOIN = "\x00"


#: A folded text and what it was found to hold: by word stem (starting a word) or by a term's needles (any of them).
Folded = tuple[str, dict[Any, bool]]


class FoldedTexts:
    """Memories' own texts (:func:`own_text`) :func:`folded`, kept between searches by memory id together with the
    title, text and tags they were made from: a memory another process changed no longer equals what is kept and
    is folded afresh, so what is kept is never stale. Folding costs more than the rest of term coverage
    (lower-casing a text that is not pure ASCII goes character by character; a truncated title's "…" is enough),
    and the best candidates of one query are the candidates of the next ones. At most :attr:`budget` characters
    of texts are kept; then it starts afresh."""

    def __init__(self, budget: int = 2_000_000) -> None:
        self.budget = budget
        self._kept: dict[int, tuple[str, str, str, Folded]] = {}
        self._chars = 0

    def fold(self, rows: Sequence[tuple[Any, ...]], text_at: tuple[int, int, int]) -> list[Folded]:
        """Each row's own text folded, in order (its id first, its title, text and tags at ``text_at``), with what
        it was found to hold so far (see :func:`apply`)."""
        kept = self._kept
        title_at, content_at, tags_at = text_at
        out: list[Folded | None] = []
        missing: dict[int, tuple[str, str, str]] = {}
        for row in rows:
            title, content, tags = row[title_at], row[content_at], row[tags_at]
            entry = kept.get(row[0])
            # `is` first: a row kept by search hands the very strings folded before, and `is` need not read them
            # (the texts are seldom in the CPU's cache after FTS5's ranking).
            if entry is not None and (
                (entry[1] is content and entry[0] is title and entry[2] is tags) or (entry[1] == content and entry[0] == title and entry[2] == tags)
            ):
                out.append(entry[3])
            else:
                out.append(None)
                missing[row[0]] = (title, content, tags)
        if not missing:
            return out  # type: ignore[return-value]  # every entry was found
        texts = [own_text(*parts) for parts in missing.values()]
        joined = _JOIN.join(texts)
        # One call for all: folding's fixed cost per call is most of a short text's. A text holding the separator
        # itself is folded on its own.
        parts = folded(joined).split(_JOIN) if joined.count(_JOIN) == len(texts) - 1 else []
        if len(parts) != len(texts):
            parts = [folded(text) for text in texts]
        fresh: dict[int, tuple[str, str, str, Folded]] = {
            memory_id: (*fields, (text, {})) for (memory_id, fields), text in zip(missing.items(), parts, strict=True)
        }
        size = sum(map(len, texts))
        if self._chars + size > self.budget:
            kept.clear()
            self._chars = 0
        kept.update(fresh)
        self._chars += size
        return [text if text is not None else fresh[row[0]][3] for row, text in zip(rows, out, strict=True)]


@lru_cache(maxsize=4096)  # a query's terms are asked for at every search, and the next query repeats most
def needles(term: QueryTerm) -> tuple[tuple[str, ...], bool]:
    """What a :func:`folded` text holding ``term`` contains, and whether it must start a word there: a CJK phrase
    or a symbol as a substring (any of an emoji run's symbols), a word as a word starting with its loose stem."""
    if term.symbols:
        return tuple(term.text), False
    if term.cjk:
        return (fold(term.text),), False
    word = fold(term.text)
    return (next((word[: -len(s)] for s in _SUFFIXES if word.endswith(s) and len(word) - len(s) >= 3), word),), True


def holds(term: QueryTerm) -> Callable[[str], bool]:
    """A test of whether a :func:`folded` text holds ``term`` (see :func:`needles`)."""
    wanted, word_start = needles(term)

    def test(text: str) -> bool:
        for needle in wanted:
            # str.find, not a regex with a look-behind: the look-behind is tried at every character (0.6 ms a search).
            at = text.find(needle)
            while word_start and at > 0 and text[at - 1].isalnum():
                at = text.find(needle, at + 1)
            if at != -1:
                return True
        return False

    return test
