"""Finding the memory a new one supersedes: exact, and without scanning the table.

The rule: among *latest* memories of the same layer (knowledge layers only) whose project is compatible (equal, or
either side has none), take the one with the highest word-set Jaccard similarity. Above the threshold it is
superseded; in (advisory, threshold] it is reported as "similar to".

Exactness without a scan (prefix filtering): if J(x, y) > t then |x ∩ y| > t·|x|, so y must contain at least one
of *any* ``|x| - o_min + 1`` tokens of x, where ``o_min`` is the smallest overlap that can pass. The similarity
index holds every token of every latest memory, so we may pick the rarest tokens of x (by how many memories hold
each, :meth:`memlens.supersede_postings.SimilarityPostings.doc_frequencies`) as that prefix: the candidates are
exactly the memories holding one of them, and the real Jaccard is then computed for each survivor of a cheap upper
bound. The answer equals a full scan's. Any prefix would be exact; the rarest one is merely the cheapest.

Speed at a million: the postings are read from a copy of the index held in memory
(:class:`memlens.supersede_postings.SimilarityPostings`, one per open store, checked against the store's change log
on every call so that writes by other connections and processes, and rollbacks, are seen; see that module for the
design). Probing a few tokens past the prefix, and counting how many probed tokens each candidate holds (numpy over
the postings), bounds a candidate's similarity by (hits + unprobed tokens) / |x| before its row is read, which
discards nearly all of them; only the few left are looked up and compared.

Writers: whatever makes a memory latest or stops it being latest calls :func:`index_latest`,
:func:`index_latest_many` (bulk, e.g. an import, also in a deferred pass after the rows are inserted),
:func:`unindex_latest` or :func:`unindex_latest_many` (bulk, a forget of many), inside the same transaction; they
keep the FTS5 index and the change log.

How many memories hold a key is not kept in a table of counts: until schema 12 a ``token_stats`` table held one
counter per key, and updating the ~40 counters of a new memory, scattered over that table's b-tree by the keys'
hashes, wrote 22 of the 53 pages a remember at a million memories commits (README, footnotes 12 and 13). Exact
counts come from the in-memory index (find_best, the conflict rules, the sweep's near-duplicate check); a reader
that only needs to know whether a word is rare (search's second round) counts in this index up to a cap
(:func:`holder_counts`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memlens.postgres import is_postgres
from memlens.text import jaccard, similarity_tokens, token_key

if TYPE_CHECKING:
    # Imported where it is used: observations (every agent hook) never reach find_best and should not pay for numpy.
    import numpy as np

    # A type only: callers hand over their connection, so this module needs nothing of the storage layer.
    from memlens.db import Connection
    from memlens.supersede_postings import SimilarityPostings

#: Layers whose memories are knowledge that can go stale; working observations and episodes are records of
#: events and are never superseded.
SUPERSEDING_LAYERS = ("semantic", "procedural")
_CHUNK = 500
#: Rows of ``similarity_changes`` kept; older ones are pruned now and then (a reader that far behind rebuilds).
CHANGES_KEPT = 100_000
#: One index_latest_many call with at least this many memories logs a single "rebuild" row instead of one each.
BULK_RESET = 10_000
_PRUNE_EVERY = 1024


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


def log_changes(conn: Connection, memory_ids: Sequence[int], latest: bool) -> None:
    """Record in ``similarity_changes``, inside the caller's transaction, that these memories joined (``latest``)
    or left the supersede index, so that every in-memory copy of it catches up (see memlens.supersede_postings)."""
    if not memory_ids:
        return
    rows = [(None, int(latest))] if len(memory_ids) >= BULK_RESET else [(m, int(latest)) for m in memory_ids]
    added = len(rows)
    top: int | None = None
    if added == 1:
        cur = conn.execute("INSERT INTO similarity_changes(memory_id, latest) VALUES (?, ?)", rows[0])
        # SQLite's seq is the row's rowid (the server's is not handed back): no statement to read it, every remember.
        top = None if is_postgres(conn) else cur.lastrowid
    else:
        conn.executemany("INSERT INTO similarity_changes(memory_id, latest) VALUES (?, ?)", rows)
    if top is None:
        top = conn.execute("SELECT MAX(seq) FROM similarity_changes").fetchone()[0]
    if top // _PRUNE_EVERY != (top - added) // _PRUNE_EVERY:
        conn.execute("DELETE FROM similarity_changes WHERE seq <= ?", (top - CHANGES_KEPT,))


def index_latest(conn: Connection, memory_id: int, tokens: frozenset[str]) -> None:
    """Add a memory that just became latest to the supersede index."""
    index_latest_many(conn, [(memory_id, tokens)])


def index_latest_many(conn: Connection, rows: Sequence[tuple[int, frozenset[str]]]) -> None:
    """Bulk form of :func:`index_latest` (an import, a rebuild): the rows in one go, their joining logged together."""
    index_keys(conn, [(memory_id, keys_text(tokens)) for memory_id, tokens in rows if tokens])


def index_keys(conn: Connection, payload: Sequence[tuple[int, str]]) -> None:
    """The writes of :func:`index_latest_many` from keys made ahead (a bulk import makes them where it prepares its
    records): ``payload`` is each memory's id and :func:`keys_text` of its tokens (none without tokens)."""
    conn.executemany("INSERT INTO similarity_index(rowid, keys) VALUES (?, ?)", payload)
    log_changes(conn, [memory_id for memory_id, _ in payload], True)


def unindex_latest(conn: Connection, memory_id: int, tokens: frozenset[str]) -> None:
    """Remove a memory that stopped being latest (superseded, forgotten) from the index."""
    unindex_latest_many(conn, [(memory_id, tokens)])


def unindex_latest_many(conn: Connection, rows: Sequence[tuple[int, frozenset[str]]]) -> None:
    """Bulk form of :func:`unindex_latest` (a bulk forget): the memories' leaving logged together (from
    ``BULK_RESET`` of them, as one "rebuild" row)."""
    payload = [(memory_id, keys_text(tokens)) for memory_id, tokens in rows if tokens]
    if not payload:
        return
    if is_postgres(conn):
        conn.executemany("DELETE FROM similarity_index WHERE rowid = ?", [(memory_id,) for memory_id, _ in payload])
    else:
        # A contentless FTS5 table forgets a row only when told the terms it was indexed with.
        conn.executemany("INSERT INTO similarity_index(similarity_index, rowid, keys) VALUES ('delete', ?, ?)", payload)
    log_changes(conn, [memory_id for memory_id, _ in payload], False)


#: Keys counted in one statement by :func:`holder_counts` (two bound values each).
_COUNTED_PER_STATEMENT = 200


def holder_counts(conn: Connection, keys: Sequence[str], cap: int) -> list[int]:
    """How many latest memories hold each of ``keys`` (:func:`memlens.text.token_key` keys), counted up to ``cap``:
    exact below it, ``cap`` meaning "at least that many".

    Read from the supersede index itself, as search counts its terms: a count stops at the cap, so a key every
    memory holds costs no more than a rare one. One statement per ``_COUNTED_PER_STATEMENT`` keys."""
    if is_postgres(conn):
        one = "(SELECT count(*) FROM (SELECT 1 FROM similarity_index WHERE string_to_array(keys, ' ') @> ARRAY[?::text] LIMIT ?) AS held)"
    else:
        one = "(SELECT count(*) FROM (SELECT 1 FROM similarity_index WHERE similarity_index MATCH ? LIMIT ?) AS held)"
    counts: list[int] = []
    for start in range(0, len(keys), _COUNTED_PER_STATEMENT):
        chunk = keys[start : start + _COUNTED_PER_STATEMENT]
        args: list[object] = []
        for key in chunk:
            args += [key, cap]
        counts.extend(int(n) for n in conn.execute("SELECT " + ", ".join([one] * len(chunk)), args).fetchone())
    return counts


@functools.lru_cache(maxsize=4096)
def _min_hits(size: int, rest: int, per_hit: int, threshold: float) -> int | None:
    """Fewest probed-key hits with which a memory could still pass: min(h * per_hit + rest, size) / size > threshold
    (the same float comparison the filter makes); None when no count can."""
    for hits in range(1, size + 1):
        if min(hits * per_hit + rest, size) / size > threshold:
            return hits
    return None


@functools.lru_cache(maxsize=1024)
def _largest_key_counts(size: int, threshold: float) -> np.ndarray:
    """Whether a candidate sharing at most o tokens with a text of ``size`` and holding k keys could pass, as a
    table: similarity is at most o / max(size, size + k - o), which falls as k grows, so for each o the k that pass
    run from 0 to the o-th entry (read-only: it is shared by every call with this size and threshold).
    A hair below the threshold: a float rounding here must never drop what the exact check would keep."""
    import numpy as np

    from memlens.supersede_postings import PACKED_KEY_COUNT_MAX

    grid_o = np.arange(size + 1)[:, None]
    grid = grid_o / np.maximum(size + np.arange(PACKED_KEY_COUNT_MAX + 1)[None, :] - grid_o, size) > threshold - 1e-9
    largest = grid.sum(axis=1) - 1
    largest.setflags(write=False)
    return largest


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
    postings: SimilarityPostings | None = None,
) -> Match | None:
    """The latest memory most similar to ``tokens`` with similarity > ``probe_threshold``, or None.

    Ties go to the most recent memory (the higher id). Exact: equal to :func:`brute_force_best` as ``conn`` sees
    the store now. ``postings`` is the store's in-memory index (``StoreContext.postings``); without it one is built
    for this call alone (right for a one-off, far too slow for a loop over a large store).
    """
    if layer not in SUPERSEDING_LAYERS or not tokens:
        return None
    import numpy as np

    from memlens.supersede_postings import SimilarityPostings, counted_runs, key_number, unpack

    if postings is None:
        postings = SimilarityPostings()
    postings.sync(conn)
    excluded = set(exclude)
    size = len(tokens)
    prefix_len = size - _min_overlap(size, probe_threshold) + 1
    by_key: dict[int, list[str]] = {}
    for tok in tokens:
        by_key.setdefault(key_number(token_key(tok)), []).append(tok)
    df = dict(zip(by_key, postings.doc_frequencies(list(by_key)), strict=True))
    key_of = {tok: k for k, toks in by_key.items() for tok in toks}
    # The rarest tokens first; a token nobody else holds costs nothing to probe.
    ordered = sorted(tokens, key=lambda t: (df[key_of[t]], t))
    # A key may stand for more than one token (a hash collision): each hit counts as that many shared tokens.
    per_hit = max(len(toks) for toks in by_key.values())

    found_lists: list[np.ndarray] = []
    probed: set[int] = set()

    def probe(some: Sequence[str]) -> None:
        keys = []
        for token in some:
            key = key_of[token]
            if key not in probed and df[key] != 0:
                probed.add(key)
                keys.append(key)
        if keys:
            found_lists.append(postings.packed_holders_of(keys))

    def counted() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each id found, how many probed keys found it, and its key count. Some may have left the index since
        the snapshot: overlap_bounds drops them, after the cheaper bounds (a memory's bounds never depend on another's)."""
        if not found_lists:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        # By id (a key count rides in the low bits, the same for every list that holds the id).
        packed, hits = counted_runs(np.concatenate(found_lists))
        ids, key_counts = unpack(packed)
        return ids, hits, key_counts

    largest = _largest_key_counts(size, probe_threshold)

    def overlap_bounds(ids: np.ndarray, counts: np.ndarray, key_counts: np.ndarray, probed_count: int) -> tuple[np.ndarray, np.ndarray]:
        """Which candidates could still pass, without their rows, and a bound on how many tokens each shares: a
        probed key found counts ``per_hit`` tokens, an unprobed token one if the candidate's signature admits it
        (see memlens.supersede_postings). A memory holding k distinct keys holds at least k tokens (``key_counts``
        are capped, which only lowers k), so its similarity is at most overlap / max(size, size + k - overlap)."""
        least = _min_hits(size, size - probed_count, per_hit, probe_threshold)
        if least is None:
            return np.zeros(len(ids), dtype=np.bool_), np.zeros(len(ids), dtype=np.int64)
        overlap = np.minimum(counts * per_hit + (size - probed_count), size)
        keep = (counts >= least) & (key_counts <= largest[overlap])
        at = np.flatnonzero(keep)
        # Those that left, and those of another layer (which the row read would drop: a layer never changes).
        keep[at] = postings.alive(ids[at]) & postings.in_layer(ids[at], layer)
        unprobed = [key_of[t] for t in ordered[probed_count:]]
        if unprobed and keep.any():
            # The same bound with only the unprobed tokens each candidate's signature admits.
            at = np.flatnonzero(keep)
            admitted = postings.signature_hits(ids[at], np.array(unprobed, dtype=np.int64))
            overlap[at] = np.minimum(counts[at] * per_hit + admitted, size)
            keep[at] = key_counts[at] <= largest[overlap[at]]
        return keep, overlap

    probe(ordered[:prefix_len])
    ids, counts, key_counts = counted()
    # Probing past the prefix tightens the bound below enough to drop most candidates before their rows are read:
    # with `probed_count` tokens probed, a memory found h times shares at most h * per_hit + (size - probed_count)
    # tokens, and its similarity is at most that over `size` (when it holds nothing else). Each extra token costs
    # reading its postings (~df ids); each candidate kept costs a row lookup (ten to thirty times dearer). Extend while
    # the next token is cheaper than the lookups it can save.
    probed_count = prefix_len
    bounded = None
    while probed_count < size and len(ids):
        bounded = overlap_bounds(ids, counts, key_counts, probed_count)
        if df[key_of[ordered[probed_count]]] >= 16 * int(np.count_nonzero(bounded[0])):
            break
        bounded = None
        probe([ordered[probed_count]])
        probed_count += 1
        ids, counts, key_counts = counted()
    rest = size - probed_count
    least = _min_hits(size, rest, per_hit, probe_threshold)
    if least is None or not len(ids):
        return None
    # Exact without the row: similarity <= overlap / size (the other memory holds at least the overlap), and the
    # tighter bounds with the other memory's key count and signature (see overlap_bounds; the loop's last ones
    # when it stopped without probing more).
    mask, overlaps = bounded if bounded is not None else overlap_bounds(ids, counts, key_counts, probed_count)
    bounds = {mid: b for mid, b in zip(ids[mask].tolist(), overlaps[mask].tolist(), strict=True) if mid not in excluded}
    candidate_ids = sorted(bounds)
    if not candidate_ids:
        return None
    best: Match | None = None
    for i in range(0, len(candidate_ids), _CHUNK):
        id_chunk = candidate_ids[i : i + _CHUNK]
        marks = ",".join("?" * len(id_chunk))
        rows = conn.execute(
            # The layer, project and expiry checked by SQLite (most of the rows read fail them: only the others
            # become Python rows). compatible_projects and an unexpired TTL (forget_after > now), as SQL; the unary
            # + keeps SQLite on the id lookups instead of an index on layer or project.
            f"SELECT id, token_count, content FROM memories WHERE id IN ({marks}) AND +is_latest = 1 AND +layer = ? "
            "AND (? IS NULL OR +project IS NULL OR +project = ?) AND (+forget_after IS NULL OR +forget_after > ?)",
            (*id_chunk, layer, project, project, now),
        ).fetchall()
        survivors = []
        for mid, m_size, content in rows:
            # Upper bound on the overlap: probed hits (a key may stand for more than one token) plus the unprobed
            # tokens the signature admits (overlap_bounds), and never more than the other memory's tokens.
            bound = min(bounds[mid], m_size)
            union = size + m_size - bound
            if union <= 0 or bound / union <= probe_threshold:
                continue
            survivors.append((bound / union, mid, content))
        # The highest bounds first: once the best found beats a bound, that memory's text need not be compared.
        survivors.sort(reverse=True)
        for upper, mid, content in survivors:
            if best is not None and upper < best.similarity:
                break
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
