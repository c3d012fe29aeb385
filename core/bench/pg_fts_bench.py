"""``python -m memlens.bench.pg_fts_bench``: the PostgreSQL full-text index (:mod:`memlens.postgres.fts`) against
SQLite FTS5 on the same generated memories, in the same process.

It starts a throwaway server (:mod:`memlens.postgres.throwaway`), indexes ``--sizes`` generated memories in both
(FTS5 in an in-memory database with memlens's ``memory_fts`` definition), then times ``ranked`` (limit 60) and
``match_count`` (capped as search caps them) call by call, interleaved with the same FTS5 statement, for the
generator's 2-4 word queries joined by AND and by OR. Prints wall and CPU time, the ratio (FTS5's p50 over
PostgreSQL's: below 1, PostgreSQL is slower) and the load average; ``--json`` prints the figures as JSON.
The PostgreSQL side's CPU time is this process's only: the server's own work shows in wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from typing import Any

import psycopg

from memlens import text
from memlens.bench.generator import Generator
from memlens.bench.stores import parse_size
from memlens.bench.timing import clock, interleaved, machine
from memlens.postgres import fts, throwaway

FTS5_DDL = (
    "CREATE VIRTUAL TABLE memory_fts USING fts5(title, content, tags, context, dates, content='', tokenize='porter unicode61 remove_diacritics 2')"
)
WEIGHTS = (1.0, 1.0, 2.0, 0.5, 1.0)  # SearchTuning's defaults
LIMIT = 60
CAP = 2001  # search counts each term to common_term_matches + 1
BATCH = 5000


def memory_rows(size: int, seed: int) -> list[tuple[int, str, str, str, str, str]]:
    """``size`` generated memories as ``memories`` rows: (id, title, content, tags, index_context, index_dates)."""
    gen = Generator(seed)
    rows = []
    for i, memory in enumerate(gen.memories(size), start=1):
        tags = json.dumps([memory.project] if memory.project else [])
        rows.append((i, text.default_title(memory.content), memory.content, tags, "", memory.created_at.strftime("%Y-%m-%d")))
    return rows


def run(size: int, seed: int, queries: int, url: str) -> dict[str, Any]:
    """Index ``size`` memories in both and time the searches; the figures as a dict."""
    rows = memory_rows(size, seed)
    lite = sqlite3.connect(":memory:")
    lite.execute(FTS5_DDL)
    with psycopg.connect(url) as pg:
        for statement in fts.FTS_DDL:
            pg.execute(statement)
        pg.commit()

        def index_pg() -> None:
            for start in range(0, len(rows), BATCH):
                fts.index(pg, rows[start : start + BATCH])
                pg.commit()

        def index_lite() -> None:
            sql = "INSERT INTO memory_fts(rowid, title, content, tags, context, dates) VALUES (?, ?, ?, ?, ?, ?)"
            for start in range(0, len(rows), BATCH):
                batch = rows[start : start + BATCH]
                lite.executemany(sql, [(r[0], *(text.index_text(t) for t in r[1:])) for r in batch])
                lite.commit()

        _, pg_index = clock(index_pg)
        _, lite_index = clock(index_lite)
        # Fresh tables: statistics and the visibility map as autovacuum would leave them a little later.
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("VACUUM ANALYZE memory_fts_postings")
            admin.execute("VACUUM ANALYZE memory_fts_docs")

        gen = Generator(seed)
        texts = [r[2] for r in rows[:: max(1, len(rows) // 1000)]]
        expressions = []
        for query in gen.queries(texts, queries):
            terms = text.query_terms(query)
            expressions += [text.match_expression(terms, "AND"), text.match_expression(terms, "OR")]
        words = sorted({t.fts() for q in gen.queries(texts, queries) for t in text.query_terms(q)})

        ranked_sql = "SELECT rowid, bm25(memory_fts, ?, ?, ?, ?, ?) FROM memory_fts WHERE memory_fts MATCH ? ORDER BY 2 LIMIT ?"
        count_sql = "SELECT count(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?)"
        ranked = interleaved(
            lambda i: fts.ranked(pg, expressions[i], WEIGHTS, LIMIT),
            lambda i: lite.execute(ranked_sql, (*WEIGHTS, expressions[i], LIMIT)).fetchall(),
            rounds=len(expressions),
        )
        counted = interleaved(
            lambda i: fts.match_count(pg, words[i], CAP),
            lambda i: lite.execute(count_sql, (words[i], CAP)).fetchone()[0],
            rounds=len(words),
        )
        counted_expr = interleaved(
            lambda i: fts.match_count(pg, expressions[i], CAP),
            lambda i: lite.execute(count_sql, (expressions[i], CAP)).fetchone()[0],
            rounds=len(expressions),
        )
        pg.rollback()
        # FTS5 breaks ties at the limit in its own order: compare the scores, which ties cannot reorder.
        same = sum([s for _, s in a] == sorted(float(s) for _, s in b) for a, b in zip(ranked.a.results, ranked.b.results, strict=True))
    return {
        "size": size,
        "index_pg_us_per_row": round(pg_index.wall / size * 1e6, 1),
        "index_pg_cpu_us_per_row": round(pg_index.cpu / size * 1e6, 1),
        "index_fts5_us_per_row": round(lite_index.wall / size * 1e6, 1),
        "index_fts5_cpu_us_per_row": round(lite_index.cpu / size * 1e6, 1),
        "ranked_pg": ranked.a.summary(),
        "ranked_fts5": ranked.b.summary(),
        "ranked_ratio_p50": ranked.ratio_p50(),
        "count_word_pg": counted.a.summary(),
        "count_word_fts5": counted.b.summary(),
        "count_word_ratio_p50": counted.ratio_p50(),
        "count_expression_pg": counted_expr.a.summary(),
        "count_expression_fts5": counted_expr.b.summary(),
        "count_expression_ratio_p50": counted_expr.ratio_p50(),
        "ranked_same_hits": f"{same}/{len(expressions)}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memlens.bench.pg_fts_bench", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10k,100k", help="comma-separated sizes (10k, 100k, 1m)")
    parser.add_argument("--queries", type=int, default=100, help="generated queries (each run with AND and with OR)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    results = []
    with throwaway.running() as server:
        for size_text in args.sizes.split(","):
            size = parse_size(size_text)
            name = f"fts_bench_{size}"
            with psycopg.connect(server.url(), autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {name}")
            results.append(run(size, args.seed, args.queries, server.url(name)))
            if not args.json:
                _print(results[-1])
    if args.json:
        print(json.dumps({"machine": machine(), "results": results}, indent=2))
    return 0


def _print(r: dict[str, Any]) -> None:
    print(f"--- {r['size']} memories (load average {r['load_average']})")
    print(
        f"index      PostgreSQL {r['index_pg_us_per_row']} µs/row (CPU {r['index_pg_cpu_us_per_row']}), FTS5 {r['index_fts5_us_per_row']} µs/row (CPU {r['index_fts5_cpu_us_per_row']})"
    )
    for key, label in (("ranked", f"ranked {LIMIT}"), ("count_word", "count word"), ("count_expression", "count expr")):
        a, b = r[f"{key}_pg"], r[f"{key}_fts5"]
        print(
            f"{label:<10} PostgreSQL p50 {a['p50_ms']} ms (CPU {a['cpu_p50_ms']}) p95 {a['p95_ms']} ms, FTS5 p50 {b['p50_ms']} ms "
            f"(CPU {b['cpu_p50_ms']}) p95 {b['p95_ms']} ms, ratio {r[f'{key}_ratio_p50']} ({a['calls']} calls)"
        )
    print(f"ranked hits equal to FTS5's: {r['ranked_same_hits']}")


if __name__ == "__main__":
    sys.exit(main())
