"""forget() of one memory with erasure (table, FTS index, WAL) against a plain DELETE of a row."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memlens.bench.generator import EPOCH
from memlens.bench.timing import summary_ms, timed
from memlens.store import MemoryStore


def run(path: Path, seed: int, *, calls: int = 20) -> dict[str, Any]:
    """Time ``calls`` forgets of random latest memories on ``path`` (changed: use a copy), and as many plain
    ``DELETE FROM memories`` statements (its triggers keep the FTS index in step; no audit, no WAL purge)."""
    now = EPOCH + timedelta(days=1)
    rng = np.random.default_rng([seed, 31])
    with MemoryStore.open(path, actor="bench") as store:
        top = store.conn.execute("SELECT MAX(id) FROM memories").fetchone()[0] or 0
        picked = sorted({int(x) for x in rng.integers(1, top + 1, size=calls * 3)})
        ids = [i for i in picked if store.exists(i)]
        rng.shuffle(ids)
        forget_ids, delete_ids = ids[:calls], ids[calls : 2 * calls]
        forget_times = [timed(lambda: store.forget(mid, reason="benchmark", now=now))[1] for mid in forget_ids]  # noqa: B023
        conn = store.conn

        def plain_delete(mid: int) -> None:
            conn.execute("BEGIN")
            conn.execute("DELETE FROM memories WHERE id = ?", (mid,))
            conn.execute("COMMIT")

        delete_times = [timed(lambda: plain_delete(mid))[1] for mid in delete_ids]  # noqa: B023
        secure = store.stats(now=now)["fts_secure_delete"]
    forget = summary_ms(forget_times)
    delete = summary_ms(delete_times)
    return {
        "forget": forget,
        "plain_delete": delete,
        "fts_secure_delete": secure,
        "ratio_p50": round(forget["p50_ms"] / delete["p50_ms"], 1) if delete["p50_ms"] else None,
    }
