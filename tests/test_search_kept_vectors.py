"""Search with embeddings keeps a store's vectors in memory between searches (read once, not at every search) and
answers exactly as reading them from the store does: the same hits, scores and fusion parts, with filters, after
another connection adds, forgets or re-embeds memories, and when there are too many vectors to keep."""

from __future__ import annotations

import random
from datetime import datetime, timezone

import pytest
from test_fusion import FakeEmbedder

from memlens import MemoryStore
from memlens.storage import search as search_module

NOW = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
WORDS = ["hiking", "trail", "lake", "car", "doctor", "crash", "dad", "cat", "computer", "ridge", "quarry", "road", "mill", "garden", "coffee", "train", "river", "city"]
QUERIES = ["hiking near the lake", "doctor after the crash", "my dad and the cat", "coffee in the city", "train by the river", "computer"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))


def _answers(store: MemoryStore, embedder: FakeEmbedder, **filters: object) -> list[list[tuple[int, float, str]]]:
    return [[(hit.memory.id, hit.score, hit.explain()) for hit in store.search(q, limit=10, embedder=embedder, now=NOW, **filters)] for q in QUERIES]


def _streamed(monkeypatch: pytest.MonkeyPatch, store: MemoryStore, embedder: FakeEmbedder, **filters: object) -> list[list[tuple[int, float, str]]]:
    """The answers with nothing kept: every vector read from the store (the path for stores too large to keep)."""
    store.finder.forget_kept()
    with monkeypatch.context() as patch:
        patch.setattr(search_module, "_KEPT_VECTOR_FLOATS", 0)
        answers = _answers(store, embedder, **filters)
    store.finder.forget_kept()
    return answers


@pytest.fixture()
def store(tmp_path):
    rng = random.Random(5)
    with MemoryStore.open(tmp_path / "kept.db", actor="test") as store:
        for i in range(300):
            store.remember(_text(rng), layer="semantic" if i % 3 else "working", project="alpha" if i % 2 else None, supersede=False, now=NOW)
        store.embed_pending(FakeEmbedder(), now=NOW)
        yield store


def test_kept_vectors_answer_as_reading_them_does(monkeypatch, store):
    embedder = FakeEmbedder()
    kept = _answers(store, embedder)
    assert store.finder._vectors, "the vectors were kept after the first search"
    assert _answers(store, embedder) == kept
    assert _streamed(monkeypatch, store, embedder) == kept
    for filters in ({"layers": ["semantic"]}, {"project": "alpha"}, {"layers": ["working"], "project": "alpha"}):
        assert _answers(store, embedder, **filters) == _streamed(monkeypatch, store, embedder, **filters)


def test_kept_vectors_follow_another_connections_writes(monkeypatch, store):
    embedder = FakeEmbedder()
    before = _answers(store, embedder)
    with MemoryStore.open(store.path, actor="agent") as other:
        new = other.remember("hiking hiking trail lake ridge", layer="semantic", supersede=False, now=NOW)
        other.embed_pending(FakeEmbedder(), now=NOW)
        gone = before[0][0][0]
        other.forget(gone, now=NOW)
    after = _answers(store, embedder)
    assert after != before
    ids = [memory_id for memory_id, _score, _why in after[0]]
    assert new.id in ids and gone not in ids
    assert after == _streamed(monkeypatch, store, embedder)


def test_a_store_with_too_many_vectors_to_keep_reads_them_each_time(monkeypatch, store):
    embedder = FakeEmbedder()
    monkeypatch.setattr(search_module, "_KEPT_VECTOR_FLOATS", 10)
    store.finder.forget_kept()
    answers = _answers(store, embedder)
    assert all(value is None for value in store.finder._vectors.values())
    monkeypatch.undo()
    store.finder.forget_kept()
    assert _answers(store, embedder) == answers
