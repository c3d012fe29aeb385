"""The auto-forget sweep: finding what is due when 1% of the store is, and carrying out a fixed number, beside a
baseline that forgets the same memories one transaction each (what the sweep did before it batched its erasures).

``python -m memlens.bench.sweep_bench --size 200000`` prints the two side by side; ``python -m memlens.bench --only
sweep`` runs it with the other benchmarks.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memlens.bench.generator import EPOCH
from memlens.bench.timing import summary_ms, timed
from memlens.models import utc_from_ts
from memlens.store import MemoryStore

#: How many TTL-expired memories the timed sweep forgets (the issue's 200k case forgot 2,002).
DUE_TO_APPLY = 2000


def run(path: Path, *, due_to_apply: int = DUE_TO_APPLY, rounds: int = 5) -> dict[str, Any]:
    """On ``path`` (changed: use a copy; a second copy beside it is made for the baseline). Generated TTLs end
    between one and sixty days after the epoch, so at epoch + 60 days 1% of the store is due: the dry run (planning
    only) is timed there. Then a real sweep is timed at the moment when exactly ``due_to_apply`` TTLs have ended,
    the same number at every store size (all of them in a store with fewer), and beside it the baseline forgets
    the same memories one ``forget_ids`` call (one transaction, FTS5 secure-delete row by row) each.

    A first sweep at epoch + 1 hour (nothing due yet) runs untimed beforehand, as on any store that has been
    swept before: it starts the sweep's near-duplicate bookkeeping, which a store's first sweep builds once.
    """
    baseline_path = path.with_name(path.stem + "-baseline.db")
    shutil.copyfile(path, baseline_path)  # before either is opened: a plain copy of a closed store
    try:
        with MemoryStore.open(path, actor="bench") as store:
            conn = store.conn
            first, first_s = timed(lambda: store.sweep(now=EPOCH + timedelta(hours=1)))
            all_due_at = EPOCH + timedelta(days=60, hours=2)
            plans = []
            report = None
            for _ in range(rounds):
                report, seconds = timed(lambda: store.sweep(now=all_due_at, dry_run=True))
                plans.append(seconds)
            assert report is not None
            total = conn.execute("SELECT COUNT(*) FROM memories WHERE is_latest = 1").fetchone()[0]
            ends = [r[0] for r in conn.execute("SELECT forget_after FROM memories WHERE forget_after IS NOT NULL ORDER BY forget_after LIMIT ?", (due_to_apply,))]
            applied = None
            apply_s = None
            when: datetime | None = None
            if ends:  # a small store has fewer TTLs than due_to_apply: all of them
                # A second after the last of them ended (TTLs are spread over two months: the next ends later).
                when = utc_from_ts(ends[-1] + 1.0)
                assert when is not None
                at = when
                applied_report, apply_s = timed(lambda: store.sweep(now=at))
                applied = applied_report.total
        baseline_s = _baseline(baseline_path, when) if when is not None else None
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(str(baseline_path) + suffix).unlink(missing_ok=True)
    return {
        "latest_memories": total,
        "first_sweep_s": round(first_s, 3),
        "first_sweep_decisions": first.total,
        "due_at_60_days": report.total,
        "due_share": round(report.total / total, 4) if total else None,
        "find_due_dry_run": summary_ms(plans),
        "apply": {"due": applied, "seconds": round(apply_s, 3) if apply_s is not None else None,
                  "ms_per_memory": round(apply_s * 1000 / applied, 3) if apply_s and applied else None,
                  "baseline_seconds": round(baseline_s, 3) if baseline_s is not None else None},
    }


def _baseline(path: Path, when: datetime) -> float:
    """Seconds to forget what a sweep at ``when`` would, one transaction per memory, then purge once."""
    with MemoryStore.open(path, actor="bench") as store:
        store.sweep(now=EPOCH + timedelta(hours=1))
        due = store.sweep(now=when, dry_run=True).decisions

        def one_by_one() -> None:
            for d in due:
                store.forgetting.forget_ids([d.memory_id], reason=d.reason, now=when, operation="sweep", flag_derived=False, purge=False)
            store.forgetting.purge_deleted_terms()

        _, seconds = timed(one_by_one)
    return seconds


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) a generated store of ``--size`` memories and print the sweep's figures beside the baseline."""
    from memlens.bench import stores

    parser = argparse.ArgumentParser(prog="python -m memlens.bench.sweep_bench", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=200_000, help="memories in the generated store (default 200000)")
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    parser.add_argument("--cache-dir", type=Path, default=stores.DEFAULT_CACHE, help="where generated stores are kept")
    args = parser.parse_args(argv)
    built = stores.cached_store(args.size, args.seed, args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="memlens-sweep-bench-") as tmp:
        result = run(stores.work_copy(built, Path(tmp)))
    apply = result["apply"]
    print(f"store: {result['latest_memories']:,} latest memories; due at 60 days: {result['due_at_60_days']:,}")
    print(f"find due (dry run) p50: {result['find_due_dry_run']['p50_ms']} ms")
    print(f"sweep forgetting {apply['due']:,}: {apply['seconds']} s ({apply['ms_per_memory']} ms/memory)")
    print(f"baseline, one forget per memory: {apply['baseline_seconds']} s")


if __name__ == "__main__":
    main()
