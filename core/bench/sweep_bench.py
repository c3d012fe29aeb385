"""The auto-forget sweep: finding what is due when 1% of the store is, and carrying out a fixed number."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from memlens.bench.generator import EPOCH
from memlens.bench.timing import summary_ms, timed
from memlens.models import utc_from_ts
from memlens.store import MemoryStore


def run(path: Path, *, due_to_apply: int = 1000, rounds: int = 5) -> dict[str, Any]:
    """On ``path`` (changed: use a copy). Generated TTLs end between one and sixty days after the epoch, so at
    epoch + 60 days 1% of the store is due: the dry run (planning only) is timed there. Then a real sweep is
    timed at the moment when exactly ``due_to_apply`` TTLs have ended, the same number at every store size
    (all of them in a store with fewer).

    A first sweep at epoch + 1 hour (nothing due yet) runs untimed beforehand, as on any store that has been
    swept before: it starts the sweep's near-duplicate bookkeeping, which a store's first sweep builds once.
    """
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
        if ends:  # a small store has fewer TTLs than due_to_apply: all of them
            # A second after the last of them ended (TTLs are spread over two months: the next ends later).
            when = utc_from_ts(ends[-1] + 1.0)
            assert when is not None
            applied_report, apply_s = timed(lambda: store.sweep(now=when))
            applied = applied_report.total
    return {
        "latest_memories": total,
        "first_sweep_s": round(first_s, 3),
        "first_sweep_decisions": first.total,
        "due_at_60_days": report.total,
        "due_share": round(report.total / total, 4) if total else None,
        "find_due_dry_run": summary_ms(plans),
        "apply": {"due": applied, "seconds": round(apply_s, 3) if apply_s is not None else None,
                  "ms_per_memory": round(apply_s * 1000 / applied, 3) if apply_s and applied else None},
    }
