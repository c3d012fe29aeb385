"""search() (2-4 word queries, limit 10, with the rerank) against a raw FTS5 bm25 OR query on the same store.

Both run call by call, interleaved (:func:`memlens.bench.timing.interleaved`), in the same process on the same
read-only connection; wall and CPU time are reported for each, and ``ratio_p50`` is the raw query's p50 over
search's (above 1: search is faster). ``statements_per_search`` counts the SQL statements one search issues (not
the ones FTS5 runs inside them).
"""

from __future__ import annotations

import sys
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


def sample_queries(conn: Any, gen: Generator, queries: int) -> list[str]:
    """``queries`` search queries made from the texts of memories picked at random (by ``gen``'s seed) from the
    store on ``conn``: the same queries for the same store, whichever benchmark asks."""
    rng = np.random.default_rng([gen.seed, 21])
    top = conn.execute("SELECT MAX(id) FROM memories").fetchone()[0] or 0
    texts = []
    for _ in range(queries):
        row = conn.execute("SELECT content FROM memories WHERE id >= ? ORDER BY id LIMIT 1", (int(rng.integers(1, top + 1)),)).fetchone()
        if row:
            texts.append(row[0])
    return gen.queries(texts, queries)


def run(path: Path, gen: Generator, *, queries: int = 200, rounds: int = 3, limit: int = 10, kept: bool = True) -> dict[str, Any]:
    """Per-call p50/p95 (wall and CPU) of ``search`` and of the raw query over ``rounds`` passes of ``queries``
    queries, the two interleaved call by call so both see the same load. ``kept=False`` times every search as if
    another process had committed just before it: the term counts and rows searches keep are dropped
    (:meth:`SearchRepository.forget_kept` without the folded texts, which outlive commits; inside the timing:
    what is kept is then one search's worth, dropped in microseconds).
    ``statements_per_search`` counts the first pass; repeated queries run fewer (``statements_per_search_again``,
    the second pass)."""
    now = EPOCH + timedelta(days=1)
    with MemoryStore.open(path, readonly=True, actor="bench") as store:
        conn = store.conn
        qs = sample_queries(conn, gen, queries)
        raw = [raw_expression(q) for q in qs]
        statements = 0

        def count(sql: str) -> None:
            nonlocal statements
            statements += not sql.startswith("--")  # "--" marks the statements SQLite runs inside FTS5

        passes: list[int] = []
        conn.set_trace_callback(count)
        try:
            for _pass in range(2):
                statements = 0
                for q in qs:
                    if not kept:
                        store.finder.forget_kept(folded_texts=False)
                    store.search(q, limit=limit, now=now)
                passes.append(statements)
        finally:
            conn.set_trace_callback(None)

        def search(i: int) -> list[Any]:
            return store.search(qs[i % len(qs)], limit=limit, now=now)

        def fresh_search(i: int) -> list[Any]:
            store.finder.forget_kept(folded_texts=False)
            return search(i)

        pair = interleaved(
            search if kept else fresh_search,
            lambda i: conn.execute(RAW_SQL, (raw[i % len(qs)], limit)).fetchall(),
            rounds=rounds * len(qs),
            keep_a=bool,
            keep_b=len,
        )
        statements = passes[0]
    return {
        "queries": len(qs),
        "rounds": rounds,
        "examples": qs[:4],
        "queries_with_hits": round(sum(bool(r) for r in pair.a.results) / len(pair.a.results), 3) if qs else 0.0,
        "statements_per_search": round(statements / len(qs), 2) if qs else 0.0,
        "statements_per_search_again": round(passes[1] / len(qs), 2) if qs else 0.0,
        "search": pair.a.summary(),
        "raw_fts5_or": pair.b.summary(),
        "ratio_p50": pair.ratio_p50(),
        "search_s": round(pair.a.wall_s, 3),
        "search_cpu_s": round(pair.a.cpu_s, 3),
        "raw_fts5_or_s": round(pair.b.wall_s, 3),
        "raw_fts5_or_cpu_s": round(pair.b.cpu_s, 3),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m memlens.bench.search_bench``: this benchmark alone, a line per size (wall and CPU, the ratio to
    the raw query, statements per search), with the load average before and after."""
    import argparse
    import os

    from memlens.bench import stores
    from memlens.bench.stores import parse_size
    from memlens.errors import InvalidInput

    parser = argparse.ArgumentParser(prog="python -m memlens.bench.search_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10k,100k", help="comma-separated store sizes (default 10k,100k; 1m for the million)")
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the 200 queries (default 3)")
    parser.add_argument(
        "--store-changing", action="store_true", help="time each search as if another process had committed just before it (nothing kept but folded texts)"
    )
    parser.add_argument("--cache-dir", type=Path, default=stores.DEFAULT_CACHE, help=f"where generated stores are kept (default {stores.DEFAULT_CACHE})")
    args = parser.parse_args(argv)
    try:
        sizes = sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()})
    except InvalidInput as exc:
        print(f"python -m memlens.bench.search_bench: {exc}", file=sys.stderr)
        return 2
    gen = Generator(args.seed)
    for size in sizes:
        built = stores.cached_store(size, args.seed, args.cache_dir)
        before = os.getloadavg()[0]
        r = run(built.path, gen, rounds=max(1, args.rounds), kept=not args.store_changing)
        s, b = r["search"], r["raw_fts5_or"]
        cpu_ratio = b["cpu_p50_ms"] / s["cpu_p50_ms"] if s["cpu_p50_ms"] else 0.0
        print(
            f"{size:>9,}: search p50 {s['p50_ms']:.3f} / {s['cpu_p50_ms']:.3f} ms (wall / cpu), raw FTS5 p50 {b['p50_ms']:.3f} / "
            f"{b['cpu_p50_ms']:.3f} ms; raw/search {r['ratio_p50']:.2f}x wall, {cpu_ratio:.2f}x cpu; statements a search "
            f"{r['statements_per_search']} (first pass), {r['statements_per_search_again']} (again); load {before:.1f} -> {os.getloadavg()[0]:.1f}"
            + ("; the store changing before every search" if args.store_changing else ""),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
