"""Bulk import through remember_many against raw executemany inserts into the same schema with its FTS triggers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from memlens.bench import stores
from memlens.bench.generator import Generator
from memlens.models import ts_from_dt
from memlens.store import MemoryStore
from memlens.text import default_title

_RAW_INSERT = (
    "INSERT INTO memories (id, layer, type, title, content, project, tags, importance, origin, created_at, updated_at, "
    "last_accessed_at, chain_id, forget_after, content_hash) VALUES (?, ?, ?, ?, ?, ?, '[]', 0.5, 'import', ?, ?, ?, ?, ?, '')"
)


def raw_rows(recs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The baseline's rows, prepared before its clock starts (titles as remember_many would make them)."""
    rows = []
    for i, rec in enumerate(recs, start=1):
        ts = ts_from_dt(rec["created_at"])
        ttl = rec.get("ttl_days")
        rows.append((i, rec["layer"], rec["type"], default_title(rec["content"]), rec["content"], rec["project"], ts, ts, ts, i,
                     ts + ttl * 86400.0 if ttl is not None else None))
    return rows


def raw_import(path: Path, rows: list[tuple[Any, ...]], batch_size: int = 5000) -> float:
    """Seconds to insert ``rows`` with executemany, one transaction per batch, into a fresh store's schema (its
    FTS5 triggers index every row, as they do for remember_many)."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    with MemoryStore.open(path, actor="bench") as store:
        conn = store.conn
        started = time.perf_counter()
        for i in range(0, len(rows), batch_size):
            conn.execute("BEGIN")
            conn.executemany(_RAW_INSERT, rows[i : i + batch_size])
            conn.execute("COMMIT")
        return time.perf_counter() - started


def run(size: int, seed: int, workdir: Path, cache_dir: Path) -> dict[str, Any]:
    """Import ``size`` generated memories both ways into fresh files; memories per second and their ratio. The
    remember_many store becomes the cached store for this size when the cache lacks it."""
    recs = stores.records(Generator(seed), size)
    rows = raw_rows(recs)
    raw_seconds = raw_import(workdir / f"raw-{size}.db", rows)
    for suffix in ("", "-wal", "-shm"):
        Path(str(workdir / f"raw-{size}.db") + suffix).unlink(missing_ok=True)
    built = stores.cached_store(size, seed, cache_dir, recs=recs)
    if built.cached:
        seconds = stores.build(workdir / f"import-{size}.db", recs)
        for suffix in ("", "-wal", "-shm"):
            Path(str(workdir / f"import-{size}.db") + suffix).unlink(missing_ok=True)
    else:
        seconds = built.build_seconds
    ours = size / seconds
    raw = size / raw_seconds
    return {
        "memories": size,
        "remember_many_s": round(seconds, 2),
        "remember_many_per_s": round(ours),
        "raw_executemany_s": round(raw_seconds, 2),
        "raw_executemany_per_s": round(raw),
        "ratio": round(ours / raw, 3),
        "seconds_per_million": round(seconds * 1_000_000 / size, 1),
    }
