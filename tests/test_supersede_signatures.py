"""What find_best's shortcuts over the in-memory postings promise (memlens.supersede_postings): a signature never
admits fewer of a text's keys than the memory holds, the packed holders are the holders with their key counts, and
find_best with them answers exactly what the brute-force scan answers, from the snapshot and from the change log."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np

from memlens import MemoryStore
from memlens import supersede_postings as sp
from memlens.supersede import brute_force_best, find_best
from memlens.supersede_postings import key_number
from memlens.text import similarity_tokens, token_key

VOCAB = [f"term{i:03d}" for i in range(400)]


def _keys(text: str) -> list[int]:
    return sorted({key_number(token_key(t)) for t in similarity_tokens(text)})


def _fill(store: MemoryStore, rng: random.Random, t0, count: int, start: int = 0) -> None:
    for i in range(count):
        words = rng.sample(VOCAB, rng.randint(3, 60))
        store.remember(" ".join(words), project=rng.choice([None, "a"]), supersede=False, now=t0 + timedelta(minutes=start + i))


def _check_postings(store: MemoryStore, rng: random.Random) -> None:
    postings = store.ctx.postings
    postings.sync(store.conn)
    rows = store.conn.execute("SELECT id, content FROM memories WHERE is_latest = 1").fetchall()
    held = {mid: set(_keys(content)) for mid, content in rows}
    ids = np.array(sorted(held), dtype=np.int64)
    for _ in range(30):
        probe = [key_number(token_key(w)) for w in rng.sample(VOCAB, rng.randint(1, 40))]
        probe += probe[: rng.randint(0, 3)]  # a key repeated counts each time
        admitted = postings.signature_hits(ids, np.array(probe, dtype=np.int64))
        for mid, count in zip(ids.tolist(), admitted.tolist(), strict=True):
            assert count >= sum(k in held[mid] for k in probe)
    for mid in ids.tolist():
        own = np.array(sorted(held[mid]), dtype=np.int64)
        assert postings.signature_hits(np.array([mid]), own).tolist() == [len(own)]
    for key in {k for keys in held.values() for k in keys}:
        plain = postings.holders(key).astype(np.int64)
        packed_ids, packed_counts = sp.unpack(postings.packed_holders(key))
        assert packed_ids.tolist() == plain.tolist()
        assert packed_counts.tolist() == np.minimum(postings.key_counts(plain), sp.PACKED_KEY_COUNT_MAX).tolist()


def test_signatures_and_packed_holders_from_the_snapshot_and_the_change_log(db_path, t0):
    rng = random.Random(4)
    with MemoryStore.open(db_path) as store:
        _fill(store, rng, t0, 120)
        _check_postings(store, rng)  # built from the index
        _fill(store, rng, t0, 40, start=200)
        assert store.ctx.postings.stats()["delta"] > 0
        _check_postings(store, rng)  # memories that joined since


def test_a_long_memory_key_count_is_capped_in_the_packed_holders(db_path, t0):
    # Over 255 keys: the packed count is capped (a smaller k only loosens the bound), and find_best stays exact.
    words = [f"long{i:03d}" for i in range(300)]
    with MemoryStore.open(db_path) as store:
        store.remember(" ".join(words), supersede=False, now=t0)
        store.remember(" ".join(words[:200]), supersede=False, now=t0 + timedelta(minutes=1))
        postings = store.ctx.postings
        postings.sync(store.conn)
        _, counts = sp.unpack(postings.packed_holders(key_number(token_key(words[0]))))
        assert counts.tolist() == [sp.PACKED_KEY_COUNT_MAX, 200]
        now = (t0 + timedelta(hours=1)).timestamp()
        for cut in (120, 200, 260, 300):
            tokens = similarity_tokens(" ".join(words[:cut]))
            fast = find_best(store.conn, tokens, layer="semantic", project=None, probe_threshold=0.4, now=now, postings=postings)
            assert fast == brute_force_best(store.conn, tokens, layer="semantic", project=None, probe_threshold=0.4, now=now)


def test_popcount_without_numpy_2_counts_the_same(monkeypatch):
    words = np.random.default_rng(1).integers(0, 2**63, size=1000, dtype=np.int64).astype(np.uint64)
    expected = [bin(int(w)).count("1") for w in words]
    assert sp._popcount(words).tolist() == expected
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    assert sp._popcount(words).tolist() == expected


def test_find_best_with_signatures_equals_brute_force_on_many_sizes(db_path, t0):
    rng = random.Random(9)
    with MemoryStore.open(db_path) as store:
        _fill(store, rng, t0, 150)
        texts = [c for (c,) in store.conn.execute("SELECT content FROM memories")]
        now = (t0 + timedelta(days=1)).timestamp()
        for _ in range(60):
            base = rng.choice(texts).split()
            words = [w if rng.random() < rng.choice([0.5, 0.7, 0.9]) else rng.choice(VOCAB) for w in base]
            tokens = similarity_tokens(" ".join(words))
            for threshold in (0.4, 0.55, 0.7):
                for project in (None, "a"):
                    fast = find_best(store.conn, tokens, layer="semantic", project=project, probe_threshold=threshold, now=now, postings=store.ctx.postings)
                    assert fast == brute_force_best(store.conn, tokens, layer="semantic", project=project, probe_threshold=threshold, now=now)
