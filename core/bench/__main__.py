"""``python -m memlens.bench``: speed and scale figures, each beside a baseline measured in the same process.

Sizes default to 10k, 50k and 100k (a few minutes on a 2-core machine); ``--sizes 1m`` adds the million-memory
figures (about fifteen more minutes, and four to build the store the first time). Generated stores are cached under
``--cache-dir``; benchmarks that write work on a copy. Prints a readable table, or JSON with ``--json``; ``--out``
also writes the JSON to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memlens.bench import forget_bench, import_bench, search_bench, storage_bench, stores, supersede_bench, sweep_bench
from memlens.bench.generator import Generator
from memlens.bench.report import progress, publish
from memlens.bench.timing import machine
from memlens.errors import InvalidInput

BENCHMARKS = ("import", "supersede", "search", "sweep", "forget", "storage", "gui")
#: agentmemory's published figures for its own engine at 50k observations (from its README; another machine).
AGENTMEMORY_50K = {"bm25_search_ms": 22.8, "hybrid_search_ms": 108.7, "index_build_s": 9.2, "storage_mb": 178.8}


def parse_size(text: str) -> int:
    """'10k', '1m', '250000' as a number of memories."""
    t = text.strip().lower().replace("_", "")
    factor = 1
    if t.endswith("k"):
        factor, t = 1_000, t[:-1]
    elif t.endswith("m"):
        factor, t = 1_000_000, t[:-1]
    try:
        value = int(float(t) * factor)
    except ValueError:
        raise InvalidInput(f"a size looks like 10k, 100k or 1m, not {text!r}") from None
    if value < 100:
        raise InvalidInput(f"a size must be at least 100 memories, not {text!r}")
    return value


def _names(text: str | None) -> set[str]:
    if not text:
        return set()
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = names - set(BENCHMARKS)
    if unknown:
        raise InvalidInput(f"unknown benchmark {', '.join(sorted(unknown))}; choose from {', '.join(BENCHMARKS)}")
    return names


def run(sizes: Sequence[int], *, seed: int, cache_dir: Path, only: set[str], skip: set[str], progress: Callable[[str], None]) -> dict[str, Any]:
    """Every selected benchmark at every size; the JSON-ready results."""
    chosen = [b for b in BENCHMARKS if (not only or b in only) and b not in skip]
    gen = Generator(seed)
    results: dict[str, Any] = {"machine": machine(), "seed": seed, "sizes": list(sizes), "benchmarks": chosen, "by_size": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memlens-bench-") as tmp:
        workdir = Path(tmp)
        for size in sizes:
            out: dict[str, Any] = {}
            results["by_size"][str(size)] = out
            if "import" in chosen:
                progress(f"{size:,}: bulk import")
                out["import"] = import_bench.run(size, seed, workdir, cache_dir)
            built = stores.cached_store(size, seed, cache_dir)
            if not built.cached:
                progress(f"{size:,}: built the store in {built.build_seconds:.0f} s")
            out["store_build_s"] = round(built.build_seconds, 2)
            if "storage" in chosen:
                out["storage"] = storage_bench.run(built.path)
            if "search" in chosen:
                progress(f"{size:,}: search")
                out["search"] = search_bench.run(built.path, gen)
            if "supersede" in chosen:
                progress(f"{size:,}: remember with supersede")
                scan_calls = 20 if size <= 100_000 else 3
                out["supersede"] = supersede_bench.run(stores.work_copy(built, workdir), gen, scan_calls=scan_calls)
            if "forget" in chosen:
                progress(f"{size:,}: forget")
                out["forget"] = forget_bench.run(stores.work_copy(built, workdir), seed)
            if "sweep" in chosen:
                progress(f"{size:,}: sweep")
                out["sweep"] = sweep_bench.run(stores.work_copy(built, workdir))
            if "gui" in chosen:
                progress(f"{size:,}: gui")
                out["gui"] = gui(stores.work_copy(built, workdir))
            for leftover in workdir.glob("work-*"):
                leftover.unlink()
    if 50_000 in sizes:
        results["agentmemory_50k"] = {"theirs": AGENTMEMORY_50K, "ours": _at_50k(results["by_size"]["50000"])}
    results["seconds"] = round(time.perf_counter() - started, 1)
    return results


def gui(path: Path) -> dict[str, Any]:
    """The GUI benchmark in its own process (core never imports Qt): ``python -m memlens.gui.bench``."""
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    try:
        proc = subprocess.run([sys.executable, "-m", "memlens.gui.bench", "--db", str(path), "--json"], capture_output=True, text=True, env=env, timeout=900)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 15 minutes"}
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        reason = next((line for line in lines if line.startswith(("Fatal Python error", "Traceback"))), lines[-1])
        if reason.startswith("Traceback"):
            reason = lines[-1]
        return {"error": f"python -m memlens.gui.bench exited with {proc.returncode}: {reason}"}
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _at_50k(by: dict[str, Any]) -> dict[str, Any]:
    return {
        "bm25_search_ms": by.get("search", {}).get("search", {}).get("p50_ms"),
        "index_build_s": by.get("import", {}).get("remember_many_s", by.get("store_build_s")),
        "storage_mb": by.get("storage", {}).get("file_mb"),
    }


# --- the readable table ----------------------------------------------------------------------------------------


def _f(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return text + unit


def table(results: dict[str, Any]) -> str:
    """The results as aligned text, one block per benchmark, one row per size."""
    lines: list[str] = []
    m = results["machine"]
    lines.append(f"memlens benchmarks (seed {results['seed']}) on {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, "
                 f"Python {m['python']}, SQLite {m['sqlite']}; load average at start {m['load_average']}")
    rows: dict[str, list[list[str]]] = {}
    heads = {
        "import": ["size", "remember_many/s", "raw executemany/s", "ratio", "s per 1M"],
        "supersede": ["size", "remember p50", "p95", "find_best p50", "brute-force scan p50", "speedup", "agreement"],
        "search": ["size", "search p50", "p95", "raw FTS5 OR p50", "p95", "raw/search"],
        "sweep": ["size", "due", "find due (dry run) p50", "apply: due", "apply s", "baseline s", "ms/memory", "first sweep s"],
        "forget": ["size", "forget p50", "p95", "plain DELETE p50", "secure-delete"],
        "storage": ["size", "file MB", "bytes/memory", "text bytes/memory", "ratio"],
        "gui": ["size", "open to first rows", "scroll to end", "peak RSS MB"],
    }
    for size, by in results["by_size"].items():
        n = _f(int(size))
        if "import" in by:
            i = by["import"]
            rows.setdefault("import", []).append([n, _f(i["remember_many_per_s"]), _f(i["raw_executemany_per_s"]), _f(i["ratio"]), _f(i["seconds_per_million"], " s")])
        if "supersede" in by:
            s = by["supersede"]
            a = s["agreement"]
            rows.setdefault("supersede", []).append([n, _f(s["remember"]["p50_ms"], " ms"), _f(s["remember"]["p95_ms"], " ms"), _f(s["find_best"]["p50_ms"], " ms"),
                                                     _f(s["brute_force_scan"]["p50_ms"], " ms"), _f(s["speedup_p50"], "x"), f"{a['identical']}/{a['sample']}"])
        if "search" in by:
            s = by["search"]
            rows.setdefault("search", []).append([n, _f(s["search"]["p50_ms"], " ms"), _f(s["search"]["p95_ms"], " ms"), _f(s["raw_fts5_or"]["p50_ms"], " ms"),
                                                  _f(s["raw_fts5_or"]["p95_ms"], " ms"), _f(s["ratio_p50"], "x")])
        if "sweep" in by:
            s = by["sweep"]
            rows.setdefault("sweep", []).append([n, f"{s['due_at_60_days']:,} ({s['due_share']:.1%})", _f(s["find_due_dry_run"]["p50_ms"], " ms"),
                                                 _f(s["apply"]["due"]), _f(s["apply"]["seconds"], " s"), _f(s["apply"].get("baseline_seconds"), " s"),
                                                 _f(s["apply"]["ms_per_memory"], " ms"), _f(s["first_sweep_s"], " s")])
        if "forget" in by:
            f = by["forget"]
            rows.setdefault("forget", []).append([n, _f(f["forget"]["p50_ms"], " ms"), _f(f["forget"]["p95_ms"], " ms"), _f(f["plain_delete"]["p50_ms"], " ms"), str(f["fts_secure_delete"])])
        if "storage" in by:
            s = by["storage"]
            rows.setdefault("storage", []).append([n, _f(s["file_mb"]), _f(s["bytes_per_memory"]), _f(s["text_bytes_per_memory"]), _f(s["ratio_to_text"], "x")])
        if "gui" in by:
            g = by["gui"]
            if "error" in g:
                rows.setdefault("gui", []).append([n, g["error"], "", ""])
            else:
                scroll = _f(g["scroll_to_end_s"], " s") if g.get("reached_end") else f"not in {g['timeout_s']:.0f} s ({g['rows_loaded']:,} rows)"
                rows.setdefault("gui", []).append([n, _f(g["open_to_first_rows_s"], " s"), scroll, _f(g["peak_rss_mb"])])
    for name in BENCHMARKS:
        if name not in rows:
            continue
        lines.append("")
        lines.append(name)
        grid = [heads[name], *rows[name]]
        widths = [max(len(r[c]) for r in grid) for c in range(len(grid[0]))]
        for r in grid:
            lines.append("  " + "  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)))
    if "agentmemory_50k" in results:
        a = results["agentmemory_50k"]
        lines.append("")
        lines.append("at 50k, beside agentmemory's published figures (their machine, their data)")
        lines.append(f"  BM25 search: memlens {_f(a['ours']['bm25_search_ms'], ' ms')} p50, agentmemory {a['theirs']['bm25_search_ms']} ms "
                     f"(hybrid {a['theirs']['hybrid_search_ms']} ms)")
        lines.append(f"  index build: memlens {_f(a['ours']['index_build_s'], ' s')}, agentmemory {a['theirs']['index_build_s']} s")
        lines.append(f"  storage:     memlens {_f(a['ours']['storage_mb'], ' MB')}, agentmemory {a['theirs']['storage_mb']} MB")
    lines.append("")
    lines.append(f"total {results['seconds']} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks from the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m memlens.bench", description="Speed and scale benchmarks, each beside a baseline measured in the same process.")
    parser.add_argument("--sizes", default="10k,50k,100k", help="comma-separated store sizes (default 10k,50k,100k; add 1m for the million)")
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--skip", help="comma-separated benchmarks to leave out")
    parser.add_argument("--cache-dir", type=Path, default=stores.DEFAULT_CACHE, help=f"where generated stores are kept (default {stores.DEFAULT_CACHE})")
    parser.add_argument("--clear-cache", action="store_true", help="delete the cached stores first")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--out", type=Path, help="also write the JSON to this file")
    args = parser.parse_args(argv)
    try:
        sizes = sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()})
        only, skip = _names(args.only), _names(args.skip)
    except InvalidInput as exc:
        print(f"python -m memlens.bench: {exc}", file=sys.stderr)
        return 2
    if args.clear_cache and args.cache_dir.exists():
        shutil.rmtree(args.cache_dir)
    results = run(sizes, seed=args.seed, cache_dir=args.cache_dir, only=only, skip=skip, progress=progress)
    publish(results, out=args.out, as_json=args.json, table=table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
