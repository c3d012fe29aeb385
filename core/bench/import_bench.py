"""Bulk import (``remember_many``: redaction, similarity index, FTS) against the raw baseline, interleaved.

The raw baseline is what the store's own tables cost to fill and no less: ``executemany`` into ``memories`` and
``executemany`` into ``memory_fts`` (its rows indexed beforehand), no triggers, no redaction, no similarity index,
one transaction per batch of 5,000. The two are measured round by round in the same process, alternating which
goes first, each into its own store, so a neighbour's load on a shared machine falls on both alike. CPU time is
this process's plus the import's worker process's (it prepares records on the second core).

``python -m memlens.bench.import_bench`` (``--size``, default a million) times one import of generated memories on its own
(wall and CPU), with the load average beside it; ``--ratio`` runs the interleaved comparison instead.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memlens.bench.generator import EPOCH, Generator
from memlens.bench.stores import records as generated_records
from memlens.models import ts_from_dt
from memlens.storage.context import content_hash
from memlens.store import MemoryStore
from memlens.text import default_title, index_text

BATCH = 5000
#: Records per interleaved round: big enough that the import uses its worker process as a real one would.
ROUND = 25_000

_RAW_INSERT = (
    "INSERT INTO memories (id, layer, type, title, content, project, tags, importance, origin, created_at, updated_at, "
    "last_accessed_at, chain_id, forget_after, content_hash) VALUES (?, ?, ?, ?, ?, ?, '[]', 0.5, 'import', ?, ?, ?, ?, ?, ?)"
)
_RAW_FTS = "INSERT INTO memory_fts(rowid, title, content, tags) VALUES (?, ?, ?, '[]')"


def raw_rows(recs: list[dict[str, Any]], first_id: int = 1) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The baseline's memory rows and FTS rows, prepared before its clock starts (titles as remember_many makes them)."""
    rows, fts = [], []
    for i, rec in enumerate(recs, start=first_id):
        ts = ts_from_dt(rec["created_at"])
        ttl = rec.get("ttl_days")
        title = default_title(rec["content"])
        rows.append((i, rec["layer"], rec["type"], title, rec["content"], rec["project"], ts, ts, ts, i,
                     ts + ttl * 86400.0 if ttl is not None else None, content_hash(rec["content"])))  # fmt: skip
        fts.append((i, index_text(title), index_text(rec["content"])))
    return rows, fts


def _fresh(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of its finished children (the import's worker, once it has exited)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime


class _Side:
    """Wall, own CPU and worker CPU seconds summed over one side's rounds."""

    def __init__(self) -> None:
        self.wall = self.cpu = self.worker_cpu = 0.0

    def run(self, fn: Callable[[], object]) -> None:
        cpu0, kids0 = _cpu()
        wall0 = time.perf_counter()
        fn()
        self.wall += time.perf_counter() - wall0
        cpu1, kids1 = _cpu()
        self.cpu += cpu1 - cpu0
        self.worker_cpu += kids1 - kids0


def run(size: int, seed: int, workdir: Path, cache_dir: Path | None = None, *, round_size: int = ROUND) -> dict[str, Any]:
    """Import ``size`` generated memories through ``remember_many`` and the raw baseline, interleaved round by round
    (see the module docstring); throughput, ratio (ours over raw: 1.0 is as fast as raw), µs per record, wall and
    CPU seconds. ``cache_dir`` is accepted for the benchmark runner's signature; nothing is cached here."""
    recs = generated_records(Generator(seed), size)
    ours_path, raw_path = workdir / f"import-{size}.db", workdir / f"raw-{size}.db"
    _fresh(ours_path)
    _fresh(raw_path)
    ours, raw = _Side(), _Side()
    load_before = os.getloadavg()
    with MemoryStore.open(ours_path, actor="bench") as store, MemoryStore.open(raw_path, actor="bench") as raw_store:
        conn = raw_store.conn
        conn.execute("DROP TRIGGER memories_fts_insert")  # the baseline writes its FTS rows itself
        rounds = [(i, recs[i : i + round_size]) for i in range(0, size, round_size)]
        for n, (first, chunk) in enumerate(rounds):
            rows, fts = raw_rows(chunk, first + 1)

            def import_round(chunk: list[dict[str, Any]] = chunk) -> None:
                store.remember_many(chunk, batch_size=BATCH, now=EPOCH)

            def raw_round(rows: list[tuple[Any, ...]] = rows, fts: list[tuple[Any, ...]] = fts) -> None:
                for i in range(0, len(rows), BATCH):
                    conn.execute("BEGIN")
                    conn.executemany(_RAW_INSERT, rows[i : i + BATCH])
                    conn.executemany(_RAW_FTS, fts[i : i + BATCH])
                    conn.execute("COMMIT")

            # Alternate which side goes first, so neither always gets the warmer cache or the quieter moment.
            for side, fn in ((ours, import_round), (raw, raw_round)) if n % 2 == 0 else ((raw, raw_round), (ours, import_round)):
                side.run(fn)
    for path in (ours_path, raw_path):
        _fresh(path)
    return {
        "memories": size,
        "rounds": len(rounds),
        "remember_many_s": round(ours.wall, 2),
        "remember_many_cpu_s": round(ours.cpu + ours.worker_cpu, 2),
        "remember_many_worker_cpu_s": round(ours.worker_cpu, 2),
        "remember_many_per_s": round(size / ours.wall),
        "remember_many_us_per_record": round(ours.wall * 1e6 / size, 1),
        "raw_executemany_s": round(raw.wall, 2),
        "raw_executemany_cpu_s": round(raw.cpu, 2),
        "raw_executemany_per_s": round(size / raw.wall),
        "raw_us_per_record": round(raw.wall * 1e6 / size, 1),
        "ratio": round(raw.wall / ours.wall, 3),
        "seconds_per_million": round(ours.wall * 1_000_000 / size, 1),
        # CPU time is what a neighbour's load on a shared machine changes least: what each side costs, and the ratio
        # the two would have with two idle cores (ours can go no faster than its busier process, nor than half its
        # total CPU; raw no faster than its CPU).
        "remember_many_cpu_us_per_record": round((ours.cpu + ours.worker_cpu) * 1e6 / size, 1),
        "raw_cpu_us_per_record": round(raw.cpu * 1e6 / size, 1),
        "ratio_by_cpu_on_two_idle_cores": round(raw.cpu / max(ours.cpu, ours.worker_cpu, (ours.cpu + ours.worker_cpu) / 2), 3),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def one_import(size: int, seed: int, path: Path, *, timed: Callable[[Callable[[], object]], object] | None = None) -> dict[str, Any]:
    """One ``remember_many`` of ``size`` generated memories into a fresh store at ``path`` (redaction, similarity
    index and FTS included); wall and CPU seconds (this process and the worker), and the load average around it.
    ``timed(fn)`` runs the import (and only it: the records are generated before), a profiler for instance."""
    recs = generated_records(Generator(seed), size)
    _fresh(path)
    load_before = os.getloadavg()
    side = _Side()
    with MemoryStore.open(path, actor="bench") as store:
        side.run(lambda: (timed or (lambda fn: fn()))(lambda: store.remember_many(recs, batch_size=BATCH, now=EPOCH)))
        count = store.conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    return {
        "memories": count,
        "wall_s": round(side.wall, 1),
        "cpu_s": round(side.cpu, 1),
        "worker_cpu_s": round(side.worker_cpu, 1),
        "us_per_record": round(side.wall * 1e6 / size, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def profiled_import(size: int, seed: int, path: Path, top: int = 30) -> str:
    """One :func:`one_import` under cProfile (the importing process; the worker's share shows as the wait in
    ``prepared_in_order``): the functions by own time, and which code ran each statement kind (``execute``,
    ``executemany``), as text. cProfile slows Python code more than SQLite's, so read shares, not totals."""
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()
    result = one_import(size, seed, path, timed=profile.runcall)
    out = io.StringIO()
    out.write(f"{result}\n")
    stats = pstats.Stats(profile, stream=out).sort_stats("tottime")
    stats.print_stats(top)
    stats.print_callers("method 'execute")
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    """``python -m memlens.bench.import_bench``: one timed import (default), or the interleaved ratio (``--ratio``)."""
    parser = argparse.ArgumentParser(prog="python -m memlens.bench.import_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="how many generated memories (default 1000000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ratio", action="store_true", help="the interleaved comparison with the raw baseline instead")
    parser.add_argument("--profile", action="store_true", help="one import under cProfile: where the importing process's time goes")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/memlens-import-bench"))
    args = parser.parse_args(argv)
    size = args.size
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.profile:
        print(profiled_import(size, args.seed, args.workdir / f"one-{size}.db"))
        _fresh(args.workdir / f"one-{size}.db")
        return 0
    result = run(size, args.seed, args.workdir) if args.ratio else one_import(size, args.seed, args.workdir / f"one-{size}.db")
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key.ljust(width)}  {value}")
    if not args.ratio:
        _fresh(args.workdir / f"one-{size}.db")
    return 0


if __name__ == "__main__":
    sys.exit(main())
