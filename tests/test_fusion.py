"""Score-based fusion of bm25 and embeddings (issue 15, point 1): hybrid search never recalls less than bm25 on a
fixture whose relevant memories are known, ``fusion_alpha = 1`` is bm25's ranking exactly, ``Hit.explain()`` shows
each part, and queries and documents can be embedded with different prefixes and models."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime

import numpy as np
import numpy.typing as npt
import pytest

from memlens import MemoryStore
from memlens.config import SearchTuning, StoreSettings
from memlens.embeddings import EmbeddingClient, EmbeddingConfig, EmbeddingError

DIM = 256
#: What the fake model takes as meaning the same: one vector component per group, so paraphrases come close.
SYNONYMS = {
    "trek": "hiking", "hike": "hiking", "ramble": "hiking", "path": "trail", "automobile": "car", "vehicle": "car", "sedan": "car",
    "physician": "doctor", "medic": "doctor", "accident": "crash", "collision": "crash", "father": "dad",
    "kitten": "cat", "feline": "cat", "laptop": "computer", "notebook": "computer",
}  # fmt: skip
PREFIXES = ("query: ", "passage: ")
#: Words the fake model ignores, as trained models mostly do.
STOPWORDS = {"a", "an", "the", "is", "are", "was", "on", "in", "of", "for", "at", "to", "my", "her", "does", "did", "what", "where", "about"}


def fake_vector(text: str) -> list[float]:
    """A deterministic bag-of-words embedding: one hashed component per word (a plural's "s" dropped, stop words
    left out) after the synonym table; a known prefix is dropped first. Unrelated words may share a component."""
    for prefix in PREFIXES:
        text = text.removeprefix(prefix)
    vector = [0.0] * DIM
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in STOPWORDS:
            continue
        word = SYNONYMS.get(word, word).removesuffix("s")
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIM] += 1.0
    return vector


class FakeEmbedder(EmbeddingClient):
    """An :class:`EmbeddingClient` answering :func:`fake_vector` in process; it records what each batch sent."""

    def __init__(self, **config: str) -> None:
        super().__init__(EmbeddingConfig(base_url="http://127.0.0.1:9/v1", model="fake-embed", **config))
        self.sent: list[tuple[str, list[str]]] = []

    def _embed_batch(self, texts: list[str], model: str) -> npt.NDArray[np.float32]:
        self.sent.append((model, list(texts)))
        return np.asarray([fake_vector(t) for t in texts], dtype=np.float32)


MEMORIES = {
    "trail": "My favourite hiking trail is the ridge above the old lake, north of town past the quarry road and the mill",
    "trek": "A trek on a trail",
    "walk": "A trek along a path",
    "river": "Another ramble on the path by the river",
    "shoes": "New trail shoes arrived today",
    "car": "The automobile is parked in the garage",
    "carwash": "The car wash on Main street closes at six",
    "doctor": "Her physician said the knee will heal in six weeks",
    "dentist": "The dentist appointment moved to Thursday",
    "crash": "Dad had a collision on the motorway, nobody hurt",
    "report": "The incident report template lives in the wiki",
    "father": "My father collects old stamps from Portugal",
    "stamps": "Stamps for the letters are in the drawer",
    "laptop": "The notebook from work needs a new battery",
    "kitten": "The kitten sleeps on the sofa all afternoon",
    "pasta": "We had pasta for dinner",
    "meeting": "The meeting ran long again",
    "flowers": "Bought flowers for the kitchen table",
    "train": "The train was late this morning",
    "rain": "Rain all weekend, the garden is flooded",
}
#: Each query and the memories that answer it.
QUERIES = {
    "favourite hiking trail": {"trail"},
    "where is the car": {"car"},
    "what did the doctor say about the knee": {"doctor"},
    "dad's accident": {"crash"},
    "what does my dad collect": {"father"},
    "stamps": {"father", "stamps"},
    "computer battery": {"laptop"},
    "where does the cat sleep": {"kitten"},
    "dentist on Thursday": {"dentist"},
    "late train": {"train"},
}
KS = (1, 3, 5)


@pytest.fixture
def corpus(store: MemoryStore, t0: datetime) -> dict[str, int]:
    """The fixture's memories (no sessions: each is its own document), every one embedded."""
    ids = {key: store.remember(text, now=t0, supersede=False).id for key, text in MEMORIES.items()}
    assert store.embed_pending(FakeEmbedder(), now=t0) == len(MEMORIES)
    return ids


def recall(ranked: Sequence[int], gold: set[int], k: int) -> float:
    return len(gold.intersection(ranked[:k])) / len(gold)


def test_hybrid_recall_is_never_below_bm25(store: MemoryStore, t0: datetime, corpus: dict[str, int]):
    embedder = FakeEmbedder()
    totals = {(mode, k): 0.0 for mode in ("bm25", "hybrid") for k in KS}
    for query, keys in QUERIES.items():
        gold = {corpus[key] for key in keys}
        plain = [h.memory.id for h in store.search(query, limit=max(KS), now=t0)]
        hybrid_hits = store.search(query, limit=max(KS), embedder=embedder, now=t0)
        assert hybrid_hits and all(h.fused for h in hybrid_hits)
        hybrid = [h.memory.id for h in hybrid_hits]
        for k in KS:
            assert recall(hybrid, gold, k) >= recall(plain, gold, k), (query, k, plain, hybrid)
            totals["bm25", k] += recall(plain, gold, k)
            totals["hybrid", k] += recall(hybrid, gold, k)
    for k in KS:
        assert totals["hybrid", k] >= totals["bm25", k]
    # And the vectors pay: paraphrases bm25 cannot see ("car" for "automobile", "accident" for "collision").
    assert totals["hybrid", 3] > totals["bm25", 3]


def test_a_strong_bm25_hit_keeps_first_place_over_a_vector_favourite(store: MemoryStore, t0: datetime, corpus: dict[str, int]):
    """The failure of rank fusion: a short memory sharing one word with the query and close in vectors took first
    place from the memory matching every word, because each list had an equal vote."""
    hits = store.search("favourite hiking trail", limit=3, embedder=FakeEmbedder(), now=t0)
    assert hits[0].memory.id == corpus["trail"]
    trek = next(h for h in hits if h.memory.id == corpus["trek"])
    # Under RRF (k=60) trek won: 1/61 + 1/63 (vector rank 1, bm25 rank 3) against 1/61 + 1/64 for the trail.
    assert trek.vector_rank == 1 and hits[0].vector_rank is not None and hits[0].vector_rank >= 4


@pytest.mark.parametrize("limit", [1, 3, 10])
def test_alpha_one_is_bm25_exactly(store: MemoryStore, t0: datetime, corpus: dict[str, int], limit: int):
    store.configure({"search": {"fusion_alpha": 1.0}}, now=t0)
    embedder = FakeEmbedder()
    for query in QUERIES:
        plain = [(h.memory.id, h.score, h.relevance) for h in store.search(query, limit=limit, now=t0)]
        hybrid = store.search(query, limit=limit, embedder=embedder, now=t0)
        assert [(h.memory.id, h.score, h.relevance) for h in hybrid] == plain, query
        assert all(h.fusion is not None and h.fusion.cosine_share == 0.0 for h in hybrid)


def test_explain_shows_the_bm25_and_cosine_shares(store: MemoryStore, t0: datetime, corpus: dict[str, int]):
    hits = store.search("dad's accident", embedder=FakeEmbedder(), now=t0)
    crash = next(h for h in hits if h.memory.id == corpus["crash"])
    parts = crash.fusion
    assert parts is not None and parts.alpha == SearchTuning().fusion_alpha == 0.7
    assert parts.bm25_part == 1.0 and parts.cosine is not None and 0.0 <= parts.cosine_part <= 1.0
    assert parts.value == pytest.approx(0.7 * parts.bm25_part + 0.3 * parts.cosine_part)
    text = crash.explain()
    assert f"bm25 share {parts.bm25_share:.3f} = 0.70 x 1.000 of the best bm25" in text
    assert f"cosine share {parts.cosine_share:.3f} = 0.30 x {parts.cosine_part:.3f} (cosine {parts.cosine:.3f}" in text
    data = crash.to_dict()
    assert data["bm25_share"] == round(parts.bm25_share, 6) and data["cosine_share"] == round(parts.cosine_share, 6)
    # A memory only the vectors found: no bm25 share, and it says so.
    car = next(h for h in store.search("where is the car", embedder=FakeEmbedder(), now=t0) if h.memory.id == corpus["car"])
    assert car.bm25 == 0.0 and car.fusion is not None and car.fusion.bm25_share == 0.0 and car.fusion.cosine_share > 0.0


def test_alpha_weights_the_vectors(store: MemoryStore, t0: datetime, corpus: dict[str, int]):
    """At alpha 0 the ranking is the vectors' alone: the paraphrase bm25 misses comes first."""
    store.configure({"search": {"fusion_alpha": 0.0}}, now=t0)
    hits = store.search("where is the car", limit=3, embedder=FakeEmbedder(), now=t0)
    assert hits[0].memory.id == corpus["car"] and hits[0].vector_rank == 1


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_fusion_alpha_is_a_weight_between_0_and_1(bad: object):
    with pytest.raises(ValueError, match="fusion_alpha"):
        StoreSettings.from_dict({"search": {"fusion_alpha": bad}})
    assert StoreSettings.from_dict({"search": {"fusion_alpha": 0.5}}).search.fusion_alpha == 0.5


# --- prefixes and models for queries and documents ---------------------------------------------------------------


def test_queries_and_documents_get_their_own_prefix_and_model(store: MemoryStore, t0: datetime):
    embedder = FakeEmbedder(query_prefix="query: ", document_prefix="passage: ", query_model="fake-embed-query")
    car = store.remember("The automobile is parked in the garage", now=t0).id
    store.embed_pending(embedder, now=t0)
    assert embedder.sent == [("fake-embed", ["passage: The automobile is parked in the garage"])]
    assert store.vector_counts() == {"fake-embed": 1}  # stored under the document model: the query's is compared to it
    hits = store.search("where is my car", embedder=embedder, now=t0)
    assert embedder.sent[-1] == ("fake-embed-query", ["query: where is my car"])
    assert [h.memory.id for h in hits] == [car] and hits[0].fused


def test_without_prefixes_texts_go_out_as_they_are(store: MemoryStore, t0: datetime):
    embedder = FakeEmbedder()
    store.remember("The automobile is parked in the garage", now=t0)
    store.embed_pending(embedder, now=t0)
    store.search("where is my car", embedder=embedder, now=t0)
    assert embedder.sent == [("fake-embed", ["The automobile is parked in the garage"]), ("fake-embed", ["where is my car"])]


def test_prefixes_and_query_model_from_the_environment():
    env = {
        "MEMLENS_EMBED_BASE_URL": "http://localhost:1/v1",
        "MEMLENS_EMBED_MODEL": "intfloat/multilingual-e5-small",
        "MEMLENS_EMBED_QUERY_PREFIX": "query: ",
        "MEMLENS_EMBED_DOCUMENT_PREFIX": "passage: ",
    }
    config = EmbeddingConfig.from_env(env)
    assert config is not None
    assert (config.query_prefix, config.document_prefix, config.query_model) == ("query: ", "passage: ", None)
    config = EmbeddingConfig.from_env({**env, "MEMLENS_EMBED_QUERY_MODEL": " e5-query "})
    assert config is not None and config.query_model == "e5-query" and config.model == "intfloat/multilingual-e5-small"
    with pytest.raises(EmbeddingError, match="query model name is empty"):
        EmbeddingConfig(base_url="http://localhost:1/v1", model="m", query_model=" ")
