"""remember() with exact supersede against a brute-force Jaccard scan, find_best's answers against an exact scan on
every probe, and what the in-memory postings cost (build time, resident memory).

Probes: a third near-duplicates of stored knowledge (they supersede), a third stored texts with a fifth to two
fifths of their words replaced (most land in the advisory 0.4-0.7 band: "similar to"), a third new texts.

``python -m memlens.bench.supersede_bench --size 1m [--size 10k ...] [--calls 500]`` prints remember()'s p50 and
p95, wall and CPU, on a copy of each generated store, with the load average before and after, then each decision's
own (supersede, similar, new: they cost differently, so the probes' mix moves the overall figure). ``--full`` runs
the whole benchmark instead, as ``python -m memlens.bench --only supersede`` does.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memlens.bench.generator import EPOCH, Generator
from memlens.bench.scan import ExactScan
from memlens.bench.timing import clock, interleaved, summary_ms, timed
from memlens.models import ts_from_dt
from memlens.store import MemoryStore
from memlens.supersede import brute_force_best, find_best
from memlens.text import similarity_tokens

Probe = tuple[str, str, str | None]  # text, layer, project
#: What a timed remember() decided: superseded a memory, linked one as "similar to", or neither.
DECISIONS = ("supersede", "similar", "new")


def _band_edit(gen: Generator, text: str, rng: np.random.Generator) -> str:
    """``text`` with 20-40% of its words replaced by vocabulary words: Jaccard about (1 - r) / (1 + r), 0.43-0.67."""
    words = text.rstrip(".").split()
    share = float(rng.uniform(0.2, 0.4))
    for where in rng.choice(len(words), size=max(1, round(len(words) * share)), replace=False):
        words[int(where)] = gen.words[int(gen._word_ids(rng, 1)[0])]
    return " ".join(words) + "."


def probes(store: MemoryStore, gen: Generator, count: int, salt: int = 11) -> list[Probe]:
    """``count`` texts to remember, each with a stored knowledge memory's layer and project: in turn a
    near-duplicate of it, a band edit of it (see the module docstring), and a new text."""
    rng = np.random.default_rng([gen.seed, salt])
    top = store.conn.execute("SELECT MAX(id) FROM memories").fetchone()[0] or 0
    fresh = gen.fresh_texts(count, salt=salt)
    out: list[Probe] = []
    while len(out) < count and top:
        row = store.conn.execute(
            "SELECT content, layer, project FROM memories WHERE id >= ? AND is_latest = 1 AND layer IN ('semantic', 'procedural') "
            "ORDER BY id LIMIT 1",
            (int(rng.integers(1, top + 1)),),
        ).fetchone()
        if row is None:
            continue
        content, layer, project = row
        kind = len(out) % 3
        text = gen.edit(content, rng) if kind == 0 else _band_edit(gen, content, rng) if kind == 1 else fresh[len(out)]
        out.append((text, layer, project))
    return out


def _rss_bytes() -> int:
    """This process's resident memory now (not its peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def run(path: Path, gen: Generator, *, sample: int = 1000, remember_calls: int = 1000, scan_calls: int = 10) -> dict[str, Any]:
    """Time find_best and remember() on ``path`` (which is changed: use a copy) against the brute-force scan.

    Every one of the ``sample`` probes is answered by find_best and by an exact full scan (numpy over every latest
    memory), compared as (memory id, similarity); the scan is itself checked against ``brute_force_best`` on the
    first ``scan_calls`` probes, interleaved with find_best for the speed ratio. Then ``remember_calls`` probes are
    remembered (each may supersede or link, so the store changes as it goes).
    """
    now = EPOCH + timedelta(days=1)
    now_ts = ts_from_dt(now)
    with MemoryStore.open(path, actor="bench") as store:
        settings = store.settings
        probe_threshold = settings.advisory_threshold
        checks = probes(store, gen, sample)
        latest = store.conn.execute("SELECT COUNT(*) FROM memories WHERE is_latest = 1").fetchone()[0]
        scan, scan_build = timed(lambda: ExactScan(store.conn))
        postings = store.ctx.postings
        rss_before = _rss_bytes()
        _, build = clock(lambda: postings.sync(store.conn))
        rss_postings = _rss_bytes() - rss_before

        def decision(match: tuple[int, float] | None) -> tuple[str, int | None]:
            if match is None:
                return ("new", None)
            return ("supersede" if match[1] > settings.supersede_threshold else "similar", match[0])

        find_times: list[float] = []
        find_cpu: list[float] = []
        agree = 0
        actions = {"supersede": 0, "similar": 0, "new": 0}
        disagreements: list[dict[str, Any]] = []
        for text, layer, project in checks:
            tokens = similarity_tokens(text)
            fast, sample_time = clock(lambda: find_best(store.conn, tokens, layer=layer, project=project, probe_threshold=probe_threshold, now=now_ts, postings=postings))  # noqa: B023
            find_times.append(sample_time.wall)
            find_cpu.append(sample_time.cpu)
            exact = scan.best(tokens, layer=layer, project=project, probe_threshold=probe_threshold, now=now_ts)
            mine = (fast.memory_id, fast.similarity) if fast else None
            actions[decision(exact)[0]] += 1
            if mine == exact:
                agree += 1
            elif len(disagreements) < 5:
                disagreements.append({"text": text[:80], "find_best": mine, "scan": exact})

        oracle = checks[:scan_calls]
        oracle_tokens = [similarity_tokens(t) for t, _, _ in oracle]

        def fast_call(i: int) -> Any:
            return find_best(store.conn, oracle_tokens[i], layer=oracle[i][1], project=oracle[i][2], probe_threshold=probe_threshold, now=now_ts, postings=postings)

        def slow_call(i: int) -> Any:
            return brute_force_best(store.conn, oracle_tokens[i], layer=oracle[i][1], project=oracle[i][2], probe_threshold=probe_threshold, now=now_ts)

        pair = interleaved(fast_call, slow_call, rounds=len(oracle))
        oracle_ok = 0
        for i, slow in enumerate(pair.b.results):
            exact = scan.best(oracle_tokens[i], layer=oracle[i][1], project=oracle[i][2], probe_threshold=probe_threshold, now=now_ts)
            oracle_ok += ((slow.memory_id, slow.similarity) if slow else None) == exact

        remember_wall: list[float] = []
        remember_cpu: list[float] = []
        superseded = 0
        for text, layer, project in checks[:remember_calls]:
            memory, sample_time = clock(lambda: store.remember(text, layer=layer, project=project, now=now))  # noqa: B023
            remember_wall.append(sample_time.wall)
            remember_cpu.append(sample_time.cpu)
            superseded += memory.parent_id is not None
        stats = postings.stats()
    remember = summary_ms(remember_wall, remember_cpu)
    scan_summary = pair.b.summary()
    return {
        "latest_memories": latest,
        "remember": remember,
        "find_best": summary_ms(find_times, find_cpu),
        "brute_force_scan": scan_summary,
        "speedup_p50": round(scan_summary["p50_ms"] / remember["p50_ms"], 1) if remember["p50_ms"] else None,
        "find_best_vs_scan_interleaved_p50": pair.ratio_p50(),
        "agreement": {"sample": len(checks), "identical": agree, "rate": round(agree / len(checks), 4) if checks else None,
                      "decisions": actions, "band_share": round(actions["similar"] / len(checks), 3) if checks else None,
                      "examples_of_disagreement": disagreements},
        "oracle_checked_against_brute_force": {"probes": len(oracle), "identical": oracle_ok},
        "oracle_build_s": round(scan_build, 2),
        "postings": {"build_s": round(build.wall, 3), "build_cpu_s": round(build.cpu, 3), "rss_mb": round(rss_postings / 2**20, 1),
                     "array_mb": round(stats["bytes"] / 2**20, 1), "keys": stats["keys"], "postings": stats["postings"],
                     "builds": stats["builds"]},
        "remember_superseded": superseded,
    }


def remember_timing(path: Path, gen: Generator, *, calls: int = 500, warmup: int = 50) -> dict[str, Any]:
    """remember() alone on ``path`` (changed: use a copy): the postings built and ``warmup`` probes remembered
    first (not timed), then ``calls`` probes (see :func:`probes`), each timed wall and CPU; the load average before
    and after, and what the timed calls decided."""
    now = EPOCH + timedelta(days=1)
    with MemoryStore.open(path, actor="bench") as store:
        checks = probes(store, gen, warmup + calls)
        _, build = clock(lambda: store.ctx.postings.sync(store.conn))
        for text, layer, project in checks[:warmup]:
            store.remember(text, layer=layer, project=project, now=now)
        load_before = [round(x, 2) for x in os.getloadavg()]
        wall: list[float] = []
        cpu: list[float] = []
        # Each decision costs differently (a supersede also takes the old version out of the similarity index),
        # so the mix of the probes moves the overall p50: each decision's own figures are kept as well.
        by_decision: dict[str, tuple[list[float], list[float]]] = {kind: ([], []) for kind in DECISIONS}
        for text, layer, project in checks[warmup:]:
            memory, sample = clock(lambda: store.remember(text, layer=layer, project=project, now=now))  # noqa: B023
            wall.append(sample.wall)
            cpu.append(sample.cpu)
            kinds = {r.kind for r in store.relations(memory.id)} if memory.parent_id is None else set()
            walls, cpus = by_decision["supersede" if memory.parent_id is not None else "similar" if "related" in kinds else "new"]
            walls.append(sample.wall)
            cpus.append(sample.cpu)
        latest = store.conn.execute("SELECT COUNT(*) FROM memories WHERE is_latest = 1").fetchone()[0]
    decided = {kind: len(walls) for kind, (walls, _cpus) in by_decision.items()}
    return {"latest_memories": latest, "remember": summary_ms(wall, cpu), "decisions": decided,
            "by_decision": {kind: summary_ms(walls, cpus) for kind, (walls, cpus) in by_decision.items() if walls},
            "postings_build_s": round(build.wall, 2), "load_average_before": load_before,
            "load_average_after": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """``python -m memlens.bench.supersede_bench --size 1m``: remember() p50 on a copy of the generated store."""
    import argparse
    import json
    import tempfile

    from memlens.bench import stores
    from memlens.errors import InvalidInput

    parser = argparse.ArgumentParser(prog="python -m memlens.bench.supersede_bench", description=main.__doc__)
    parser.add_argument("--size", action="append", help="memories in the generated store (10k, 100k, 1m; repeatable; default 1m)")
    parser.add_argument("--calls", type=int, default=500, help="timed remember() calls (default 500)")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls first (default 50)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache-dir", type=Path, default=stores.DEFAULT_CACHE)
    parser.add_argument("--full", action="store_true", help="the whole benchmark (agreement with an exact scan too; slow at 1m)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        sizes = [stores.parse_size(text) for text in args.size or ["1m"]]
    except InvalidInput as exc:
        parser.error(str(exc))
    gen = Generator(args.seed)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memlens-supersede-") as tmp:
        for size in sizes:
            built = stores.cached_store(size, args.seed, args.cache_dir)
            copy = stores.work_copy(built, Path(tmp))
            if args.full:
                results[str(size)] = run(copy, gen, scan_calls=20 if size <= 100_000 else 3)
            else:
                results[str(size)] = remember_timing(copy, gen, calls=args.calls, warmup=args.warmup)
            copy.unlink()
            if not args.json:
                r = results[str(size)]
                rem = r["remember"]
                print(f"{size:>9,}  remember p50 {rem['p50_ms']:.2f} ms wall / {rem['cpu_p50_ms']:.2f} ms CPU, "
                      f"p95 {rem['p95_ms']:.2f} / {rem['cpu_p95_ms']:.2f}, {rem['calls']} calls; "
                      f"{r.get('decisions', r.get('agreement', {}).get('decisions'))}; "
                      f"load {r.get('load_average_before', '')} -> {r.get('load_average_after', os.getloadavg())}", flush=True)  # fmt: skip
                if "by_decision" in r:
                    print("           by decision: " + "; ".join(
                        f"{kind} p50 {part['p50_ms']:.2f} ms wall / {part['cpu_p50_ms']:.2f} ms CPU ({part['calls']} calls)"
                        for kind, part in r["by_decision"].items()), flush=True)  # fmt: skip
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
