"""search() (2-4 word queries, limit 10, with the rerank) against a raw FTS5 bm25 OR query on the same store."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memlens.bench.generator import EPOCH, Generator
from memlens.bench.timing import median_of_rounds, summary_ms, timed
from memlens.store import MemoryStore

RAW_SQL = "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY bm25(memory_fts) LIMIT ?"


def raw_expression(query: str) -> str:
    """The baseline's query: the query's words, each quoted, joined with OR."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in query.split())


def run(path: Path, gen: Generator, *, queries: int = 200, rounds: int = 3, limit: int = 10) -> dict[str, Any]:
    """Per-call p50/p95 of ``search`` and of the raw query, interleaved call by call so both see the same load;
    the medians of ``rounds`` rounds are reported."""
    now = EPOCH + timedelta(days=1)
    with MemoryStore.open(path, readonly=True, actor="bench") as store:
        rng = np.random.default_rng([gen.seed, 21])
        top = store.conn.execute("SELECT MAX(id) FROM memories").fetchone()[0] or 0
        texts = []
        for _ in range(queries):
            row = store.conn.execute("SELECT content FROM memories WHERE id >= ? ORDER BY id LIMIT 1", (int(rng.integers(1, top + 1)),)).fetchone()
            if row:
                texts.append(row[0])
        qs = gen.queries(texts, queries)
        ours: list[dict[str, float]] = []
        theirs: list[dict[str, float]] = []
        hits = 0
        for _ in range(rounds):
            a: list[float] = []
            b: list[float] = []
            for q in qs:
                found, seconds = timed(lambda: store.search(q, limit=limit, now=now))  # noqa: B023
                a.append(seconds)
                hits += bool(found)
                _, seconds = timed(lambda: store.conn.execute(RAW_SQL, (raw_expression(q), limit)).fetchall())  # noqa: B023
                b.append(seconds)
            ours.append(summary_ms(a))
            theirs.append(summary_ms(b))
    search = median_of_rounds(ours)
    raw = median_of_rounds(theirs)
    return {
        "queries": len(qs),
        "rounds": rounds,
        "examples": qs[:4],
        "queries_with_hits": round(hits / (rounds * len(qs)), 3) if qs else 0.0,
        "search": search,
        "raw_fts5_or": raw,
        "ratio_p50": round(raw["p50_ms"] / search["p50_ms"], 2) if search["p50_ms"] else None,
    }
