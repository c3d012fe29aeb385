"""forget() with erasure (table, FTS index, WAL): one memory against a plain DELETE of a row, and 2,000 at once
(``forget_many``, what the GUI's multi-select and ``memlens forget`` with many ids use) with the erasure checked,
beside the same call with the index merge switched off (FTS5's secure-delete row by row: what it did before).

``python -m memlens.bench.forget_bench --size 200000`` prints the figures; ``python -m memlens.bench --only
forget`` runs it with the other benchmarks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memlens.bench.generator import EPOCH
from memlens.bench.timing import clock, summary_ms, timed
from memlens.storage import forgetting
from memlens.store import MemoryStore

#: How many memories the bulk figure forgets in one call.
BULK_FORGETS = 2000
#: How many of the forgotten texts are looked for in the files afterwards.
ERASURE_SAMPLE = 50
#: Counts the texts (a JSON list on stdin) found in the files (argv[1:]); run in a child process, because the
#: benchmark holds the store open and must not open its files through a second descriptor (see STYLE.md).
_SCAN = (
    "import json, os, sys; texts = [t.encode() for t in json.load(sys.stdin)]; "
    "data = b''.join(open(p, 'rb').read() for p in sys.argv[1:] if os.path.exists(p)); "
    "print(sum(t in data for t in texts))"
)


def run(path: Path, seed: int, *, calls: int = 20, bulk: int = BULK_FORGETS, baseline: bool = True) -> dict[str, Any]:
    """Time ``calls`` forgets of random latest memories on ``path`` (changed: use a copy), and as many plain
    ``DELETE FROM memories`` statements (its triggers keep the FTS index in step; no audit, no WAL purge). Then one
    ``forget_many`` of ``bulk`` other random memories, with a sample of their texts looked for afterwards, and
    (``baseline``) the same call on a copy made beforehand with the bulk index merge switched off."""
    now = EPOCH + timedelta(days=1)
    rng = np.random.default_rng([seed, 31])
    baseline_path = path.with_name(path.stem + "-baseline.db")
    if baseline and bulk:
        shutil.copyfile(path, baseline_path)  # before it is opened: a plain copy of a closed store
    try:
        with MemoryStore.open(path, actor="bench") as store:
            top = store.conn.execute("SELECT MAX(id) FROM memories").fetchone()[0] or 0
            picked = sorted({int(x) for x in rng.integers(1, top + 1, size=calls * 3)})
            ids = [i for i in picked if store.exists(i)]
            rng.shuffle(ids)
            forget_ids, delete_ids = ids[:calls], ids[calls : 2 * calls]
            forget_samples = [clock(lambda: store.forget(mid, reason="benchmark", now=now))[1] for mid in forget_ids]  # noqa: B023
            conn = store.conn

            def plain_delete(mid: int) -> None:
                conn.execute("BEGIN")
                conn.execute("DELETE FROM memories WHERE id = ?", (mid,))
                conn.execute("COMMIT")

            delete_times = [timed(lambda: plain_delete(mid))[1] for mid in delete_ids]  # noqa: B023
            secure = store.stats(now=now)["fts_secure_delete"]
            many = [r[0] for r in conn.execute("SELECT id FROM memories ORDER BY random() LIMIT ?", (bulk,))] if bulk else []
            bulk_result: dict[str, Any] | None = None
            if many:
                texts = unique_sample(conn, [r[0] for r in conn.execute(f"SELECT content FROM memories WHERE id IN ({','.join(map(str, many))})")])
                result, sample = clock(lambda: store.forget_many(many, reason="benchmark", now=now))
                bulk_result = {
                    "forgets": len(result.erased),
                    "seconds": round(sample.wall, 3),
                    "cpu_seconds": round(sample.cpu, 3),
                    "ms_per_memory": round(sample.wall * 1000 / max(1, len(result.erased)), 3),
                    "erasure": erasure(store, path, texts),
                }
        if bulk_result is not None and baseline:
            base = _row_by_row(baseline_path, many, now)
            bulk_result.update(baseline_seconds=round(base.wall, 3), baseline_cpu_seconds=round(base.cpu, 3), ratio=round(base.wall / bulk_result["seconds"], 1))
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(str(baseline_path) + suffix).unlink(missing_ok=True)
    forget = summary_ms([s.wall for s in forget_samples], [s.cpu for s in forget_samples])
    delete = summary_ms(delete_times)
    return {
        "forget": forget,
        "plain_delete": delete,
        "fts_secure_delete": secure,
        "ratio_p50": round(forget["p50_ms"] / delete["p50_ms"], 1) if delete["p50_ms"] else None,
        "bulk": bulk_result,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _row_by_row(path: Path, ids: list[int], now: Any) -> Any:
    """Wall and CPU seconds of the same ``forget_many`` with FTS5's secure-delete row by row (no bulk merge)."""
    threshold = forgetting.BULK_PURGE_ROWS
    forgetting.BULK_PURGE_ROWS = len(ids) + 1
    try:
        with MemoryStore.open(path, actor="bench") as store:
            _, sample = clock(lambda: store.forget_many(ids, reason="benchmark", now=now))
    finally:
        forgetting.BULK_PURGE_ROWS = threshold
    return sample


def held(conn: Any, texts: list[str]) -> Counter[str]:
    """How many memories hold each of ``texts`` (a pass over the table per 500: text has no index)."""
    found: Counter[str] = Counter()
    for start in range(0, len(texts), 500):
        chunk = texts[start : start + 500]
        found.update(r[0] for r in conn.execute(f"SELECT content FROM memories WHERE content IN ({','.join('?' * len(chunk))})", chunk))
    return found


def unique_sample(conn: Any, texts: list[str]) -> list[str]:
    """About :data:`ERASURE_SAMPLE` of ``texts``, spread over them, that no other memory holds (the generator repeats
    some texts): after their memories are forgotten, those must be nowhere."""
    candidates = texts[:: max(1, len(texts) // (3 * ERASURE_SAMPLE))]
    count = held(conn, candidates)
    return [t for t in candidates if count[t] == 1][:ERASURE_SAMPLE]


def erasure(store: MemoryStore, path: Path, texts: list[str]) -> dict[str, Any]:
    """Whether the forgotten ``texts`` are gone: from the rows, byte for byte from the main file and the WAL (read
    by a child process), with FTS5's secure-delete back on and no erasure pending."""
    conn = store.conn
    rows_left = sum(held(conn, texts).values())
    files = [str(path), f"{path}-wal"]
    found = subprocess.run([sys.executable, "-c", _SCAN, *files], input=json.dumps(texts), capture_output=True, text=True, check=True)
    in_files = int(found.stdout.strip())
    secure = None
    if store.ctx.fts_secure:
        secure = all(conn.execute(f"SELECT v FROM {t}_config WHERE k = 'secure-delete'").fetchone()[0] == 1 for t in ("memory_fts", "similarity_index"))
    pending = store.ctx.erasure_pending()
    return {
        "sampled_texts": len(texts),
        "left_in_rows": rows_left,
        "found_in_files": in_files,
        "fts_secure_delete_back_on": secure,
        "pending": pending,
        "verified": bool(texts) and rows_left == 0 and in_files == 0 and secure is not False and not pending,
    }


def describe_erasure(e: dict[str, Any]) -> str:
    """One line about an :func:`erasure` check."""
    return (f"erasure {'verified' if e['verified'] else 'NOT verified'} ({e['sampled_texts']} texts sampled: {e['left_in_rows']} in rows, "
            f"{e['found_in_files']} in the file or WAL; pending: {e['pending']})")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) a generated store of ``--size`` memories and print the forget figures beside their baselines."""
    from memlens.bench import stores

    parser = argparse.ArgumentParser(prog="python -m memlens.bench.forget_bench", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=200_000, help="memories in the generated store (default 200000)")
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    parser.add_argument("--bulk", type=int, default=BULK_FORGETS, help=f"memories forgotten in one call (default {BULK_FORGETS})")
    parser.add_argument("--no-baseline", action="store_true", help="skip the row-by-row baseline of the bulk forget")
    parser.add_argument("--cache-dir", type=Path, default=stores.DEFAULT_CACHE, help="where generated stores are kept")
    parser.add_argument("--db", type=Path, help="a generated store to use (a copy of it) instead of the cached one for --size")
    args = parser.parse_args(argv)
    built = stores.BuiltStore(args.db, args.size, args.seed, 0.0, True) if args.db else stores.cached_store(args.size, args.seed, args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="memlens-forget-bench-") as tmp:
        result = run(stores.work_copy(built, Path(tmp)), args.seed, bulk=args.bulk, baseline=not args.no_baseline)
    one = result["forget"]
    print(f"load average {result['load_average']}")
    print(f"one forget p50: {one['p50_ms']} ms wall, {one['cpu_p50_ms']} ms CPU; plain DELETE p50 {result['plain_delete']['p50_ms']} ms")
    bulk = result["bulk"]
    if bulk:
        print(f"forget_many of {bulk['forgets']:,}: {bulk['seconds']} s wall, {bulk['cpu_seconds']} s CPU ({bulk['ms_per_memory']} ms/memory); "
              + describe_erasure(bulk["erasure"]))  # fmt: skip
        if "baseline_seconds" in bulk:
            print(f"baseline, secure-delete row by row: {bulk['baseline_seconds']} s wall, {bulk['baseline_cpu_seconds']} s CPU ({bulk['ratio']}x)")


if __name__ == "__main__":
    main()
