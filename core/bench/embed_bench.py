"""What the optional local model costs (memlens[local]): embedding a store's memories, and searching with it.

``python -m memlens.bench.embed_bench --size 10000`` takes the generated benchmark store of that size (built and
cached as the other benchmarks do; memories of about 200 characters), embeds every memory on a copy with
``embed_pending`` and the local model, then times ``search`` with the model against ``search`` without it, call by
call interleaved so both see the same load, and the query's embedding alone. ``--texts FILE`` (a LoCoMo-shaped JSON
file) embeds its turns instead of a generated store, for real conversation text. The load average is printed beside
every figure: the machine is shared, so the ratio of the two searches is the figure that holds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memlens.bench.generator import EPOCH, Generator
from memlens.bench.stores import cached_store, work_copy
from memlens.bench.timing import interleaved, machine, summary_ms
from memlens.store import MemoryStore


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg says them (empty where there is none)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return ""


def embed_store(path: Path, *, batch: int = 64) -> dict[str, Any]:
    """Embed every latest memory of the store at ``path`` with the local model; the seconds it took and the rate."""
    from memlens.local_embeddings import LocalEmbedder

    embedder = LocalEmbedder()
    with MemoryStore.open(path, actor="bench") as store:
        chars = [len(row[0]) for row in store.conn.execute("SELECT content FROM memories WHERE is_latest = 1")]
        load_before = load_average()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        stored = store.embed_pending(embedder, batch=batch, progress=_progress)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        print(file=sys.stderr)
    return {
        "memories": stored,
        "mean_chars": round(float(np.mean(chars)), 1) if chars else 0.0,
        "seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "per_second": round(stored / wall, 1) if wall > 0 else None,
        "load_before": load_before,
        "load_after": load_average(),
    }


def search_latency(path: Path, gen: Generator, *, queries: int = 100) -> dict[str, Any]:
    """Per-call ms of ``search`` with the local model (the query embedded each time) and without, interleaved, and
    of embedding one query alone."""
    from memlens.local_embeddings import LocalEmbedder

    embedder = LocalEmbedder()
    now = EPOCH + timedelta(days=1)
    with MemoryStore.open(path, readonly=True, actor="bench") as store:
        rng = np.random.default_rng([gen.seed, 31])
        top = store.conn.execute("SELECT MAX(id) FROM memories").fetchone()[0] or 0
        texts = [row[0] for i in rng.integers(1, top + 1, queries) if (row := store.conn.execute("SELECT content FROM memories WHERE id >= ? LIMIT 1", (int(i),)).fetchone())]
        qs = gen.queries(texts, queries)
        embedder.embed_query("warm up")  # the first call loads the model (a memory map, about 0.1 s)
        load_before = load_average()
        pair = interleaved(
            lambda i: store.search(qs[i], limit=10, embedder=embedder, now=now),
            lambda i: store.search(qs[i], limit=10, now=now),
            rounds=len(qs),
        )
        alone = []
        for q in qs:
            t0 = time.perf_counter()
            embedder.embed_query(q)
            alone.append(time.perf_counter() - t0)
    return {
        "queries": len(qs),
        "search_with_local_model": pair.a.summary(),
        "search_bm25_only": pair.b.summary(),
        "embed_query_alone": summary_ms(alone),
        "load_before": load_before,
        "load_after": load_average(),
    }


def _progress(done: int, total: int) -> None:
    print(f"\rembedding {done:,}/{total:,}", end="", file=sys.stderr, flush=True)


def _locomo_store(data: Path, workdir: Path) -> Path:
    from memlens.eval.locomo import load

    path = workdir / "locomo-turns.db"
    with MemoryStore.open(path, actor="bench") as store:
        for sample in load(data):
            store.remember_many(({"content": t.content(), "created_at": t.when, "layer": "working", "type": "message"} for t in sample.turns),
                                supersede=False, now=max(t.when for t in sample.turns))  # fmt: skip
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m memlens.bench.embed_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories in the generated store (default 10,000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--queries", type=int, default=100, help="searches timed each way (default 100)")
    parser.add_argument("--texts", type=Path, metavar="FILE", help="embed the turns of this LoCoMo-shaped file instead of a generated store")
    args = parser.parse_args(argv)
    from memlens.local_embeddings import INSTALL_HINT, local_model_available

    if not local_model_available():
        print(f"embed_bench: the local model is not installed: {INSTALL_HINT}", file=sys.stderr)
        return 2
    gen = Generator(args.seed)
    result: dict[str, Any] = {"machine": machine()}
    with tempfile.TemporaryDirectory(prefix="memlens-embed-bench-") as tmp:
        if args.texts is not None:
            path = _locomo_store(args.texts, Path(tmp))
            result["store"] = {"texts": str(args.texts)}
        else:
            built = cached_store(args.size, args.seed)
            path = work_copy(built, Path(tmp))
            result["store"] = {"size": args.size, "seed": args.seed}
        result["embed"] = embed = embed_store(path)
        # Said at once: embedding takes minutes, and a later failure must not cost this figure.
        print(f"embedded {embed['memories']:,} memories in {embed['seconds']} s wall, {embed['cpu_seconds']} s CPU "
              f"(load {embed['load_before']} -> {embed['load_after']})", file=sys.stderr, flush=True)  # fmt: skip
        if args.texts is None:
            result["search"] = search_latency(path, gen, queries=args.queries)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
