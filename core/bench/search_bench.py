"""search() (2-4 word queries, limit 10, with the rerank) against a raw FTS5 bm25 OR query on the same store.

Both run call by call, interleaved (:func:`memlens.bench.timing.interleaved`), in the same process on the same
read-only connection; wall and CPU time are reported for each, and ``ratio_p50`` is the raw query's p50 over
search's (above 1: search is faster). ``statements_per_search`` counts the SQL statements one search issues (not
the ones FTS5 runs inside them).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memlens.bench.generator import EPOCH, Generator
from memlens.bench.timing import interleaved
from memlens.store import MemoryStore

RAW_SQL = "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY bm25(memory_fts) LIMIT ?"


def raw_expression(query: str) -> str:
    """The baseline's query: the query's words, each quoted, joined with OR."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in query.split())


def run(path: Path, gen: Generator, *, queries: int = 200, rounds: int = 3, limit: int = 10) -> dict[str, Any]:
    """Per-call p50/p95 (wall and CPU) of ``search`` and of the raw query over ``rounds`` passes of ``queries``
    queries, the two interleaved call by call so both see the same load."""
    now = EPOCH + timedelta(days=1)
    with MemoryStore.open(path, readonly=True, actor="bench") as store:
        conn = store.conn
        rng = np.random.default_rng([gen.seed, 21])
        top = conn.execute("SELECT MAX(id) FROM memories").fetchone()[0] or 0
        texts = []
        for _ in range(queries):
            row = conn.execute("SELECT content FROM memories WHERE id >= ? ORDER BY id LIMIT 1", (int(rng.integers(1, top + 1)),)).fetchone()
            if row:
                texts.append(row[0])
        qs = gen.queries(texts, queries)
        raw = [raw_expression(q) for q in qs]
        statements = 0

        def count(sql: str) -> None:
            nonlocal statements
            statements += not sql.startswith("--")  # "--" marks the statements SQLite runs inside FTS5

        conn.set_trace_callback(count)
        try:
            for q in qs:
                store.search(q, limit=limit, now=now)
        finally:
            conn.set_trace_callback(None)
        pair = interleaved(
            lambda i: store.search(qs[i % len(qs)], limit=limit, now=now),
            lambda i: conn.execute(RAW_SQL, (raw[i % len(qs)], limit)).fetchall(),
            rounds=rounds * len(qs),
        )
    return {
        "queries": len(qs),
        "rounds": rounds,
        "examples": qs[:4],
        "queries_with_hits": round(sum(bool(r) for r in pair.a.results) / len(pair.a.results), 3) if qs else 0.0,
        "statements_per_search": round(statements / len(qs), 2) if qs else 0.0,
        "search": pair.a.summary(),
        "raw_fts5_or": pair.b.summary(),
        "ratio_p50": pair.ratio_p50(),
        "search_s": round(pair.a.wall_s, 3),
        "search_cpu_s": round(pair.a.cpu_s, 3),
        "raw_fts5_or_s": round(pair.b.wall_s, 3),
        "raw_fts5_or_cpu_s": round(pair.b.cpu_s, 3),
    }
