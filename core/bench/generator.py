"""Deterministic synthetic memories for the benchmarks: the same seed and size always give the same texts.

The texts imitate what agents remember: ~200-character sentences whose words follow a Zipf law (a few function
words everywhere, a long tail of rare names and identifiers), a project on most memories, a mix of layers, and
some near-duplicates of earlier memories (the case supersede exists for). Queries and supersede probes are drawn
from the same distribution, so they hit the store the way real ones would.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np

from memlens.text import STOPWORDS

#: Every generated store starts here; memories are spread over the year before it.
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
#: Length the texts aim at (characters).
TEXT_CHARS = 200
VOCABULARY_SIZE = 60_000
PROJECTS = 24

# The head of the Zipf curve: real English function and common words, so FTS5 and supersede see the common
# tokens real text has ("the", "and", "with" are similarity tokens: they are longer than two characters).
_COMMON = """the of and to in is for on that with as it by this be are from at or an use was run not but
all new when file test user data api build error config should always never project code can has uses server
need set default value before after each only via into then make sure keep deploy branch main release version
local remote cache update check fix bug issue request response token service log path type""".split()  # noqa: SIM905
_ONSETS = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "cl",
           "dr", "fl", "gr", "pl", "pr", "sk", "sl", "sp", "st", "tr", "ch", "sh", "th", "qu"]
_NUCLEI = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "x", "nd", "rk", "st"]

# Knowledge and episodes only: working observations fade within days, so a store full of old ones would have a
# tenth of itself due at the next sweep; the benchmark wants 1% due, which the TTLs below give.
LAYER_MIX = (("semantic", "fact", 0.6), ("semantic", "preference", 0.1), ("semantic", "decision", 0.1),
             ("procedural", "workflow", 0.15), ("episodic", "summary", 0.05))
#: Share of memories with a TTL; every TTL ends between one and sixty days after :data:`EPOCH`.
TTL_SHARE = 0.01


@dataclass(frozen=True)
class GeneratedMemory:
    """One generated memory, in the shape :meth:`memlens.store.MemoryStore.remember_many` takes."""

    content: str
    layer: str
    type: str
    project: str | None
    created_at: datetime
    ttl_days: float | None

    def record(self) -> dict[str, object]:
        """The record for ``remember_many``."""
        out: dict[str, object] = {"content": self.content, "layer": self.layer, "type": self.type,
                                  "project": self.project, "created_at": self.created_at}
        if self.ttl_days is not None:
            out["ttl_days"] = self.ttl_days
        return out


class Generator:
    """Texts, memories, queries and supersede probes, all determined by ``seed``."""

    def __init__(self, seed: int = 7) -> None:
        self.seed = seed
        rng = random.Random(seed)
        words: list[str] = list(_COMMON)
        seen = set(words)
        while len(words) < VOCABULARY_SIZE:
            word = "".join(rng.choice(_ONSETS) + rng.choice(_NUCLEI) + rng.choice(_CODAS) for _ in range(rng.choice((1, 2, 2, 2, 3))))
            if len(word) > 2 and word not in seen:
                seen.add(word)
                words.append(word)
        self.words = words
        ranks = np.arange(1, len(words) + 1, dtype=np.float64)
        weights = 1.0 / ranks**1.05
        self._cdf = np.cumsum(weights / weights.sum())
        self.projects = [f"proj-{self.words[200 + i]}" for i in range(PROJECTS)]

    def _word_ids(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self._cdf, rng.random(n)), len(self.words) - 1)

    def _sentence(self, rng: np.random.Generator, word_ids: np.ndarray, pos: int) -> tuple[str, int]:
        parts: list[str] = []
        length = 0
        target = TEXT_CHARS - 20 + int(rng.integers(0, 41))
        while length < target:
            if pos >= len(word_ids):
                word_ids = self._word_ids(rng, 4096)
                pos = 0
            word = self.words[word_ids[pos]]
            pos += 1
            parts.append(word)
            length += len(word) + 1
        parts[0] = parts[0].capitalize()
        return " ".join(parts) + ".", pos

    def memories(self, count: int) -> Iterator[GeneratedMemory]:
        """``count`` memories, oldest first; about 5% are near-duplicates of an earlier one, and 1% carry a TTL
        that ends between one and sixty days after :data:`EPOCH` (so a sweep then finds 1% due)."""
        rng = np.random.default_rng(self.seed)
        word_ids = self._word_ids(rng, 1 << 16)
        pos = 0
        recent: list[str] = []
        cum = np.cumsum([w for _, _, w in LAYER_MIX])
        span = 365 * 86400
        for i in range(count):
            roll = rng.random()
            if recent and roll < 0.05:
                text = self.edit(recent[int(rng.integers(0, len(recent)))], rng)
            else:
                text, pos = self._sentence(rng, word_ids, pos)
                if pos >= len(word_ids):
                    word_ids, pos = self._word_ids(rng, 1 << 16), 0
            if len(recent) < 5000:
                recent.append(text)
            else:
                recent[int(rng.integers(0, 5000))] = text
            layer, type_, _ = LAYER_MIX[int(np.searchsorted(cum, rng.random() * cum[-1]))]
            project = None if rng.random() < 0.15 else self.projects[int(rng.integers(0, len(self.projects)))]
            created = EPOCH - timedelta(seconds=span) + timedelta(seconds=span * (i + 0.5) / max(count, 1))
            ttl = (EPOCH - created) / timedelta(days=1) + float(rng.uniform(1, 60)) if rng.random() < TTL_SHARE else None
            yield GeneratedMemory(text, layer, type_, project, created, ttl)

    def edit(self, text: str, rng: np.random.Generator) -> str:
        """A near-duplicate of ``text``: one to four words replaced, dropped or added."""
        words = text.rstrip(".").split()
        for _ in range(int(rng.integers(1, 5))):
            op = rng.random()
            where = int(rng.integers(0, len(words)))
            new = self.words[int(self._word_ids(rng, 1)[0])]
            if op < 0.5:
                words[where] = new
            elif op < 0.75 and len(words) > 3:
                words.pop(where)
            else:
                words.insert(where, new)
        return " ".join(words) + "."

    def fresh_texts(self, count: int, salt: int = 1) -> list[str]:
        """New texts from the same distribution as the store's (not in it)."""
        rng = np.random.default_rng([self.seed, salt])
        word_ids = self._word_ids(rng, 1 << 14)
        pos = 0
        out = []
        for _ in range(count):
            text, pos = self._sentence(rng, word_ids, pos)
            out.append(text)
        return out

    def queries(self, texts: list[str], count: int, salt: int = 2) -> list[str]:
        """Search queries of 2 to 4 content words (no stop words, as people type them): half taken from stored
        texts (they find that memory and others), half drawn from the vocabulary's distribution."""
        rng = np.random.default_rng([self.seed, salt])
        out = []
        for i in range(count):
            n = int(rng.integers(2, 5))
            if i % 2 == 0 and texts:
                words = [w for w in texts[int(rng.integers(0, len(texts)))].rstrip(".").lower().split() if w not in STOPWORDS]
                picks = rng.choice(len(words), size=min(n, len(words)), replace=False)
                out.append(" ".join(words[j] for j in sorted(picks)))
            else:
                drawn: list[str] = []
                while len(drawn) < n:
                    word = self.words[int(self._word_ids(rng, 1)[0])]
                    if word not in STOPWORDS:
                        drawn.append(word)
                out.append(" ".join(drawn))
        return out
