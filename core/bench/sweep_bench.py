"""The auto-forget sweep: finding what is due when 1% of the store is (beside the raw query of the due rows, run
interleaved), and carrying out a fixed number of forgets, with the erasure checked, beside a baseline that forgets
the same memories one transaction each (what the sweep did before it batched its erasures).

``python -m memlens.bench.sweep_bench --size 200000`` prints the figures; ``python -m memlens.bench --only sweep``
runs it with the other benchmarks.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memlens.bench.forget_bench import describe_erasure, erasure, unique_sample
from memlens.bench.generator import EPOCH
from memlens.bench.timing import clock, interleaved, seconds
from memlens.models import utc_from_ts
from memlens.store import MemoryStore

#: How many TTL-expired memories the timed sweep forgets (the issue's 200k case forgot 2,002).
DUE_TO_APPLY = 2000
#: The query under the TTL rule, as SQLite runs it by itself: the raw cost of reading the due rows.
_RAW_DUE = (
    "SELECT id, title, forget_after FROM memories WHERE pinned = 0 AND created_at <= ? AND forget_after IS NOT NULL "
    "AND forget_after <= ? ORDER BY forget_after, id"
)


def run(path: Path, *, due_to_apply: int = DUE_TO_APPLY, rounds: int = 7, baseline: bool = True) -> dict[str, Any]:
    """On ``path`` (changed: use a copy; a second copy beside it is made for the baseline). Generated TTLs end
    between one and sixty days after the epoch, so at epoch + 60 days 1% of the store is due: the dry run (finding
    what is due, wall and CPU per call) is timed there, interleaved round by round with the raw query of the due
    rows, and its first (cold) call reported apart. Then a real sweep is timed at the moment when exactly
    ``due_to_apply`` TTLs have ended, the same number at every store size (all of them in a store with fewer); a
    sample of the forgotten texts is then looked for in the store's files. Beside it, unless ``baseline`` is False,
    the baseline forgets the same memories one ``forget_ids`` call (one transaction, FTS5 secure-delete row by
    row) each.

    A first sweep at epoch + 1 hour (nothing due yet) runs beforehand, as on any store that has been swept before:
    it starts the sweep's near-duplicate bookkeeping, which a store's first sweep builds once.
    """
    baseline_path = path.with_name(path.stem + "-baseline.db")
    if baseline:
        shutil.copyfile(path, baseline_path)  # before either is opened: a plain copy of a closed store
    try:
        with MemoryStore.open(path, actor="bench") as store:
            conn = store.conn
            first, first_sample = clock(lambda: store.sweep(now=EPOCH + timedelta(hours=1)))
            all_due_at = EPOCH + timedelta(days=60, hours=2)
            cutoff = all_due_at.timestamp() - store.settings.grace_hours * 3600.0
            report, cold = clock(lambda: store.sweep(now=all_due_at, dry_run=True))
            # Each round keeps a verdict, not its plan or rows (see interleaved: kept results are timed as page faults).
            pair = interleaved(
                lambda _i: store.sweep(now=all_due_at, dry_run=True),
                lambda _i: conn.execute(_RAW_DUE, (cutoff, all_due_at.timestamp())).fetchall(),
                rounds,
                keep_a=lambda r: r.decisions == report.decisions,
                keep_b=len,
            )
            same = all(pair.a.results)
            # Schema 10 makes memories_by_ttl cover this query: the plan says whether the store read has it.
            plan = " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {_RAW_DUE}", (cutoff, all_due_at.timestamp())))
            total = conn.execute("SELECT COUNT(*) FROM memories WHERE is_latest = 1").fetchone()[0]
            doomed = conn.execute(
                "SELECT id, content, forget_after FROM memories WHERE forget_after IS NOT NULL ORDER BY forget_after LIMIT ?", (due_to_apply,)
            ).fetchall()
            apply: dict[str, Any] = {"due": None}
            when: datetime | None = None
            if doomed:  # a small store has fewer TTLs than due_to_apply: all of them
                # A second after the last of them ended (TTLs are spread over two months: the next ends later).
                when = utc_from_ts(doomed[-1][2] + 1.0)
                assert when is not None
                at = when
                texts = unique_sample(conn, [content for _, content, _ in doomed])
                applied, sample = clock(lambda: store.sweep(now=at))
                apply = {
                    "due": applied.total,
                    "seconds": round(sample.wall, 3),
                    "cpu_seconds": round(sample.cpu, 3),
                    "ms_per_memory": round(sample.wall * 1000 / applied.total, 3) if applied.total else None,
                    "erasure": erasure(store, path, texts),
                }
        if baseline and when is not None:
            base = _baseline(baseline_path, when)
            apply.update(baseline_seconds=round(base.wall, 3), baseline_cpu_seconds=round(base.cpu, 3), ratio=round(base.wall / apply["seconds"], 1))
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(str(baseline_path) + suffix).unlink(missing_ok=True)
    return {
        "latest_memories": total,
        **seconds("first_sweep", first_sample),
        "first_sweep_decisions": first.total,
        "due_at_60_days": report.total,
        "due_share": round(report.total / total, 4) if total else None,
        "find_due_first_call": {"ms": round(cold.wall * 1000, 3), "cpu_ms": round(cold.cpu * 1000, 3)},
        "find_due_dry_run": pair.a.summary(),
        "raw_due_query": pair.b.summary(),
        "raw_due_query_plan": plan,
        "find_due_over_raw_p50": round(pair.a.summary()["p50_ms"] / pair.b.summary()["p50_ms"], 2) if pair.b.summary()["p50_ms"] else None,
        "same_decisions_every_round": same,
        "apply": apply,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _baseline(path: Path, when: datetime) -> Any:
    """Wall and CPU seconds to forget what a sweep at ``when`` would, one transaction per memory, then purge once."""
    with MemoryStore.open(path, actor="bench") as store:
        store.sweep(now=EPOCH + timedelta(hours=1))
        due = store.sweep(now=when, dry_run=True).decisions

        def one_by_one() -> None:
            for d in due:
                store.forgetting.forget_ids([d.memory_id], reason=d.reason, now=when, operation="sweep", flag_derived=False, purge=False)
            store.forgetting.purge_deleted_terms()

        _, sample = clock(one_by_one)
    return sample


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) a generated store of ``--size`` memories and print the sweep's figures beside the baselines."""
    from memlens.bench import stores

    parser = argparse.ArgumentParser(prog="python -m memlens.bench.sweep_bench", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=200_000, help="memories in the generated store (default 200000)")
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    parser.add_argument("--rounds", type=int, default=7, help="dry runs timed, interleaved with the raw query (default 7)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the one-forget-per-memory baseline (minutes at 1M)")
    parser.add_argument("--cache-dir", type=Path, default=stores.DEFAULT_CACHE, help="where generated stores are kept")
    parser.add_argument("--db", type=Path, help="a generated store to use (a copy of it) instead of the cached one for --size")
    args = parser.parse_args(argv)
    built = stores.BuiltStore(args.db, args.size, args.seed, 0.0, True) if args.db else stores.cached_store(args.size, args.seed, args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="memlens-sweep-bench-") as tmp:
        result = run(stores.work_copy(built, Path(tmp)), rounds=args.rounds, baseline=not args.no_baseline)
    find, raw, cold, apply = result["find_due_dry_run"], result["raw_due_query"], result["find_due_first_call"], result["apply"]
    print(f"store: {result['latest_memories']:,} latest memories; due at 60 days: {result['due_at_60_days']:,}; load average {result['load_average']}")
    print(f"find due (dry run) p50: {find['p50_ms']} ms wall, {find['cpu_p50_ms']} ms CPU; first call {cold['ms']} ms wall, {cold['cpu_ms']} ms CPU")
    print(f"raw query of the due rows p50 (interleaved): {raw['p50_ms']} ms wall, {raw['cpu_p50_ms']} ms CPU; dry run / raw: {result['find_due_over_raw_p50']}")
    print(f"its plan: {result['raw_due_query_plan']}")
    if apply.get("due") is not None:
        print(f"sweep forgetting {apply['due']:,}: {apply['seconds']} s wall, {apply['cpu_seconds']} s CPU ({apply['ms_per_memory']} ms/memory)")
        print(describe_erasure(apply["erasure"]))
    if "baseline_seconds" in apply:
        print(f"baseline, one forget per memory: {apply['baseline_seconds']} s wall, {apply['baseline_cpu_seconds']} s CPU ({apply['ratio']}x the sweep)")


if __name__ == "__main__":
    main()
