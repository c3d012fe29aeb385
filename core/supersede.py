"""Finding the memory a new one supersedes: exact, and without scanning the table.

The rule: among *latest* memories of the same layer (knowledge layers only) whose project is compatible (equal, or
either side has none), take the one with the highest word-set Jaccard similarity. Above the threshold it is
superseded; in (advisory, threshold] it is reported as "similar to".

Exactness without a scan (prefix filtering): if J(x, y) > t then |x ∩ y| > t·|x|, so y must contain at least one
of *any* ``|x| - o_min + 1`` tokens of x, where ``o_min`` is the smallest overlap that can pass. The similarity
index holds every token of every latest memory, so we may pick the rarest tokens of x (by the df counts kept in
``token_stats``) as that prefix: the candidates are exactly the memories holding one of them, and the real
Jaccard is then computed for each survivor of a cheap upper bound. The answer equals a full scan's.

Speed at a million: probing a few tokens past the prefix, and counting how many probed tokens each candidate
holds (numpy over the postings), bounds a candidate's similarity by (hits + unprobed tokens) / |x| before its row
is read, which discards nearly all of them; only the few left are looked up and compared.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memlens.text import jaccard, similarity_tokens, token_key

if TYPE_CHECKING:
    # Imported where it is used: observations (every agent hook) never reach find_best and should not pay for numpy.
    import numpy as np

    # A type only: callers hand over their connection, so this module needs nothing of the storage layer.
    from memlens.db import Connection

#: Layers whose memories are knowledge that can go stale; working observations and episodes are records of
#: events and are never superseded.
SUPERSEDING_LAYERS = ("semantic", "procedural")
_CHUNK = 500


@dataclass(frozen=True)
class Match:
    """The most similar latest memory to a text, with the token-level reasons."""

    memory_id: int
    similarity: float
    shared: tuple[str, ...]
    only_new: tuple[str, ...]
    only_old: tuple[str, ...]


def keys_text(tokens: Iterable[str]) -> str:
    """The space-separated, sorted token keys as stored in ``similarity_index`` (sorted so deletes replay it)."""
    return " ".join(sorted({token_key(t) for t in tokens}))


def index_latest(conn: Connection, memory_id: int, tokens: frozenset[str]) -> None:
    """Add a memory that just became latest to the supersede index and the token counts."""
    if not tokens:
        return
    text = keys_text(tokens)
    conn.execute("INSERT INTO similarity_index(rowid, keys) VALUES (?, ?)", (memory_id, text))
    conn.executemany(
        "INSERT INTO token_stats(key, df) VALUES (?, 1) ON CONFLICT(key) DO UPDATE SET df = df + 1",
        [(k,) for k in text.split()],
    )


def index_latest_many(conn: Connection, rows: Sequence[tuple[int, frozenset[str]]]) -> None:
    """Bulk form of :func:`index_latest`: one counter update per distinct key for the whole batch."""
    counts: Counter[str] = Counter()
    payload = []
    for memory_id, tokens in rows:
        if not tokens:
            continue
        text = keys_text(tokens)
        payload.append((memory_id, text))
        counts.update(text.split())
    conn.executemany("INSERT INTO similarity_index(rowid, keys) VALUES (?, ?)", payload)
    conn.executemany(
        "INSERT INTO token_stats(key, df) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET df = df + excluded.df",
        list(counts.items()),
    )


def unindex_latest(conn: Connection, memory_id: int, tokens: frozenset[str]) -> None:
    """Remove a memory that stopped being latest (superseded, forgotten) from the index and the counts."""
    if not tokens:
        return
    text = keys_text(tokens)
    conn.execute("INSERT INTO similarity_index(similarity_index, rowid, keys) VALUES ('delete', ?, ?)", (memory_id, text))
    keys = [(k,) for k in text.split()]
    conn.executemany("UPDATE token_stats SET df = df - 1 WHERE key = ?", keys)
    conn.executemany("DELETE FROM token_stats WHERE key = ? AND df <= 0", keys)


def _min_hits(size: int, rest: int, per_hit: int, threshold: float) -> int | None:
    """Fewest probed-key hits with which a memory could still pass: min(h * per_hit + rest, size) / size > threshold
    (the same float comparison the filter makes); None when no count can."""
    for hits in range(1, size + 1):
        if min(hits * per_hit + rest, size) / size > threshold:
            return hits
    return None


def _min_overlap(size: int, threshold: float) -> int:
    """Smallest overlap with a set of ``size`` tokens that could give Jaccard > threshold (conservative)."""
    return max(1, math.ceil(threshold * size - 1e-9))


def compatible_projects(a: str | None, b: str | None) -> bool:
    """Two memories may supersede each other unless both have a project and the projects differ."""
    return a is None or b is None or a == b


def find_best(
    conn: Connection,
    tokens: frozenset[str],
    *,
    layer: str,
    project: str | None,
    probe_threshold: float,
    now: float,
    exclude: Iterable[int] = (),
) -> Match | None:
    """The latest memory most similar to ``tokens`` with similarity > ``probe_threshold``, or None.

    Ties go to the most recent memory (the higher id). Exact: equal to :func:`brute_force_best`.
    """
    if layer not in SUPERSEDING_LAYERS or not tokens:
        return None
    excluded = set(exclude)
    size = len(tokens)
    prefix_len = size - _min_overlap(size, probe_threshold) + 1
    by_key: dict[str, list[str]] = {}
    for tok in tokens:
        by_key.setdefault(token_key(tok), []).append(tok)
    keys = list(by_key)
    df: dict[str, int] = {}
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i : i + _CHUNK]
        marks = ",".join("?" * len(chunk))
        df.update(conn.execute(f"SELECT key, df FROM token_stats WHERE key IN ({marks})", chunk).fetchall())
    # The rarest tokens first; a token nobody else holds costs nothing to probe.
    ordered = sorted(tokens, key=lambda t: (df.get(token_key(t), 0), t))
    # A key may stand for more than one token (a hash collision): each hit counts as that many shared tokens.
    per_hit = max(len(toks) for toks in by_key.values())
    import numpy as np

    postings: list[np.ndarray] = []
    probed: set[str] = set()

    def probe(token: str) -> None:
        key = token_key(token)
        if key in probed or df.get(key, 0) == 0:
            return
        probed.add(key)
        # One string per key, parsed by numpy: a million-row store returns tens of thousands of ids per call.
        (joined,) = conn.execute("SELECT group_concat(rowid) FROM similarity_index WHERE similarity_index MATCH ?", (key,)).fetchone()
        if joined:
            postings.append(np.fromstring(joined, dtype=np.int64, sep=","))

    def counted() -> tuple[np.ndarray, np.ndarray]:
        """Each id found, and how many probed keys found it."""
        if not postings:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        found = np.concatenate(postings)
        found.sort(kind="stable")  # the postings are sorted runs: a merge sort is several times faster here
        starts = np.flatnonzero(np.concatenate(([True], found[1:] != found[:-1])))
        return found[starts], np.diff(np.append(starts, len(found)))

    for tok in ordered[:prefix_len]:
        probe(tok)
    ids, counts = counted()
    # Probing past the prefix tightens the bound below enough to drop most candidates before their rows are read:
    # with `probed_count` tokens probed, a memory found h times shares at most h * per_hit + (size - probed_count)
    # tokens, and its similarity is at most that over `size` (when it holds nothing else). Each extra token costs
    # reading its postings (~df ids); each candidate kept costs a row lookup (ten to thirty times dearer). Extend while
    # the next token is cheaper than the lookups it can save.
    probed_count = prefix_len
    while probed_count < size and len(ids):
        least = _min_hits(size, size - probed_count, per_hit, probe_threshold)
        kept = int(np.count_nonzero(counts >= least)) if least is not None else 0
        if df.get(token_key(ordered[probed_count]), 0) >= 16 * kept:
            break
        probe(ordered[probed_count])
        probed_count += 1
        ids, counts = counted()
    rest = size - probed_count
    least = _min_hits(size, rest, per_hit, probe_threshold)
    if least is None or not len(ids):
        return None
    # Exact without the row: similarity <= overlap / size (the other memory holds at least the overlap).
    mask = counts >= least
    hits = {mid: h for mid, h in zip(ids[mask].tolist(), counts[mask].tolist(), strict=True) if mid not in excluded}
    candidate_ids = sorted(hits)
    if not candidate_ids:
        return None
    best: Match | None = None
    for i in range(0, len(candidate_ids), _CHUNK):
        id_chunk = candidate_ids[i : i + _CHUNK]
        marks = ",".join("?" * len(id_chunk))
        rows = conn.execute(
            f"SELECT id, layer, project, token_count, forget_after FROM memories WHERE id IN ({marks}) AND is_latest = 1",
            id_chunk,
        ).fetchall()
        survivors = []
        for mid, m_layer, m_project, m_size, forget_after in rows:
            if m_layer != layer or not compatible_projects(project, m_project):
                continue
            if forget_after is not None and forget_after <= now:
                continue
            # Upper bound on the overlap: prefix hits (a key may stand for more than one token) plus the rest.
            bound = min(hits[mid] * per_hit + rest, size, m_size)
            union = size + m_size - bound
            if union <= 0 or bound / union <= probe_threshold:
                continue
            if best is not None and bound / union < best.similarity:
                continue
            survivors.append(mid)
        if not survivors:
            continue
        marks = ",".join("?" * len(survivors))
        for mid, content in conn.execute(f"SELECT id, content FROM memories WHERE id IN ({marks})", survivors):
            other = similarity_tokens(content)
            sim = jaccard(tokens, other)
            if sim <= probe_threshold:
                continue
            if best is None or (sim, mid) > (best.similarity, best.memory_id):
                best = Match(
                    memory_id=mid,
                    similarity=sim,
                    shared=tuple(sorted(tokens & other)),
                    only_new=tuple(sorted(tokens - other)),
                    only_old=tuple(sorted(other - tokens)),
                )
    return best


def brute_force_best(
    conn: Connection,
    tokens: frozenset[str],
    *,
    layer: str,
    project: str | None,
    probe_threshold: float,
    now: float,
) -> Match | None:
    """The same answer as :func:`find_best` by reading every latest memory (the baseline, and the test oracle)."""
    if layer not in SUPERSEDING_LAYERS or not tokens:
        return None
    best: Match | None = None
    for mid, m_project, content, forget_after in conn.execute(
        "SELECT id, project, content, forget_after FROM memories WHERE is_latest = 1 AND layer = ?", (layer,)
    ):
        if not compatible_projects(project, m_project) or (forget_after is not None and forget_after <= now):
            continue
        other = similarity_tokens(content)
        sim = jaccard(tokens, other)
        if sim > probe_threshold and (best is None or (sim, mid) > (best.similarity, best.memory_id)):
            best = Match(mid, sim, tuple(sorted(tokens & other)), tuple(sorted(tokens - other)), tuple(sorted(other - tokens)))
    return best
