"""The supersede index held in memory: which latest memories hold each similarity-token key.

:func:`memlens.supersede.find_best` needs, for a handful of token keys, every latest memory holding each of them.
Read from the FTS5 ``similarity_index`` that costs 11-16 ms at a million memories (tens of thousands of ids through
``group_concat`` per call); held here as numpy arrays it costs well under a millisecond.

Shape: a CSR snapshot (``keys`` sorted key numbers, ``offsets`` into ``ids``, each key's memory ids sorted) built
from the FTS5 index itself through ``fts5vocab`` (seconds at a million, instead of a minute re-tokenising every
text), plus a small delta of memories that joined since (their keys computed from their text) and a ``dead`` mask
of snapshot memories that left. When the delta and the mask grow past :data:`COMPACT_SHARE` of the snapshot, the
next use builds a new snapshot. Nothing is built until the first :meth:`SimilarityPostings.sync`, so opening a store
(GUI, CLI, an agent's hook) costs nothing.

Correct across processes and transactions (the design, and why): the copy is a *cache* checked on every use, never
updated in place by a write. Every write to the supersede index goes through ``memlens.supersede``'s
``index_latest``/``index_latest_many``/``unindex_latest``, and each of them appends to the ``similarity_changes``
table (schema 8) in the writer's own transaction: which memory joined (1) or left (0) the index, in order, with a
random tag. Before answering, :meth:`sync` reads the newest row (one indexed lookup): unchanged means the copy is
current; otherwise it replays the rows after the one it last applied. That covers every case with one mechanism:

* another connection or process committed: its rows are visible now, and replayed;
* this connection's own uncommitted writes: visible to this connection, so replayed; find_best inside the same
  transaction then sees what brute force would see;
* a transaction (or savepoint) rolled back after the copy applied its rows: the row the copy last applied is gone,
  or its seq was reused with a different random tag, so the copy is rebuilt. Nothing wrong survives a rollback.

Updating the arrays from inside ``index_latest`` instead would need a commit/rollback hook to stay right, and still
not see other processes; ``PRAGMA data_version`` alone would say *that* another process wrote, not *what*.

Replay is idempotent and never needs the keys a memory had when it left: a memory that joined gets the keys of its
current text (text never changes in place; were it to, an extra key only adds a candidate whose real similarity is
then computed), and a memory that left is masked out. So the copy may be read at a later moment than the log head
it records without harm. Memories that left are also filtered by the candidate check's ``is_latest = 1``; the
copy may therefore hold more than the index, never less, which is all exactness needs.

Signatures: beside the postings each memory has a 128-bit signature, one bit set for each of its keys (the key's
low seven bits name it; 16 bytes a memory). A clear bit proves the memory lacks every key with that bit, so
:meth:`SimilarityPostings.signature_hits` bounds how many of a text's unprobed tokens a candidate can share without
reading its row: find_best then reads the rows of the few candidates that may really pass, not of every memory that
holds one rare token. A set bit proves nothing (another key may have set it); a signature only ever holds more
bits than its memory's keys (a memory that left keeps its bits), which only loosens the bound.

Writers prune the log beyond ``memlens.supersede.CHANGES_KEPT`` rows; a reader further behind than that (or than
:data:`REPLAY_LIMIT`) rebuilds. A bulk write of ``memlens.supersede.BULK_RESET`` or more memories logs one NULL row
("everything may have changed") instead of one row each.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memlens.models import Layer
from memlens.postgres import is_postgres
from memlens.text import similarity_tokens, token_key

if TYPE_CHECKING:
    from memlens.db import Connection

#: A reader replays at most this many log rows; more and a fresh snapshot is cheaper (the log keeps more:
#: :data:`memlens.supersede.CHANGES_KEPT`).
REPLAY_LIMIT = 20_000
#: Delta plus dead entries beyond this share of the snapshot's memories (and at least COMPACT_MIN) rebuild it.
COMPACT_SHARE = 0.05
COMPACT_MIN = 20_000
#: :meth:`SimilarityPostings.packed_holders` keeps a holder's key count in the low bits beside its id.
PACKED_SHIFT = 8
PACKED_KEY_COUNT_MAX = (1 << PACKED_SHIFT) - 1
#: Bits in a memory's key signature: 128, as two 64-bit words (see the module docstring).
SIGNATURE_WORDS = 2
#: The code of each layer in :attr:`SimilarityPostings._layer` (0: not known, which every layer test admits).
LAYER_CODES = {layer.value: code for code, layer in enumerate(Layer, start=1)}
_VOCAB = "temp.memlens_similarity_vocab"
_VOCAB_ROWS = "temp.memlens_similarity_vocab_rows"


def key_number(key: str) -> int:
    """The integer a token key (``"k"`` + 12 hex digits, see :func:`memlens.text.token_key`) is held as."""
    return int(key[1:], 16)


@functools.lru_cache(maxsize=32)
def keys_of(text: str) -> np.ndarray:
    """The key numbers of ``text``'s similarity tokens, ascending, once each (a read-only array: it is shared).

    The last few texts are kept: a semantic remember() asks for its own text's keys twice after its write (the
    in-memory index catching up with it, then the conflict candidates), about 30 us each at forty words."""
    keys = np.array(sorted({key_number(token_key(t)) for t in similarity_tokens(text)}), dtype=np.int64)
    keys.setflags(write=False)
    return keys


def unpack(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ids and key counts of :meth:`SimilarityPostings.packed_holders`'s values."""
    return packed >> PACKED_SHIFT, packed & PACKED_KEY_COUNT_MAX


def counted_runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct value of ``values`` once, ascending, and how many times it occurs (``np.unique`` with
    ``return_counts``, several times faster: ``values`` is sorted in place).

    ``values`` is postings joined, so it is a few long ascending runs (each key's holders in id order), and the
    stable sort (a merge sort that finds the runs, then merges them) costs a fifth of numpy's default quicksort
    there: 0.35 against 1.71 ms a remember() at a million memories on an AMD EPYC (the arrays of 300 calls
    captured and sorted both ways). Equal integers come out alike whichever sort runs."""
    values.sort(kind="stable")
    edges = np.empty(len(values) + 1, dtype=np.bool_)
    edges[0] = edges[-1] = True
    np.not_equal(values[1:], values[:-1], out=edges[1:-1])
    bounds = np.flatnonzero(edges)
    return values[bounds[:-1]], np.diff(bounds)


def _signature_place(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which signature word and which bit of it each key number sets (its low seven bits)."""
    bits = np.asarray(keys, dtype=np.int64) & (64 * SIGNATURE_WORDS - 1)
    return bits >> 6, (bits & 63).astype(np.uint64)


_BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def _popcount(words: np.ndarray) -> np.ndarray:
    """The set bits of each unsigned 64-bit word (numpy 2's bitwise_count, or a byte table before it)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(words)
    return _BYTE_BITS[words.view(np.uint8)].reshape(*words.shape, 8).sum(axis=-1, dtype=np.uint8)


def signature_of(keys: np.ndarray) -> np.ndarray:
    """The signature (SIGNATURE_WORDS unsigned 64-bit words) of a memory holding ``keys``."""
    out = np.zeros(SIGNATURE_WORDS, dtype=np.uint64)
    words, bits = _signature_place(keys)
    # One unbuffered OR for all the keys (a Python loop over them cost more than the rest of a replayed memory).
    np.bitwise_or.at(out, words, np.left_shift(np.uint64(1), bits))
    return out


class SimilarityPostings:
    """The supersede index of one open store, in memory (see the module docstring). Not thread-safe by itself:
    the store's lock is held around every use."""

    def __init__(self) -> None:
        self._head: tuple[int, int] | None = None  # (seq, tag) of the last log row applied; None: nothing built
        self._keys = np.empty(0, dtype=np.int64)
        self._offsets = np.zeros(1, dtype=np.int64)
        self._ids: np.ndarray = np.empty(0, dtype=np.int64)  # int32 while ids fit (see _build)
        self._dead = np.zeros(0, dtype=np.bool_)  # by memory id: left the index since the snapshot
        self._key_count = np.zeros(0, dtype=np.uint16)  # by memory id: how many distinct keys it holds
        # By memory id: its layer's code (LAYER_CODES). A memory's layer never changes (no write updates it), and a
        # memory that joins is read again, so the code of a memory held is always its layer's.
        self._layer = np.zeros(0, dtype=np.uint8)
        self._holder_key_counts = np.zeros(0, dtype=np.uint8)  # beside _ids: each holder's key count, capped
        # A row a signature word, by memory id (see the module docstring): one row is read at a time, contiguous.
        self._signatures = np.zeros((SIGNATURE_WORDS, 0), dtype=np.uint64)
        self._dead_count = 0
        self._base_docs = 0
        self._delta: dict[int, set[int]] = {}  # key number -> ids that joined since the snapshot
        self._delta_keys: dict[int, np.ndarray] = {}  # id -> its key numbers
        self.builds = 0  # how many snapshots were built (tests and the benchmark read it)

    # keeping current -------------------------------------------------------------------------------------------

    @property
    def built(self) -> bool:
        """Whether a snapshot is held (False until the first :meth:`sync`)."""
        return self._head is not None

    def sync(self, conn: Connection) -> None:
        """Bring the copy up to what ``conn`` sees now: nothing to do when the change log's newest row is the one
        last applied, else replay the rows after it, or build a new snapshot."""
        row = conn.execute("SELECT seq, tag FROM similarity_changes ORDER BY seq DESC LIMIT 1").fetchone()
        head = (int(row[0]), int(row[1])) if row else (0, 0)
        if head == self._head:
            return
        if self._head is None or not self._can_replay(conn, head[0]):
            self._build(conn)
            return
        rows = conn.execute(
            "SELECT seq, memory_id, latest, tag FROM similarity_changes WHERE seq > ? ORDER BY seq", (self._head[0],)
        ).fetchall()
        if any(r[1] is None for r in rows):
            self._build(conn)
            return
        final: dict[int, int] = {}
        for _, memory_id, latest, _ in rows:
            final[int(memory_id)] = int(latest)
        self._apply(conn, final)
        if rows:
            self._head = (int(rows[-1][0]), int(rows[-1][3]))
        if len(self._delta_keys) + self._dead_count > max(COMPACT_MIN, COMPACT_SHARE * self._base_docs):
            self._build(conn)

    def _can_replay(self, conn: Connection, newest: int) -> bool:
        assert self._head is not None
        seq, tag = self._head
        if newest - seq > REPLAY_LIMIT or newest < seq:
            return False
        if seq == 0:
            return True
        row = conn.execute("SELECT tag FROM similarity_changes WHERE seq = ?", (seq,)).fetchone()
        return row is not None and int(row[0]) == tag  # else rolled back (or pruned): what was applied is unsure

    def _apply(self, conn: Connection, final: dict[int, int]) -> None:
        for memory_id, latest in final.items():
            self._drop_delta(memory_id)
            if memory_id < len(self._dead):
                was = bool(self._dead[memory_id])
                self._dead[memory_id] = not latest
                self._dead_count += int(not latest) - int(was)
        joined = [m for m, latest in final.items() if latest]
        for start in range(0, len(joined), 500):
            chunk = joined[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for memory_id, content, layer in conn.execute(f"SELECT id, content, layer FROM memories WHERE id IN ({marks})", chunk):
                keys = keys_of(content)
                if not len(keys):
                    continue
                if memory_id >= len(self._key_count):
                    grown = np.zeros(max(memory_id + 1, len(self._key_count) * 5 // 4), dtype=np.uint16)
                    grown[: len(self._key_count)] = self._key_count
                    self._key_count = grown
                if memory_id >= len(self._layer):
                    wider = np.zeros(max(memory_id + 1, len(self._layer) * 5 // 4), dtype=np.uint8)
                    wider[: len(self._layer)] = self._layer
                    self._layer = wider
                self._layer[memory_id] = LAYER_CODES.get(layer, 0)
                if memory_id >= self._signatures.shape[1]:
                    more = np.zeros((SIGNATURE_WORDS, max(memory_id + 1, self._signatures.shape[1] * 5 // 4)), dtype=np.uint64)
                    more[:, : self._signatures.shape[1]] = self._signatures
                    self._signatures = more
                self._key_count[memory_id] = min(len(keys), 65535)
                # OR, not set: bits only ever added (a set bit proves nothing, so extra ones are harmless).
                self._signatures[:, memory_id] |= signature_of(keys)
                self._delta_keys[memory_id] = keys
                for k in keys.tolist():
                    self._delta.setdefault(k, set()).add(memory_id)

    def _drop_delta(self, memory_id: int) -> None:
        keys = self._delta_keys.pop(memory_id, None)
        if keys is None:
            return
        for k in keys.tolist():
            holders = self._delta[k]
            holders.discard(memory_id)
            if not holders:
                del self._delta[k]

    def _build(self, conn: Connection) -> None:
        """A new snapshot from the FTS5 index, read in one transaction (the log head first: replaying from it
        later is harmless, see the module docstring)."""
        postgres = is_postgres(conn)
        if not postgres:
            _create_vocab_tables(conn)
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            row = conn.execute("SELECT seq, tag FROM similarity_changes ORDER BY seq DESC LIMIT 1").fetchone()
            head = (int(row[0]), int(row[1])) if row else (0, 0)
            top = conn.execute("SELECT MAX(id) FROM memories").fetchone()[0] or 0
            # int32 halves the memory at a million memories; ids need int64 only past two billion.
            id_dtype = np.int32 if top < 2**31 - 1 else np.int64
            terms, ids, docs = _server_postings(conn, id_dtype) if postgres else _fts5_postings(conn, id_dtype)
            keys = np.fromiter((key_number(t) for t, _ in terms), dtype=np.int64, count=len(terms))
            counts = np.fromiter((d for _, d in terms), dtype=np.int64, count=len(terms))
            offsets = np.zeros(len(terms) + 1, dtype=np.int64)
            np.cumsum(counts, out=offsets[1:])
            if int(offsets[-1]) != len(ids):
                raise RuntimeError(f"the supersede index changed while read ({len(ids)} of {int(offsets[-1])} postings)")
            layers = _layers(conn, int(top) + 1)
        finally:
            if own:
                conn.execute("COMMIT")
        self._keys, self._offsets, self._ids = keys, offsets, ids
        self._dead = np.zeros(int(top) + 1, dtype=np.bool_)
        self._layer = layers
        self._key_count = np.minimum(np.bincount(ids, minlength=int(top) + 1), 65535).astype(np.uint16)
        self._holder_key_counts = np.minimum(self._key_count[ids], PACKED_KEY_COUNT_MAX).astype(np.uint8)
        self._signatures = _signatures(keys, offsets, ids, int(top) + 1)
        self._dead_count = 0
        self._base_docs = int(docs) or len(ids) // 20
        self._delta.clear()
        self._delta_keys.clear()
        self._head = head
        self.builds += 1

    # answering -------------------------------------------------------------------------------------------------

    def doc_frequency(self, key: int) -> int:
        """How many memories hold ``key`` (an upper bound: memories that left still count until the next snapshot)."""
        i = int(np.searchsorted(self._keys, key))
        n = int(self._offsets[i + 1] - self._offsets[i]) if i < len(self._keys) and self._keys[i] == key else 0
        return n + len(self._delta.get(key, ()))

    def doc_frequencies(self, keys: list[int]) -> list[int]:
        """:meth:`doc_frequency` of each of ``keys``, in one search of the snapshot's keys."""
        if not keys:
            return []
        wanted = np.array(keys, dtype=np.int64)
        at = np.searchsorted(self._keys, wanted)
        inside = at < len(self._keys)
        found = np.zeros(len(keys), dtype=np.bool_)
        found[inside] = self._keys[at[inside]] == wanted[inside]
        sizes = np.where(found, self._offsets[np.minimum(at + 1, len(self._offsets) - 1)] - self._offsets[np.minimum(at, len(self._offsets) - 1)], 0)
        delta = self._delta
        return [int(n) + len(delta.get(k, ())) for k, n in zip(keys, sizes.tolist(), strict=True)]

    def holders(self, key: int) -> np.ndarray:
        """Ids that may hold ``key``: every latest memory that does, plus perhaps some that left (filter with
        :meth:`alive`)."""
        i = int(np.searchsorted(self._keys, key))
        base = self._ids[self._offsets[i] : self._offsets[i + 1]] if i < len(self._keys) and self._keys[i] == key else self._ids[:0]
        extra = self._delta.get(key)
        if not extra:
            return base
        return np.concatenate((base.astype(np.int64), np.fromiter(extra, dtype=np.int64, count=len(extra))))

    def packed_holders(self, key: int) -> np.ndarray:
        """:meth:`holders` with each holder's key count (capped at PACKED_KEY_COUNT_MAX, which only loosens a bound)
        in the low bits of its id: ``id << PACKED_SHIFT | key_count`` (see :func:`unpack`). Read beside the ids,
        the counts cost no random access into a per-memory array."""
        i = int(np.searchsorted(self._keys, key))
        if i < len(self._keys) and self._keys[i] == key:
            start, end = int(self._offsets[i]), int(self._offsets[i + 1])
            base = (self._ids[start:end].astype(np.int64) << PACKED_SHIFT) | self._holder_key_counts[start:end]
        else:
            base = np.empty(0, dtype=np.int64)
        extra = self._delta.get(key)
        if not extra:
            return base
        joined = np.fromiter(extra, dtype=np.int64, count=len(extra))
        counts = np.minimum(self._key_count[joined], PACKED_KEY_COUNT_MAX).astype(np.int64)
        return np.concatenate((base, (joined << PACKED_SHIFT) | counts))

    def _spans(self, keys: Sequence[int]) -> tuple[list[int], list[int]]:
        """Where each of ``keys`` has its snapshot holders in ``_ids`` (start, end; equal for a key the snapshot lacks),
        in one search of the snapshot's keys."""
        if not len(self._keys):
            return [0] * len(keys), [0] * len(keys)
        wanted = np.array(keys, dtype=np.int64)
        at = np.minimum(np.searchsorted(self._keys, wanted), len(self._keys) - 1)
        found = self._keys[at] == wanted
        return np.where(found, self._offsets[at], 0).tolist(), np.where(found, self._offsets[at + 1], 0).tolist()

    def holders_of(self, keys: Sequence[int]) -> np.ndarray:
        """The :meth:`holders` of each of ``keys``, joined in one int64 array (the same ids as many times, in no
        promised order): one search of the snapshot for them all instead of one a key."""
        starts, ends = self._spans(keys)
        parts = [self._ids[s:e] for s, e in zip(starts, ends, strict=True) if e > s]
        base = np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)
        extra = [m for k in keys for m in self._delta.get(k, ())]
        if not extra:
            return base
        return np.concatenate((base, np.array(extra, dtype=np.int64)))

    def packed_holders_of(self, keys: Sequence[int]) -> np.ndarray:
        """The :meth:`packed_holders` of each of ``keys``, joined in one array (in no promised order), as
        :meth:`holders_of` joins the holders. Packed in 32 bits while every id fits in 23 (eight million memories):
        half the bytes to sort and to scan, and the sort (SIMD) runs on twice as many values at once."""
        # Every id held is below len(self._key_count) (sized at the build, grown for each memory that joins).
        dtype: type[np.signedinteger[Any]] = np.int32 if len(self._key_count) <= 1 << (31 - PACKED_SHIFT) else np.int64
        starts, ends = self._spans(keys)
        spans = [(s, e) for s, e in zip(starts, ends, strict=True) if e > s]
        if spans:
            ids = np.concatenate([self._ids[s:e] for s, e in spans]).astype(dtype, copy=False)
            base = (ids << PACKED_SHIFT) | np.concatenate([self._holder_key_counts[s:e] for s, e in spans])
        else:
            base = np.empty(0, dtype=dtype)
        extra = [m for k in keys for m in self._delta.get(k, ())]
        if not extra:
            return base
        joined = np.array(extra, dtype=dtype)
        counts = np.minimum(self._key_count[joined], PACKED_KEY_COUNT_MAX).astype(dtype)
        return np.concatenate((base, (joined << PACKED_SHIFT) | counts))

    def key_counts(self, ids: np.ndarray) -> np.ndarray:
        """How many distinct keys each of ``ids`` (as returned by :meth:`holders`) holds: never more than its
        similarity tokens (capped at 65,535, which only loosens a bound)."""
        return self._key_count[ids].astype(np.int64)

    def alive(self, ids: np.ndarray) -> np.ndarray:
        """A mask over ``ids``: False for memories known to have left the index."""
        if not self._dead_count:
            return np.ones(len(ids), dtype=np.bool_)
        if not len(ids) or int(ids.max()) < len(self._dead):
            return ~self._dead[ids]
        inside = ids < len(self._dead)
        mask = np.ones(len(ids), dtype=np.bool_)
        mask[inside] = ~self._dead[ids[inside]]
        return mask

    def in_layer(self, ids: np.ndarray, layer: str) -> np.ndarray:
        """A mask over ``ids``: False for memories known to be in another layer than ``layer``."""
        ids = np.asarray(ids)
        wanted = LAYER_CODES.get(layer, 0)
        if not wanted or not len(ids):
            return np.ones(len(ids), dtype=np.bool_)
        inside = ids < len(self._layer)
        codes = self._layer[np.where(inside, ids, 0)]
        return ~inside | (codes == wanted) | (codes == 0)

    def signature_hits(self, ids: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """For each of ``ids``, how many of ``keys`` (key numbers, a repeated one counted each time) its signature
        admits: never fewer than how many of them it holds (see the module docstring)."""
        ids = np.asarray(ids, dtype=np.int64)
        if not len(keys) or not len(ids):
            return np.zeros(len(ids), dtype=np.int64)
        words, bits = _signature_place(keys)
        per_bit = np.bincount(words * 64 + bits.astype(np.int64), minlength=64 * SIGNATURE_WORDS)
        inside = ids < self._signatures.shape[1]
        at = np.where(inside, ids, 0)
        admitted = np.zeros(len(ids), dtype=np.int64)
        for word in range(SIGNATURE_WORDS):
            row = np.take(self._signatures[word], at)
            counts = per_bit[word * 64 : word * 64 + 64]
            # Keys sharing a bit count together: the bits set by m of the keys, ANDed and counted, m times each.
            for times in np.unique(counts[counts > 0]).tolist():
                query = 0
                for bit in np.flatnonzero(counts == times).tolist():
                    query |= 1 << bit
                admitted += times * _popcount(row & np.uint64(query))
        # An id past the array (none should be: every memory that joined was applied) admits every key.
        return np.where(inside, admitted, len(keys))

    def memory_bytes(self) -> int:
        """Bytes held by the arrays (the delta's Python objects are not counted; they stay small)."""
        arrays = (self._keys, self._offsets, self._ids, self._holder_key_counts, self._dead, self._key_count, self._layer, self._signatures)
        return int(sum(a.nbytes for a in arrays))

    def stats(self) -> dict[str, int]:
        """Sizes, for the benchmark and for debugging."""
        return {"keys": len(self._keys), "postings": len(self._ids), "delta": len(self._delta_keys), "dead": self._dead_count,
                "bytes": self.memory_bytes(), "builds": self.builds}


def _signatures(keys: np.ndarray, offsets: np.ndarray, ids: np.ndarray, size: int) -> np.ndarray:
    """Every memory's signature from the snapshot's postings: for each bit, the holders of every key setting it."""
    out = np.zeros((SIGNATURE_WORDS, size), dtype=np.uint64)
    words, bits = _signature_place(keys)
    place = words * 64 + bits.astype(np.int64)
    order = np.argsort(place, kind="stable")
    bounds = np.searchsorted(place[order], np.arange(64 * SIGNATURE_WORDS + 1))
    starts, ends = offsets[:-1], offsets[1:]
    for p in range(64 * SIGNATURE_WORDS):
        members = order[bounds[p] : bounds[p + 1]]
        if not len(members):
            continue
        holders = np.concatenate([ids[a:b] for a, b in zip(starts[members].tolist(), ends[members].tolist(), strict=True)])
        # Repeated ids only set the same bit again.
        out[p >> 6, holders] |= np.uint64(1 << (p & 63))
    return out


def _layers(conn: Connection, size: int) -> np.ndarray:
    """Every memory's layer code (LAYER_CODES) by id, for ids below ``size``: the ids of each layer, read from
    the index on layer (a scan of its entries, not of the table)."""
    out = np.zeros(size, dtype=np.uint8)
    for layer, code in LAYER_CODES.items():
        ids = np.fromiter((r[0] for r in conn.execute("SELECT id FROM memories WHERE layer = ?", (layer,))), dtype=np.int64)
        out[ids[ids < size]] = code
    return out


def _fts5_postings(conn: Connection, id_dtype: type) -> tuple[list[tuple[str, int]], np.ndarray, int]:
    """The index's terms with their document counts, its postings (documents by term, then id) and its document
    count, read from FTS5 through fts5vocab."""
    terms = conn.execute(f"SELECT term, doc FROM {_VOCAB_ROWS}").fetchall()
    parts: list[np.ndarray] = []
    # Sixteen slices by the first hex digit of the key keep the joined text small (tens of MB at 1M).
    for digit in "0123456789abcdef":
        (joined,) = conn.execute(f"SELECT group_concat(doc) FROM {_VOCAB} WHERE term >= ? AND term < ?", (f"k{digit}", f"k{digit}g")).fetchone()
        if joined:
            parts.append(np.fromstring(joined, dtype=id_dtype, sep=","))
    docs = conn.execute("SELECT COUNT(*) FROM similarity_index_docsize").fetchone()[0] if _has_docsize(conn) else 0
    return terms, np.concatenate(parts) if parts else np.empty(0, dtype=id_dtype), int(docs)


def _server_postings(conn: Connection, id_dtype: type) -> tuple[list[tuple[str, int]], np.ndarray, int]:
    """:func:`_fts5_postings` from a PostgreSQL store's ``similarity_index`` table (each memory's keys in one row): the
    keys split and grouped on the server in one pass, streamed through a server-side cursor a few thousand terms at
    a time, so the client never holds the whole joined text (a pass per slice, as for FTS5, cost 17 scans of the
    table: 13.5 s at 100k memories)."""
    terms: list[tuple[str, int]] = []
    parts: list[np.ndarray] = []
    with conn.raw.cursor(name="memlens_postings") as cur:
        cur.itersize = 5000
        cur.execute(
            "SELECT k, count(*), string_agg(rowid::text, ',' ORDER BY rowid) "
            "FROM similarity_index, unnest(string_to_array(keys, ' ')) AS k GROUP BY k ORDER BY k"
        )
        while batch := cur.fetchmany(5000):
            terms += [(k, int(n)) for k, n, _ in batch]
            parts.append(np.fromstring(",".join(joined for _, _, joined in batch), dtype=id_dtype, sep=","))
    docs = conn.execute("SELECT COUNT(*) FROM similarity_index").fetchone()[0]
    return terms, np.concatenate(parts) if parts else np.empty(0, dtype=id_dtype), int(docs)


def _create_vocab_tables(conn: Connection) -> None:
    """The fts5vocab views of the index, in this connection's temp schema (nothing is written to the store's file,
    so a read-only store, opened ``mode=ro`` with ``query_only``, lifts ``query_only`` just for them)."""
    if conn.execute(f"SELECT 1 FROM temp.sqlite_master WHERE name = '{_VOCAB_ROWS.split('.')[1]}'").fetchone():
        return
    query_only = conn.execute("PRAGMA query_only").fetchone()[0]
    if query_only:
        conn.execute("PRAGMA query_only = OFF")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB} USING fts5vocab(main, similarity_index, instance)")
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB_ROWS} USING fts5vocab(main, similarity_index, row)")
    finally:
        if query_only:
            conn.execute("PRAGMA query_only = ON")


def _has_docsize(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'similarity_index_docsize'").fetchone() is not None

