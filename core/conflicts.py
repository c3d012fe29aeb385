"""Conflicts: two latest memories about the same subject that reach different conclusions.

Three parts, in this order:

1. **The detector** (:func:`detect`), deterministic and pure: it finds the subject two texts share and the signals
   that they disagree about it: different values of one kind (numbers, quantities, dates, weekdays, times,
   versions, names), opposite polarity (negation) and opposite terms from a small lexicon (:data:`OPPOSITES`).
   Two texts whose leftover words differ on *both* sides are taken to be about different things ("the staging API
   listens on 8080" / "the production API listens on 9090") and are never flagged: precision over recall.
2. **The judges**: :class:`RuleJudge` wraps the detector; :class:`LLMJudge` asks an OpenAI-compatible model about a
   pair that shares a subject but shows no deterministic signal. A judge that fails (an unreachable endpoint) makes
   the pass fall back to the rules with a message; nothing is lost.
3. **The service** (:class:`ConflictService`, the store's ``conflicts``): the ``conflicts`` table (each pair with
   its evidence, status and resolution), the ``contradicts`` relation, detection when a semantic memory is written
   (:func:`record_conflicts_of`, called from the write path) and in a scan pass, and resolution, which never
   deletes: it lowers the losing side's ``source_confidence`` (search ranks it lower), can write a resolved fact
   citing both sides, can let the sweep forget the losing side after a number of days (rule ``conflict``), and
   can be undone. Every step leaves an audit entry (operation ``conflict``), which names ids and signal kinds,
   never memory text.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from memlens import db
from memlens.errors import InvalidInput, NotFound
from memlens.models import Memory, ts_from_dt, utc_from_ts
from memlens.storage.context import StoreContext, to_json
from memlens.storage.validation import check_count, check_id, check_text, check_ttl

if TYPE_CHECKING:
    import numpy as np

    from memlens.llm import ChatClient
    from memlens.storage.memories import MemoryRepository
    from memlens.store import MemoryStore
    from memlens.supersede_postings import SimilarityPostings

# --- the detector ---------------------------------------------------------------------------------------------

#: How strongly each signal says "these disagree" (the score of a conflict is the strongest signal's).
SIGNAL_WEIGHTS: dict[str, float] = {"value": 0.9, "name": 0.85, "negation": 0.8, "opposite": 0.75, "llm": 0.7}

#: Pairs of words that say opposite things about the same subject (compared after :func:`_stem`).
OPPOSITES: tuple[tuple[str, str], ...] = (
    ("enable", "disable"), ("enabled", "disabled"), ("true", "false"), ("allow", "deny"), ("allow", "forbid"),
    ("allowed", "forbidden"), ("allowed", "blocked"), ("allowed", "disallowed"), ("like", "dislike"), ("love", "hate"),
    ("like", "hate"), ("prefer", "avoid"), ("dark", "light"), ("public", "private"), ("required", "optional"),
    ("mandatory", "optional"), ("sync", "async"), ("synchronous", "asynchronous"), ("increase", "decrease"),
    ("higher", "lower"), ("more", "fewer"), ("more", "less"), ("faster", "slower"), ("always", "never"),
    ("accept", "reject"), ("accepted", "rejected"), ("approved", "rejected"), ("pass", "fail"), ("passed", "failed"),
    ("passing", "failing"), ("success", "failure"), ("succeed", "fail"), ("work", "broken"), ("working", "broken"),
    ("stable", "flaky"), ("stable", "unstable"), ("supported", "unsupported"), ("supported", "deprecated"),
    ("valid", "invalid"), ("include", "exclude"), ("included", "excluded"), ("keep", "remove"), ("keep", "drop"),
    ("add", "remove"), ("open", "closed"), ("online", "offline"), ("tabs", "spaces"), ("local", "remote"),
    ("strict", "lenient"), ("ascending", "descending"), ("correct", "incorrect"), ("correct", "wrong"),
    ("safe", "unsafe"), ("secure", "insecure"), ("cheap", "expensive"), ("large", "small"), ("big", "small"),
    ("early", "late"), ("before", "after"), ("monolith", "microservices"), ("agree", "disagree"), ("good", "bad"),
    ("best", "worst"), ("happy", "unhappy"), ("visible", "hidden"), ("blocking", "nonblocking"), ("up", "down"),
    ("single", "double"), ("lowercase", "uppercase"), ("verbose", "quiet"), ("manual", "automatic"),
    ("manually", "automatically"), ("internal", "external"), ("allowlist", "blocklist"), ("include", "skip"),
    ("morning", "afternoon"), ("morning", "evening"), ("weekday", "weekend"),
)  # fmt: skip

#: Words that turn a statement around ("no longer" and "not anymore" count once).
NEGATIONS = frozenset(["not", "never", "no", "none", "nobody", "nothing", "without", "stopped", "longer", "anymore", "cannot", "nor"])
_CONTRACTED_NOT = re.compile(r"\b(\w+)n['’]t\b", re.IGNORECASE)

#: Words that carry no subject: function words plus the verbs and adverbs people use to restate or correct a fact
#: ("moved to", "is now", "actually stays"). They neither make a subject nor count as a difference.
FILLER = frozenset(
    ["a", "about", "above", "actually", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "being", "both", "but", "by", "can", "could", "currently", "did", "do", "does", "doing", "done", "each", "either", "every", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "me", "my", "now", "of", "on", "once", "only", "or", "our", "ours", "out", "over", "own", "per", "please", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "us", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yet", "still", "instead", "anyway", "really", "should", "must", "may", "might", "shall", "new", "old", "newer", "older", "current", "currently", "latest", "default", "set", "sets", "setting", "moved", "move", "moves", "changed", "change", "changes", "stays", "stay", "stayed", "remains", "remain", "kept", "use", "uses", "used", "using", "run", "runs", "ran", "running", "going", "get", "gets", "got", "make", "makes", "made", "go", "goes", "went", "lives", "live", "living", "happen", "happens", "right", "think", "thought", "turns", "turned", "confirmed", "decided", "says", "said", "told", "tells", "per", "team's", "one", "okay", "ok", "yes", "oh", "well", "already", "again", "same"]
)

_MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4, "may": 5, "jun": 6, "june": 6,
    "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9, "sept": 9, "september": 9, "oct": 10, "october": 10,
    "nov": 11, "november": 11, "dec": 12, "december": 12,
}  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_UNITS: dict[str, tuple[str, float]] = {
    "ms": ("duration", 0.001), "millisecond": ("duration", 0.001), "milliseconds": ("duration", 0.001),
    "s": ("duration", 1), "sec": ("duration", 1), "secs": ("duration", 1), "second": ("duration", 1), "seconds": ("duration", 1),
    "min": ("duration", 60), "mins": ("duration", 60), "minute": ("duration", 60), "minutes": ("duration", 60),
    "h": ("duration", 3600), "hr": ("duration", 3600), "hrs": ("duration", 3600), "hour": ("duration", 3600), "hours": ("duration", 3600),
    "day": ("duration", 86400), "days": ("duration", 86400), "week": ("duration", 604800), "weeks": ("duration", 604800),
    "kb": ("size", 1e3), "mb": ("size", 1e6), "gb": ("size", 1e9), "tb": ("size", 1e12),
    "kib": ("size", 1024), "mib": ("size", 1024**2), "gib": ("size", 1024**3),
    "%": ("percent", 1), "percent": ("percent", 1), "px": ("pixels", 1),
}  # fmt: skip
#: Number words read as numbers ("two approvals" / "three approvals"); "one" is left out, it is too often a pronoun.
_NUMBER_WORDS = {w: i for i, w in enumerate(["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"], start=2)}
_MONTH_NAMES = "|".join(sorted(_MONTHS, key=len, reverse=True))
_VALUE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iso_date", re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")),
    ("month_day", re.compile(rf"\b({_MONTH_NAMES})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b", re.IGNORECASE)),
    ("day_month", re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_NAMES})\b", re.IGNORECASE)),
    ("clock_ampm", re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?(?![a-z])", re.IGNORECASE)),
    ("clock", re.compile(r"\b(\d{1,2}):(\d{2})\b")),
    ("version", re.compile(r"\bv?(\d+(?:\.\d+){1,3})(?![\d.]*\s*(?:ms|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|kb|mb|gb|tb|kib|mib|gib|%|percent|px)\b)\b", re.IGNORECASE)),
    ("quantity", re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|kb|mb|gb|tb|kib|mib|gib|%|percent|px)(?![a-z])", re.IGNORECASE)),
    ("money", re.compile(r"[$€£]\s?(\d+(?:[.,]\d+)?)")),
    ("number", re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?!\w|\.\d)")),
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_+#'’-]*[A-Za-z0-9+#]|[A-Za-z]")
_HAS_DIGIT = re.compile(r"\d")
_HAS_LETTER = re.compile(r"[^\W\d_]")
_SENTENCE_START = re.compile(r"(?:^|[.!?;:]\s+|\n)\s*[\"'(]*$")
_NAMED_TIMES = {"noon": 720, "midday": 720, "midnight": 0}
#: The words _values reads as values by themselves (a weekday, also in the plural, a number word, a named time, a
#: month name but the three-letter ones).
_VALUE_WORDS = frozenset([*_WEEKDAYS, *(d + "s" for d in _WEEKDAYS), *_NUMBER_WORDS, *_NAMED_TIMES, *(m for m in _MONTHS if len(m) > 3)])


@dataclass(frozen=True)
class Value:
    """One value found in a text: its kind (number, duration, size, percent, money, date, month, day, time,
    version, name), a normalised form for comparing, and the words as written."""

    kind: str
    norm: str
    surface: str


@dataclass(frozen=True)
class Evidence:
    """Why two texts were judged to disagree: the signals that fired, the subject they share, and the words and
    values that differ on each side (as written, for highlighting). ``note`` is an LLM judge's reason."""

    signals: tuple[str, ...] = ()
    subject: tuple[str, ...] = ()
    newer_words: tuple[str, ...] = ()
    older_words: tuple[str, ...] = ()
    newer_values: tuple[str, ...] = ()
    older_values: tuple[str, ...] = ()
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what the ``conflicts`` table stores)."""
        return {
            "signals": list(self.signals), "subject": list(self.subject), "newer_words": list(self.newer_words),
            "older_words": list(self.older_words), "newer_values": list(self.newer_values), "older_values": list(self.older_values),
            "note": self.note,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        """The evidence a stored dict describes (missing keys empty)."""

        def words(key: str) -> tuple[str, ...]:
            value = data.get(key) or []
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        return cls(
            words("signals"), words("subject"), words("newer_words"), words("older_words"), words("newer_values"),
            words("older_values"), str(data.get("note") or ""),
        )  # fmt: skip

    def summary(self) -> str:
        """One line for people: which signal, and what differs."""
        parts = [", ".join(self.signals) or "no signal"]
        if self.older_values or self.newer_values:
            parts.append(f"{' '.join(self.older_values) or '-'} -> {' '.join(self.newer_values) or '-'}")
        elif self.older_words or self.newer_words:
            parts.append(f"{' '.join(self.older_words) or '-'} / {' '.join(self.newer_words) or '-'}")
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)


@dataclass(frozen=True)
class Verdict:
    """A judge's answer about one pair: whether it is a conflict, how sure (0..1), the evidence, and which judge."""

    conflict: bool
    score: float
    evidence: Evidence
    method: str = "rules"


@dataclass(frozen=True)
class _Analysis:
    values: dict[str, set[str]]
    surfaces: dict[tuple[str, str], str]
    words: dict[str, str]  # stem -> first surface
    negated: bool
    negation_words: tuple[str, ...]


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """A crude stem, enough to match "deploys"/"deploy", "pinned"/"pin" and "approved"/"approve" (short words
    are left alone). Applied the same way to both texts and to the lexicon, so it only has to be consistent."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 3 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    elif len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] in "bdgmnprt":
        w = w[:-1]
    return w


_OPPOSITE_OF: dict[str, set[str]] = {}
for _a, _b in OPPOSITES:
    _OPPOSITE_OF.setdefault(_stem(_a), set()).add(_stem(_b))
    _OPPOSITE_OF.setdefault(_stem(_b), set()).add(_stem(_a))
_FILLER_STEMS = frozenset(_stem(w) for w in FILLER)


def extract_values(text: str) -> list[Value]:
    """The values in ``text``, each normalised so that equal values compare equal ("5 minutes" and "300 s",
    "3pm" and "15:00", "May 1" and "2026-05-01")."""
    return _values(text)[0]


def _values(text: str) -> tuple[list[Value], str]:
    """The values and the text with each value blanked out (so its digits and unit words are not read again)."""
    found: list[Value] = []
    rest = text
    # Every value pattern needs a digit (the same \d): a text without one has none of these values.
    patterns = _VALUE_PATTERNS if _HAS_DIGIT.search(text) is not None else ()
    for kind, pattern in patterns:
        pieces: list[str] = []
        last = 0
        for match in pattern.finditer(rest):
            value = _normalise(kind, match)
            if value is None:
                continue
            found.append(value)
            pieces.append(rest[last : match.start()])
            pieces.append(" " * (match.end() - match.start()))
            last = match.end()
        pieces.append(rest[last:])
        rest = "".join(pieces)
    lowered = rest.lower()
    words = _WORD.findall(lowered)
    # The loop finds nothing unless a word is in _VALUE_WORDS or is a weekday with more "s"es (it contains "dayss"):
    # most texts have none, and a set test in C costs a tenth of it.
    for word in words if "dayss" in lowered or not _VALUE_WORDS.isdisjoint(words) else ():
        if word in _WEEKDAYS or word.rstrip("s") in _WEEKDAYS:
            found.append(Value("day", word.rstrip("s"), word))
        elif word in _NUMBER_WORDS:
            found.append(Value("number", f"{_NUMBER_WORDS[word]:g}", word))
        elif word in _NAMED_TIMES:
            found.append(Value("time", str(_NAMED_TIMES[word]), word))
        elif word in _MONTHS and len(word) > 3:
            found.append(Value("month", str(_MONTHS[word]), word))
    return found, rest


def _normalise(kind: str, m: re.Match[str]) -> Value | None:
    surface = m.group(0).strip()
    if kind == "iso_date":
        return Value("date", f"{int(m.group(2))}-{int(m.group(3))}", surface)
    if kind == "month_day":
        return Value("date", f"{_MONTHS[m.group(1).lower()]}-{int(m.group(2))}", surface)
    if kind == "day_month":
        return Value("date", f"{_MONTHS[m.group(2).lower()]}-{int(m.group(1))}", surface)
    if kind == "clock_ampm":
        hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "p" else 0)
        return Value("time", str(hour * 60 + int(m.group(2) or 0)), surface)
    if kind == "clock":
        hour, minute = int(m.group(1)), int(m.group(2))
        return Value("time", str(hour * 60 + minute), surface) if hour < 24 and minute < 60 else None
    if kind == "version":
        return Value("version", m.group(1), surface)
    if kind == "quantity":
        unit_kind, factor = _UNITS[m.group(2).lower()]
        return Value(unit_kind, f"{float(m.group(1)) * factor:g}", surface)
    if kind == "money":
        return Value("money", f"{float(m.group(1).replace(',', '.')):g}", surface)
    return Value("number", f"{float(m.group(1)):g}", surface)


@functools.lru_cache(maxsize=4096)
def _analyse(text: str) -> _Analysis:
    """What the rules read in ``text`` (cached: a new memory is compared with up to twenty others, and the same
    memories meet again across writes; the result is never changed by its readers)."""
    values, rest = _values(text)
    by_kind: dict[str, set[str]] = {}
    surfaces: dict[tuple[str, str], str] = {}
    for v in values:
        by_kind.setdefault(v.kind, set()).add(v.norm)
        surfaces.setdefault((v.kind, v.norm), v.surface)
    value_words = {w.lower() for v in values for w in _WORD.findall(v.surface)}
    # "isn't" -> "is not"; a leading "no," or "nope" answers the previous statement, it does not negate this one.
    # (Only a text with an apostrophe can hold a contraction; the search cost a fifth of the whole without one.)
    expanded = rest if "'" not in rest and "’" not in rest else _CONTRACTED_NOT.sub(lambda mm: f"{mm.group(1)} not" if mm.group(1).lower() not in ("ca", "wo") else ("can not" if mm.group(1).lower() == "ca" else "will not"), rest)
    expanded = _ANSWERING_NO.sub(" ", expanded)
    words: dict[str, str] = {}
    negations: list[str] = []
    for match in _WORD.finditer(expanded):
        surface = match[0]
        lower, stem, kind = _word_kind(surface)
        if kind == _NEGATION:
            negations.append(lower)
            continue
        if kind == _NOT_A_WORD or lower in value_words:
            continue
        if kind == _NAME or (kind == _NAME_MID_SENTENCE and not _sentence_start_before(expanded, match.start())):
            by_kind.setdefault("name", set()).add(stem)
            surfaces.setdefault(("name", stem), surface)
        words.setdefault(stem, surface)
    return _Analysis(by_kind, surfaces, words, _negated(negations), tuple(negations))


def _negated(negations: Sequence[str]) -> bool:
    """Whether a text with these negation words (in order) says the opposite of what it would without them."""
    # "no longer" and "not ... anymore" are one negation each.
    count = len(negations) - negations.count("longer") - negations.count("anymore")
    if count <= 0 and ("longer" in negations or "anymore" in negations or "stopped" in negations):
        count = 1
    return count % 2 == 1


def _plain_text_negated(text: str) -> bool | None:
    """``_analyse(text).negated`` without the rest of the reading, for an ASCII text without a digit or an
    apostrophe; None for any other. In such a text no value pattern blanks a word, no contraction is expanded and
    lower-casing moves no word boundary, so its negations are its words (after a leading "no,") in NEGATIONS."""
    if not text.isascii() or "'" in text or _HAS_DIGIT.search(text) is not None:
        return None
    return _negated([w for w in _WORD.findall(_ANSWERING_NO.sub(" ", text).lower()) if w in NEGATIONS])


# What a word is to _analyse, whatever the text around it (see _word_kind).
_NEGATION, _NOT_A_WORD, _NAME, _NAME_MID_SENTENCE, _PLAIN = range(5)
_ANSWERING_NO = re.compile(r"^\s*(no|nope|nah)\b\s*[,;:.!-]", re.IGNORECASE)


@functools.lru_cache(maxsize=1 << 17)
def _word_kind(surface: str) -> tuple[str, str, int]:
    """A word as _analyse reads it: lower-cased, its stem, and its kind: a negation; a value word (weekday, named
    time, number word, month) that is never a subject word; a name wherever it stands (mixed case, digits); a name
    unless it starts a sentence (capitalised); or a plain word. Everything but the sentence start depends on the
    word alone, so it is worked out once a word (cached) instead of once a word a text: that per-word work was most
    of the cost of comparing a new memory with its candidates. The order of the checks is _is_name's."""
    lower = surface.lower()
    if lower in NEGATIONS:
        return lower, "", _NEGATION
    if lower in _WEEKDAYS or lower.rstrip("s") in _WEEKDAYS or lower in _NAMED_TIMES or lower in _NUMBER_WORDS or (lower in _MONTHS and len(lower) > 3):
        return lower, "", _NOT_A_WORD
    stem = _stem(lower)
    tail = surface[1:]
    if tail != tail.lower() or (_HAS_DIGIT.search(surface) is not None and _HAS_LETTER.search(surface) is not None):
        return lower, stem, _NAME
    if not surface[:1].isupper() or lower in FILLER:
        return lower, stem, _PLAIN
    return lower, stem, _NAME_MID_SENTENCE


def _is_name(surface: str, text: str, at: int) -> bool:
    """Whether a word reads as a name: capitalised mid-sentence, or mixed case / digits inside (PostgreSQL, gpt4).
    ``surface`` stands at ``at`` in ``text``."""
    tail = surface[1:]
    if tail != tail.lower() or (_HAS_DIGIT.search(surface) is not None and _HAS_LETTER.search(surface) is not None):
        return True
    if not surface[:1].isupper():
        return False
    return not _sentence_start_before(text, at) and surface.lower() not in FILLER


def _at_sentence_start(before: str) -> bool:
    """Whether a word preceded by ``before`` starts a sentence: what ``_SENTENCE_START.search(before)`` says, read
    from the end instead (the regex search cost time in proportion to ``before``, so a long text took quadratic time)."""
    return _sentence_start_before(before, len(before))


def _sentence_start_before(before: str, end: int) -> bool:
    """:func:`_at_sentence_start` of ``before[:end]``, without copying it."""
    while end and before[end - 1] in "\"'(":
        end -= 1
    start = end
    while start and before[start - 1].isspace():
        start -= 1
    if start == 0 or "\n" in before[start:end]:
        return True
    return end > start and before[start - 1] in ".!?;:"


def detect(newer: str, older: str) -> Verdict:
    """Whether ``newer`` contradicts ``older``, deterministically (see the module docstring for the signals).

    A conflict needs a shared subject (at least one content word in common, and leftover words on at most one
    side) and at least one signal: a value kind present in both with a different value on each side, a different
    name, opposite polarity, or a pair of opposite terms. The score is the strongest signal's weight.
    """
    verdict = _detect(newer, older, explain=True)
    assert verdict is not None
    return verdict


def _conflict_verdict(newer: str, older: str) -> Verdict | None:
    """:func:`detect`'s verdict when it finds a conflict, else None (what the write path needs: it stores only
    conflicts, and most pairs it compares are not one)."""
    return _detect(newer, older, explain=False)


def _detect(newer: str, older: str, *, explain: bool) -> Verdict | None:
    """:func:`detect`; without ``explain``, None as soon as the pair cannot be a conflict (no signal, or no shared
    subject), before the evidence is gathered: gathering it was most of the cost of a pair beyond reading the texts."""
    a, b = _analyse(newer), _analyse(older)
    signals: list[str] = []
    newer_vals: list[str] = []
    older_vals: list[str] = []
    for kind in sorted(set(a.values) & set(b.values)):
        only_a, only_b = a.values[kind] - b.values[kind], b.values[kind] - a.values[kind]
        if only_a and only_b:
            signal = "name" if kind == "name" else "value"
            if signal not in signals:
                signals.append(signal)
            newer_vals += [a.surfaces[(kind, v)] for v in sorted(only_a)]
            older_vals += [b.surfaces[(kind, v)] for v in sorted(only_b)]
    name_stems = a.values.get("name", set()) | b.values.get("name", set())
    opposite_a: list[str] = []
    opposite_b: list[str] = []
    for stem in a.words:
        for other in _OPPOSITE_OF.get(stem, ()):
            if other in b.words and other not in a.words and stem not in b.words:
                opposite_a.append(a.words[stem])
                opposite_b.append(b.words[other])
    if opposite_a:
        signals.append("opposite")
    if a.negated != b.negated:
        signals.append("negation")
    if not signals and not explain:
        return None
    signal_stems = {_stem(w) for w in opposite_a + opposite_b}
    content_a = {s for s in a.words if s not in _FILLER_STEMS and s not in signal_stems and len(s) > 1}
    content_b = {s for s in b.words if s not in _FILLER_STEMS and s not in signal_stems and len(s) > 1}
    shared = content_a & content_b
    left_a = content_a - content_b - (name_stems if "name" in signals else set())
    left_b = content_b - content_a - (name_stems if "name" in signals else set())
    # Words left over on both sides mean two different subjects ("staging" / "production"), unless the shared part
    # is large and the leftovers few (a restatement with one word swapped each way).
    same_subject = bool(shared) and (not left_a or not left_b)
    if "name" in signals and len(signals) > 1:
        # Different names *and* another difference: the names are most likely the subjects ("Redis on 6379" /
        # "Postgres on 5432", "uses Storybook" / "does not use Chromatic"), not what is said about them.
        same_subject = False
    if not same_subject and not explain:
        return None
    newer_words = tuple(dict.fromkeys([*opposite_a, *(a.words[s] for s in sorted(left_a)), *(w for w in a.negation_words if a.negated != b.negated)]))
    older_words = tuple(dict.fromkeys([*opposite_b, *(b.words[s] for s in sorted(left_b)), *(w for w in b.negation_words if a.negated != b.negated)]))
    evidence = Evidence(
        tuple(signals), tuple(a.words[s] for s in sorted(shared)), newer_words, older_words, tuple(dict.fromkeys(newer_vals)),
        tuple(dict.fromkeys(older_vals)),
    )  # fmt: skip
    if not signals or not same_subject:
        return Verdict(False, 0.0, evidence)
    return Verdict(True, max(SIGNAL_WEIGHTS[s] for s in signals), evidence)


def shares_subject(newer: str, older: str) -> bool:
    """Whether two texts have a content word in common (what a judge beyond the rules is asked about)."""
    a, b = _analyse(newer), _analyse(older)
    return bool({s for s in a.words if s not in _FILLER_STEMS} & {s for s in b.words if s not in _FILLER_STEMS})


# --- judges ---------------------------------------------------------------------------------------------------


class ConflictJudge(Protocol):
    """Anything that decides whether ``newer`` contradicts ``older`` (the rules, an LLM, a test double)."""

    name: str

    def judge(self, newer: str, older: str) -> Verdict:
        """The verdict on one pair; raises :class:`memlens.errors.MemlensError` when the judge cannot answer."""
        ...


class RuleJudge:
    """The deterministic detector as a judge."""

    name = "rules"

    def judge(self, newer: str, older: str) -> Verdict:
        """See :func:`detect`."""
        return detect(newer, older)


_LLM_SYSTEM = (
    "You compare two statements from an assistant's long-term memory. Answer with a JSON object "
    '{"conflict": true|false, "confidence": 0..1, "reason": "one short sentence"}. '
    "conflict is true only when both statements are about the same subject and cannot both be true now "
    "(a changed value, a reversed decision or preference). Statements about different things, restatements and "
    "compatible details are not conflicts."
)


class LLMJudge:
    """Asks an OpenAI-compatible chat model (see :mod:`memlens.llm`); its answer is checked before it is used."""

    name = "llm"

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    def judge(self, newer: str, older: str) -> Verdict:
        """The model's verdict; raises ``LLMError`` when it cannot be reached or answers out of shape."""
        from memlens.llm import LLMError

        answer = self.client.chat_json(_LLM_SYSTEM, json.dumps({"older": older[:2000], "newer": newer[:2000]}, ensure_ascii=False))
        conflict = answer.get("conflict")
        confidence = answer.get("confidence", 0.7)
        reason = answer.get("reason", "")
        if not isinstance(conflict, bool) or not isinstance(confidence, (int, float)) or not isinstance(reason, str):
            raise LLMError("the conflict judge answered without a boolean 'conflict', a number 'confidence' and a text 'reason'")
        if not 0.0 <= float(confidence) <= 1.0:
            raise LLMError(f"the conflict judge's confidence {confidence!r} is not between 0 and 1")
        evidence = Evidence(("llm",), note=reason.strip()[:300])
        return Verdict(conflict, float(confidence) * SIGNAL_WEIGHTS["llm"] / 0.7 if conflict else 0.0, evidence, "llm")


def llm_judge_from_env() -> LLMJudge | None:
    """An :class:`LLMJudge` over the endpoint ``MEMLENS_LLM_*`` names, or None when none is configured."""
    from memlens.llm import LLMClient, LLMConfig

    config = LLMConfig.from_env()
    return LLMJudge(LLMClient(config)) if config is not None else None


# --- the service ----------------------------------------------------------------------------------------------

#: Resolution actions: which side wins, a merged fact, or no conflict at all.
ACTIONS = ("keep_newer", "keep_older", "keep_trusted", "merge", "not_conflict")
#: Statuses a conflict can have.
STATUSES = ("open", "resolved", "dismissed")
#: A resolution multiplies the losing side's source_confidence by this (0.8 -> 0.2: search scales it by 0.4).
DEMOTION = 0.25
#: The tag a losing side carries while the sweep may forget it (rule ``conflict``, see core/rules/conflict.py).
SUPERSEDED_TAG = "conflict-superseded"
#: Memories compared with each new or scanned memory: those sharing the most of its rarer words among the latest
#: semantic ones. Ten and ten thousand postings (instead of 20 and 50,000) found the same 81 of the 81 flagged
#: labelled pairs among 100,000 generated memories, and halved the cost of detection on every semantic write;
#: five candidates lost one, three lost three (``python -m memlens.bench.conflicts --in-store 100000``).
CANDIDATES = 10
#: Postings read at most when looking for a memory's candidates (its rarest words first; at least
#: MIN_PROBED_WORDS words are always read, however common).
CANDIDATE_BUDGET = 10_000
MIN_PROBED_WORDS = 3
_SCAN_KEY = "conflicts_scanned_through"


@dataclass(frozen=True)
class Conflict:
    """One detected pair: the newer and the older memory (as stored now), the evidence, and what became of it.

    ``resolution`` (None while open) holds the action, the winner and loser ids, the confidences before, the
    resolved fact's id and what undo needs."""

    id: int
    newer: Memory
    older: Memory
    score: float
    method: str
    evidence: Evidence
    status: str
    detected_at: datetime
    resolution: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the CLI and MCP print this)."""
        return {
            "id": self.id, "status": self.status, "score": round(self.score, 3), "method": self.method,
            "detected_at": self.detected_at.isoformat(), "evidence": self.evidence.to_dict(), "resolution": self.resolution,
            "newer": _side(self.newer), "older": _side(self.older),
        }  # fmt: skip


def _side(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id, "title": m.title, "content": m.content, "origin": m.origin, "created_at": m.created_at.isoformat(),
        "source_confidence": m.source_confidence, "is_latest": m.is_latest, "project": m.project,
    }  # fmt: skip


@dataclass(frozen=True)
class ScanReport:
    """What a scan pass did: memories checked, pairs compared, conflicts recorded, and a note when the LLM judge
    could not be used (the pass then went on with the rules alone)."""

    checked: int
    compared: int
    found: list[int] = field(default_factory=list)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"checked": self.checked, "compared": self.compared, "found": self.found, "message": self.message}


def candidate_ids(
    conn: db.Connection, memory: Memory, now_ts: float, *, limit: int = CANDIDATES, postings: SimilarityPostings | None = None
) -> list[int]:
    """Latest, unexpired semantic memories (same project, or either without one) sharing the most of ``memory``'s
    rarer words, most shared first, ``memory`` itself left out.

    Counted in the store's in-memory supersede postings (``postings``, kept current with ``conn``; a throw-away copy
    when None) over the rarest of the memory's words until :data:`CANDIDATE_BUDGET` postings were read: a subject
    is named by its rare words, and a full-text OR query over every word cost ~700 ms per write at a million
    memories (bm25 scores every memory holding any word) where this costs a few.
    """
    return [row[0] for row in _candidate_rows(conn, memory.id, memory.content, memory.project, now_ts, limit=limit, postings=postings)]


def _candidate_rows(
    conn: db.Connection, memory_id: int, content: str, project: str | None, now_ts: float, *, limit: int, postings: SimilarityPostings | None
) -> list[tuple[int, str, float]]:
    """:func:`candidate_ids` of the memory ``memory_id`` (its text and project given), each with its text and its
    stored creation time, read in the statement that checks them (the write path compares the texts next)."""
    from memlens.supersede_postings import SimilarityPostings, counted_runs, keys_of

    keys = keys_of(content).tolist()
    if not keys:
        return []
    index = postings if postings is not None else SimilarityPostings()
    index.sync(conn)
    frequency = dict(zip(keys, index.doc_frequencies(keys), strict=True))
    keys.sort(key=lambda k: (frequency[k], k))
    # A key's frequency is how many holders it has: the budget is spent on the counts, and the holders of the keys
    # chosen are read together.
    chosen: list[int] = []
    read = 0
    for i, key in enumerate(keys):
        if i >= MIN_PROBED_WORDS and read + frequency[key] > CANDIDATE_BUDGET:
            break
        chosen.append(key)
        read += frequency[key]
    if not read:
        return []
    ids, shared = counted_runs(index.holders_of(chosen))
    ranked = _alive_most_shared(index, ids, shared, memory_id, limit * 5)  # most shared words first, then the newest
    # Of those, the ones known to be in another layer would fail the statement's +layer test (a layer never
    # changes): they are not looked up. They still took their place in the ranking, as before.
    ranked = ranked[index.in_layer(ranked, "semantic")].tolist()
    if not ranked:
        return []
    order = {mid: rank for rank, mid in enumerate(ranked)}
    marks = ",".join("?" * len(order))
    rows = conn.execute(
        # The unary + keeps SQLite on the id lookups: with an index on layer it scanned every semantic memory.
        f"SELECT id, content, created_at FROM memories WHERE id IN ({marks}) AND +is_latest = 1 AND +layer = 'semantic' "
        "AND (+forget_after IS NULL OR +forget_after > ?) AND (? IS NULL OR +project IS NULL OR +project = ?)",
        (*order, now_ts, project, project),
    ).fetchall()
    return sorted((tuple(r) for r in rows), key=lambda r: order[r[0]])[:limit]


def _alive_most_shared(index: SimilarityPostings, ids: np.ndarray, shared: np.ndarray, memory_id: int, count: int) -> np.ndarray:
    """:func:`_most_shared` of the ``ids`` still in the supersede index, ``memory_id`` left out.

    The ids that left the index since its snapshot are few, so only the head of the ranking is checked: dropping
    some ids leaves the order of the others as it was, so the first ``count`` survivors of a head of the ranking
    are the answer whenever the head holds that many (else a longer head is checked). Checking every id found
    (ten thousand, scattered over a megabyte-long array at a million memories) cost a tenth of a millisecond."""
    import numpy as np

    head = 2 * count + 1
    while True:
        ranked = np.array(_most_shared(ids, shared, head), dtype=np.int64)
        survivors = ranked[index.alive(ranked) & (ranked != memory_id)]
        if len(survivors) >= count or head >= len(ids):
            return survivors[:count]
        head *= 4


def _most_shared(ids: np.ndarray, shared: np.ndarray, count: int) -> list[int]:
    """The ``count`` first of ``ids`` (ascending) by most ``shared``, then highest id: what a lexsort of them all on
    (-shared, -id) puts first, sorting only those above the cut."""
    import numpy as np

    if len(ids) <= count:
        return [int(i) for i in ids[np.lexsort((-ids, -shared))].tolist()]
    # The smallest share level that still fills ``count`` places: everything above it ranks first, then the
    # highest ids at that level.
    levels = np.bincount(shared)
    above = np.cumsum(levels[::-1])[::-1]  # above[s]: how many share s or more
    level = int(np.flatnonzero(above >= count)[-1])
    higher = shared > level
    top = ids[higher][np.lexsort((-ids[higher], -shared[higher]))]
    at_level = ids[shared == level][::-1][: count - len(top)]
    return [int(i) for i in np.concatenate((top, at_level)).tolist()]


def _newer_older(x: Memory, y: Memory) -> tuple[Memory, Memory]:
    return (x, y) if (x.created_at, x.id) >= (y.created_at, y.id) else (y, x)


def record_conflict(repo: MemoryRepository, conn: db.Connection, newer: Memory, older: Memory, verdict: Verdict, now: datetime) -> int | None:
    """Store one detected pair inside the caller's write transaction: a ``conflicts`` row with the evidence, a
    ``contradicts`` relation from the newer to the older memory, and an audit entry. None when the pair is known
    already (open, resolved or dismissed: a dismissed pair is not raised again)."""
    ts = ts_from_dt(now)
    cur = conn.execute(
        "INSERT OR IGNORE INTO conflicts(newer_id, older_id, detected_at, score, method, evidence) VALUES (?, ?, ?, ?, ?, ?)",
        (newer.id, older.id, ts, verdict.score, verdict.method, to_json(verdict.evidence.to_dict())),
    )
    if not cur.rowcount:
        return None
    conflict_id = int(cur.lastrowid)
    repo.link(conn, newer.id, older.id, "contradicts", ts, verdict.score)
    details = {"step": "detected", "conflict": conflict_id, "signals": list(verdict.evidence.signals), "method": verdict.method, "score": round(verdict.score, 3)}
    repo.ctx.audit(conn, "conflict", [newer.id, older.id], details, now)
    return conflict_id


def _known_pair(conn: db.Connection, x: int, y: int) -> bool:
    return conn.execute("SELECT 1 FROM conflicts WHERE (newer_id = ? AND older_id = ?) OR (newer_id = ? AND older_id = ?)", (x, y, y, x)).fetchone() is not None


def _known_partners(conn: db.Connection, memory_id: int) -> set[int]:
    """The memories ``memory_id`` already forms a conflict pair with (open, resolved or dismissed)."""
    rows = conn.execute("SELECT older_id FROM conflicts WHERE newer_id = ? UNION SELECT newer_id FROM conflicts WHERE older_id = ?", (memory_id, memory_id))
    return {r[0] for r in rows}


def record_conflicts_of(repo: MemoryRepository, conn: db.Connection, memory_id: int, now: datetime) -> list[int]:
    """Detect, with the rules, conflicts between a just-written semantic memory and the latest semantic memories
    it shares words with, and record each (see :func:`record_conflict`); the ids of the new conflicts. Runs in the
    write path's transaction, so it stays deterministic and local (no LLM: a network call must not hold the lock).

    This runs on every semantic write, so the memory and its candidates are read as bare texts (the candidates in
    the statement that chooses them), and whole memories are built only for the pairs that do conflict (reading
    twenty full rows cost more than the rules)."""
    row = conn.execute("SELECT layer, is_latest, content, project, created_at FROM memories WHERE id = ?", (memory_id,)).fetchone()
    if row is None:
        raise NotFound(f"no memory #{memory_id} (it may have been forgotten)")
    layer, is_latest, content, project, created_at = row
    if layer != "semantic" or not is_latest:
        return []
    candidates = _candidate_rows(conn, memory_id, content, project, ts_from_dt(now), limit=CANDIDATES, postings=repo.ctx.postings)
    if not candidates:
        return []
    known = _known_partners(conn, memory_id)
    mine = (created_at, memory_id)  # the stored time, compared with the stored times of the others
    # A text without values or names (of any kind) and without a word of OPPOSITES can only meet a conflict through
    # negation, whichever side is newer (values need a kind on both sides; OPPOSITES pairs go both ways): a candidate
    # with the same polarity then cannot conflict, and a plain text's polarity is read without the rest of the rules.
    own = _analyse(content)
    only_negation = not own.values and not any(stem in _OPPOSITE_OF for stem in own.words)
    memory: Memory | None = None
    found: list[int] = []
    for other_id, other_text, other_created in candidates:
        if other_id in known or (only_negation and _plain_text_negated(other_text) == own.negated):
            continue
        memory_is_newer = mine >= (other_created, other_id)  # as _newer_older orders two memories
        verdict = _conflict_verdict(content, other_text) if memory_is_newer else _conflict_verdict(other_text, content)
        if verdict is not None:
            memory = memory or repo.get_in(conn, memory_id)
            newer, older = _newer_older(memory, repo.get_in(conn, other_id))
            conflict_id = record_conflict(repo, conn, newer, older, verdict, now)
            if conflict_id is not None:
                found.append(conflict_id)
    return found


def close_superseded(conn: db.Connection, ctx: StoreContext, old_id: int, new_id: int, now: datetime) -> list[int]:
    """Close the open conflicts of a memory that was just superseded by ``new_id`` (inside that write): the old
    version left search, so its pair is settled as "superseded" instead of staying open beside the new version's
    own conflicts (which :func:`record_conflicts_of` raises if the new text still disagrees). Nothing else changes;
    audited; undo reopens the pair. The ids of the conflicts closed."""
    rows = conn.execute(
        "SELECT id, newer_id, older_id FROM conflicts WHERE status = 'open' AND (newer_id = ? OR older_id = ?)", (old_id, old_id)
    ).fetchall()
    closed = []
    for conflict_id, newer_id, older_id in rows:
        record = {"action": "superseded", "at": now.isoformat(), "superseded": old_id, "by": new_id,
                  "confidence_before": {}, "fact": None, "ttl_before": {}, "tagged": []}  # fmt: skip
        conn.execute("UPDATE conflicts SET status = 'resolved', resolution = ? WHERE id = ?", (to_json(record), conflict_id))
        details = {"step": "resolved", "conflict": conflict_id, "action": "superseded", "superseded": old_id, "by": new_id}
        ctx.audit(conn, "conflict", [newer_id, older_id, new_id], details, now)
        closed.append(int(conflict_id))
    return closed


class ConflictService:
    """Conflicts in one store: listing, the scan pass, resolution and undo (the store's ``conflicts``)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.ctx = store.ctx
        self.memories = store.memories

    # reading ----------------------------------------------------------------------------------------------------

    def _from_row(self, conn: db.Connection, row: Any) -> Conflict:
        r = dict(zip(("id", "newer_id", "older_id", "detected_at", "score", "method", "evidence", "status", "resolution"), row, strict=True))
        detected = utc_from_ts(r["detected_at"])
        assert detected is not None
        return Conflict(
            r["id"], self.memories.get_in(conn, r["newer_id"]), self.memories.get_in(conn, r["older_id"]), r["score"], r["method"],
            Evidence.from_dict(json.loads(r["evidence"] or "{}")), r["status"], detected, json.loads(r["resolution"]) if r["resolution"] else None,
        )  # fmt: skip

    _COLUMNS = "id, newer_id, older_id, detected_at, score, method, evidence, status, resolution"

    def get_in(self, conn: db.Connection, conflict_id: int) -> Conflict:
        """One conflict read inside the caller's transaction; NotFound when there is none (or a side was forgotten)."""
        row = conn.execute(f"SELECT {self._COLUMNS} FROM conflicts WHERE id = ?", (conflict_id,)).fetchone()
        if row is None:
            raise NotFound(f"no conflict #{conflict_id} (one of its memories may have been forgotten)")
        return self._from_row(conn, row)

    def get(self, conflict_id: int) -> Conflict:
        """One conflict."""
        with self.ctx.read() as conn:
            return self.get_in(conn, check_id(conflict_id))

    def find(self, *, status: str = "open", memory_id: int | None = None, limit: int = 100) -> list[Conflict]:
        """Conflicts with ``status`` (open, resolved, dismissed or all), the most recently detected first;
        with ``memory_id`` only those it is a side of."""
        if status not in (*STATUSES, "all"):
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)} or all, not {status!r}")
        where: list[str] = []
        params: list[Any] = []
        if status != "all":
            where.append("status = ?")
            params.append(status)
        if memory_id is not None:
            where.append("(newer_id = ? OR older_id = ?)")
            params += [check_id(memory_id)] * 2
        sql = f"SELECT {self._COLUMNS} FROM conflicts" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY detected_at DESC, id DESC LIMIT ?"
        with self.ctx.read() as conn:
            rows = conn.execute(sql, [*params, check_count(limit, "limit")]).fetchall()
            return [self._from_row(conn, r) for r in rows]

    def ids(self, *, status: str = "open") -> list[int]:
        """Ids of the conflicts with ``status`` (or all), the most recently detected first (for views that page)."""
        if status not in (*STATUSES, "all"):
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)} or all, not {status!r}")
        where = "" if status == "all" else " WHERE status = ?"
        with self.ctx.read() as conn:
            return [r[0] for r in conn.execute(f"SELECT id FROM conflicts{where} ORDER BY detected_at DESC, id DESC", () if status == "all" else (status,))]

    def get_many(self, conflict_ids: Iterable[int]) -> list[Conflict]:
        """The conflicts with these ids that still exist, in the order asked."""
        ids = [check_id(i) for i in conflict_ids]
        with self.ctx.read() as conn:
            rows = db.select_in(conn, f"SELECT {self._COLUMNS} FROM conflicts WHERE id IN ({{marks}})", ids)
            found = {c.id: c for c in (self._from_row(conn, r) for r in rows)}
        return [found[i] for i in ids if i in found]

    def count(self, *, status: str = "open") -> int:
        """How many conflicts have ``status``."""
        with self.ctx.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM conflicts WHERE status = ?", (status,)).fetchone()[0])

    # the scan pass ----------------------------------------------------------------------------------------------

    def scan(self, *, judge: ConflictJudge | None = None, full: bool = False, now: datetime) -> ScanReport:
        """Compare the latest semantic memories written since the last scan (every one with ``full``) with the
        memories they share words with, and record the conflicts found.

        The rules decide first; ``judge`` (an LLM) is asked only about pairs that share a subject but show no
        rule signal. It is called outside any transaction. When it fails, the pass goes on with the rules alone and
        the report's ``message`` says why; nothing found so far is lost.
        """
        ts = ts_from_dt(now)
        with self.ctx.read() as conn:
            start = 0 if full else int(_meta(conn, _SCAN_KEY) or 0)
            ids = [r[0] for r in conn.execute("SELECT id FROM memories WHERE id > ? AND is_latest = 1 AND layer = 'semantic' ORDER BY id", (start,))]
            through = int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM memories").fetchone()[0])
        compared = 0
        message = ""
        pending: list[tuple[Memory, Memory, Verdict]] = []
        seen: set[tuple[int, int]] = set()
        for memory_id in ids:
            with self.ctx.read() as conn:
                memory = self.memories.get_in(conn, memory_id)
                others = [self.memories.get_in(conn, i) for i in candidate_ids(conn, memory, ts, postings=self.ctx.postings) if not _known_pair(conn, memory_id, i)]
            for other in others:
                newer, older = _newer_older(memory, other)
                if (newer.id, older.id) in seen:
                    continue
                seen.add((newer.id, older.id))
                compared += 1
                verdict = detect(newer.content, older.content)
                if not verdict.conflict and judge is not None and not message and shares_subject(newer.content, older.content):
                    try:
                        verdict = judge.judge(newer.content, older.content)
                    except Exception as exc:  # any failure of an optional judge: fall back, never lose the pass
                        message = f"the {judge.name} judge failed ({exc}); the rest of the pass used the rules alone"
                if verdict.conflict:
                    pending.append((newer, older, verdict))
        found: list[int] = []
        with self.ctx.write() as conn:
            for newer, older, verdict in pending:
                if not (self._still_latest(conn, newer.id) and self._still_latest(conn, older.id)):
                    continue
                conflict_id = record_conflict(self.memories, conn, newer, older, verdict, now)
                if conflict_id is not None:
                    found.append(conflict_id)
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (_SCAN_KEY, str(through)))
        return ScanReport(len(ids), compared, found, message)

    @staticmethod
    def _still_latest(conn: db.Connection, memory_id: int) -> bool:
        row = conn.execute("SELECT is_latest FROM memories WHERE id = ?", (memory_id,)).fetchone()
        return bool(row and row[0])

    # resolution -------------------------------------------------------------------------------------------------

    def resolve(
        self, conflict_id: int, action: str = "keep_trusted", *, text: str | None = None, forget_after_days: float | None = None, now: datetime
    ) -> Conflict:
        """Resolve an open conflict; nothing is deleted.

        ``keep_newer`` / ``keep_older`` / ``keep_trusted`` (the default: the higher ``source_confidence``, then the
        newer) lower the other side's ``source_confidence`` (times :data:`DEMOTION`), so search ranks it lower;
        ``merge`` writes ``text`` as a new fact (origin user) that cites both memories (``derives``) and lowers
        both; ``not_conflict`` dismisses the pair and removes its ``contradicts`` link. With
        ``forget_after_days`` the losing side(s) get that TTL and the tag :data:`SUPERSEDED_TAG`, and the sweep's
        ``conflict`` rule forgets them when it runs out (the reason recorded). Audited; :meth:`undo` reverses it.
        """
        if action not in ACTIONS:
            raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
        fact_text = check_text(text, "text") if action == "merge" else None
        if action != "merge" and text is not None:
            raise InvalidInput("text is only for merge")
        ttl = check_ttl(forget_after_days)
        if ttl is not None and action == "not_conflict":
            raise InvalidInput("forget_after_days needs a losing side; not_conflict has none")
        conflict_id = check_id(conflict_id)
        ts = ts_from_dt(now)
        with self.ctx.write() as conn:
            c = self.get_in(conn, conflict_id)
            if c.status != "open":
                raise InvalidInput(f"conflict #{c.id} is {c.status} already; undo it first to decide again")
            newer, older = c.newer, c.older
            record: dict[str, Any] = {"action": action, "at": now.isoformat(), "confidence_before": {}, "fact": None, "ttl_before": {}, "tagged": []}
            losers: list[Memory] = []
            if action == "not_conflict":
                conn.execute("DELETE FROM relations WHERE src_id = ? AND dst_id = ? AND kind = 'contradicts'", (newer.id, older.id))
                status = "dismissed"
            else:
                status = "resolved"
                if action == "merge":
                    losers = [newer, older]
                else:
                    trusted_newer = (newer.source_confidence, newer.created_at, newer.id) >= (older.source_confidence, older.created_at, older.id)
                    winner = newer if action == "keep_newer" or (action == "keep_trusted" and trusted_newer) else older
                    losers = [older if winner is newer else newer]
                    record["winner"] = winner.id
                record["losers"] = [m.id for m in losers]
                for m in losers:
                    record["confidence_before"][str(m.id)] = m.source_confidence
                    self.memories.set_source_confidence(conn, m.id, round(m.source_confidence * DEMOTION, 4))
                if fact_text is not None:
                    fact_id = self.memories.insert_memory(
                        conn, content=fact_text, title=fact_text[:300], type_=newer.type, layer="semantic", project=newer.project or older.project,
                        session_id=None, tags=tuple(dict.fromkeys([*newer.tags, *older.tags]))[:50], importance=max(newer.importance, older.importance),
                        ttl_days=None, metadata={"resolves_conflict": c.id}, source_ref=None, origin="user", pinned=False, detect=False, now=now, audit=False,
                    )  # fmt: skip
                    for m in (newer, older):
                        self.memories.link(conn, fact_id, m.id, "derives", ts)
                    record["fact"] = fact_id
                if ttl is not None:
                    for m in losers:
                        record["ttl_before"][str(m.id)] = ttl_days_left(m, now)
                        if SUPERSEDED_TAG not in m.tags:
                            record["tagged"].append(m.id)
                        self.memories.update(m.id, ttl_days=ttl, tags=[*m.tags, SUPERSEDED_TAG], now=now)
            conn.execute("UPDATE conflicts SET status = ?, resolution = ? WHERE id = ?", (status, to_json(record), c.id))
            details = {
                "step": "resolved" if status == "resolved" else "dismissed", "conflict": c.id, "action": action, "winner": record.get("winner"),
                "losers": record.get("losers", []), "fact": record["fact"], "forget_after_days": ttl,
            }  # fmt: skip
            targets = [newer.id, older.id] + ([record["fact"]] if record["fact"] else [])
            self.ctx.audit(conn, "conflict", targets, details, now)
            return self.get_in(conn, c.id)

    def undo(self, conflict_id: int, *, now: datetime) -> Conflict:
        """Reverse a resolution or dismissal: the confidences, TTLs and tags as they were, the ``contradicts`` link
        back, the conflict open again; a merged fact is forgotten (the erasure audited with its reason). Audited."""
        conflict_id = check_id(conflict_id)
        ts = ts_from_dt(now)
        fact_id: int | None = None
        with self.ctx.write() as conn:
            c = self.get_in(conn, conflict_id)
            if c.status == "open" or c.resolution is None:
                raise InvalidInput(f"conflict #{c.id} is open: there is nothing to undo")
            record = c.resolution
            for key, before in record.get("confidence_before", {}).items():
                if _exists(conn, int(key)):
                    self.memories.set_source_confidence(conn, int(key), float(before))
            for key, days_left in record.get("ttl_before", {}).items():
                memory_id = int(key)
                if not _exists(conn, memory_id):
                    continue
                m = self.memories.get_in(conn, memory_id)
                tags = [t for t in m.tags if t != SUPERSEDED_TAG] if memory_id in record.get("tagged", []) else list(m.tags)
                if days_left is None:
                    self.memories.update(memory_id, tags=tags, clear_ttl=True, now=now)
                else:
                    self.memories.update(memory_id, tags=tags, ttl_days=max(float(days_left), 1e-6), now=now)
            if c.status == "dismissed":
                self.memories.link(conn, c.newer.id, c.older.id, "contradicts", ts, c.score)
            fact_id = record.get("fact")
            conn.execute("UPDATE conflicts SET status = 'open', resolution = NULL WHERE id = ?", (c.id,))
            self.ctx.audit(conn, "conflict", [c.newer.id, c.older.id], {"step": "undone", "conflict": c.id, "action": record.get("action"), "fact": fact_id}, now)
        if fact_id is not None and self.store.exists(fact_id):
            self.store.forget(fact_id, reason=f"conflict #{conflict_id} resolution undone", now=now)
        return self.get(conflict_id)


def ttl_days_left(memory: Memory, now: datetime) -> float | None:
    """Days until the memory's TTL runs out (None without one)."""
    if memory.forget_after is None:
        return None
    return (memory.forget_after - now).total_seconds() / 86400.0


def _exists(conn: db.Connection, memory_id: int) -> bool:
    return conn.execute("SELECT 1 FROM memories WHERE id = ?", (memory_id,)).fetchone() is not None


def _meta(conn: db.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return str(row[0]) if row else None


def differing_words(conflict: Conflict) -> tuple[set[str], set[str]]:
    """Lower-cased words to highlight on the newer and the older side (the differing words and values)."""
    ev = conflict.evidence

    def words(items: Iterable[str]) -> set[str]:
        return {w.lower() for item in items for w in re.findall(r"[\w.:%$€£'-]+", item)}

    return words([*ev.newer_words, *ev.newer_values]), words([*ev.older_words, *ev.older_values])


__all__: Sequence[str] = (
    "ACTIONS",
    "CANDIDATES",
    "DEMOTION",
    "OPPOSITES",
    "SIGNAL_WEIGHTS",
    "STATUSES",
    "SUPERSEDED_TAG",
    "Conflict",
    "ConflictJudge",
    "ConflictService",
    "Evidence",
    "LLMJudge",
    "RuleJudge",
    "ScanReport",
    "Value",
    "Verdict",
    "detect",
    "differing_words",
    "extract_values",
    "llm_judge_from_env",
    "record_conflict",
    "record_conflicts_of",
    "shares_subject",
)  # fmt: skip
