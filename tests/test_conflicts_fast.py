"""The conflict rules' shortcuts read texts exactly as the longer ways they replaced: the value patterns skipped in a
text without a digit, the stem cache, and the name check that reads the text before a word in place."""

from __future__ import annotations

import itertools
import random

from memlens import conflicts
from memlens.conflicts import _VALUE_PATTERNS, _at_sentence_start, _is_name, _normalise, _stem, _values, detect

WORDS = [
    "the", "API", "listens", "on", "port", "8080", "９０", "٣", "deploys", "Friday", "fridays", "at", "3pm", "15:00", "v2.1",
    "5", "minutes", "300", "s", "May", "1st", "2026-05-01", "$12", "PostgreSQL", "gpt4", "isn't", "no", "longer", "never",
    "Redis", "enabled", "disabled", "noon", "two", "approvals", "team's", "we", "moved", "to", "Tabs", "spaces", "x",
]  # fmt: skip
PUNCT = ["", "", "", ".", ",", ";", ":", "!", "?", "\n", ". ", " (", '"', "'"]


def _old_values(text: str) -> tuple[list[conflicts.Value], str]:
    """_values as it was: every pattern tried on every text."""
    found: list[conflicts.Value] = []
    rest = text
    for kind, pattern in _VALUE_PATTERNS:
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
    for word in conflicts._WORD.findall(lowered):
        if word in conflicts._WEEKDAYS or word.rstrip("s") in conflicts._WEEKDAYS:
            found.append(conflicts.Value("day", word.rstrip("s"), word))
        elif word in conflicts._NUMBER_WORDS:
            found.append(conflicts.Value("number", f"{conflicts._NUMBER_WORDS[word]:g}", word))
        elif word in conflicts._NAMED_TIMES:
            found.append(conflicts.Value("time", str(conflicts._NAMED_TIMES[word]), word))
        elif word in conflicts._MONTHS and len(word) > 3:
            found.append(conflicts.Value("month", str(conflicts._MONTHS[word]), word))
    return found, rest


def _old_is_name(surface: str, before: str) -> bool:
    tail = surface[1:]
    if tail != tail.lower() or (conflicts._HAS_DIGIT.search(surface) is not None and conflicts._HAS_LETTER.search(surface) is not None):
        return True
    if not surface[:1].isupper():
        return False
    return not _at_sentence_start(before) and surface.lower() not in conflicts.FILLER


def _texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) + rng.choice(PUNCT) for _ in range(rng.randint(1, 14))]
        if rng.random() < 0.3:  # no digit anywhere
            words = [w for w in words if not any(c.isdigit() for c in w)] or ["nothing"]
        out.append(" ".join(words))
    return out


def test_values_are_read_as_with_every_pattern_tried() -> None:
    for text in _texts(3000, 1):
        assert _values(text) == _old_values(text), text


def test_the_cached_stem_is_the_stem() -> None:
    for text in _texts(500, 2):
        for word in conflicts._WORD.findall(text.lower()):
            assert _stem(word) == _stem.__wrapped__(word)


def test_names_are_read_in_place_as_from_the_text_before() -> None:
    for text in _texts(2000, 3):
        for match in conflicts._WORD.finditer(text):
            assert _is_name(match.group(0), text, match.start()) == _old_is_name(match.group(0), text[: match.start()]), (text, match.group(0))


def test_detect_gives_the_same_verdicts_with_a_cold_or_warm_cache() -> None:
    texts = _texts(400, 4)
    conflicts._analyse.cache_clear()
    first = [detect(a, b) for a, b in itertools.pairwise(texts)]
    again = [detect(a, b) for a, b in itertools.pairwise(texts)]
    assert first == again
