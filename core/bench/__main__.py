"""``python -m memlens.bench``: speed and scale figures, each beside a baseline measured in the same process.

Sizes default to 10k, 50k and 100k (a few minutes on a 2-core machine); ``--sizes 1m`` gives the million-memory
figures (on a shared 2-core machine at load 9: 21 minutes without the import benchmark, of which 7.5 built the store;
the import benchmark imports a million twice more). Generated stores are cached under ``--cache-dir``; benchmarks
that write work on a copy. Prints a readable table, every time as wall / CPU, or JSON with ``--json``; ``--out``
also writes the JSON to a file. A benchmark that fails is reported with its error and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memlens.bench import forget_bench, import_bench, search_bench, storage_bench, stores, supersede_bench, sweep_bench
from memlens.bench.generator import Generator
from memlens.bench.report import bench_table, progress, publish
from memlens.bench.stores import parse_size
from memlens.bench.timing import clock, machine
from memlens.errors import InvalidInput

BENCHMARKS = ("import", "supersede", "search", "sweep", "forget", "storage", "gui")
#: agentmemory's published figures for its own engine at 50k observations (from its README; another machine).
AGENTMEMORY_50K = {"bm25_search_ms": 22.8, "hybrid_search_ms": 108.7, "index_build_s": 9.2, "storage_mb": 178.8}


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
    started, started_cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="memlens-bench-") as tmp:
        workdir = Path(tmp)
        for size in sizes:
            out: dict[str, Any] = {}
            results["by_size"][str(size)] = out
            if "import" in chosen:
                progress(f"{size:,}: bulk import")
                _measured(out, "import", import_bench.run, size, seed, workdir, cache_dir)
            progress(f"{size:,}: the generated store (from the cache, or built: minutes at 1M)")
            built = stores.cached_store(size, seed, cache_dir)
            if not built.cached:
                progress(f"{size:,}: built the store in {built.build_seconds:.0f} s")
            out["store_build_s"] = round(built.build_seconds, 2)
            if "storage" in chosen:
                _measured(out, "storage", storage_bench.run, built.path)
            if "search" in chosen:
                progress(f"{size:,}: search")
                _measured(out, "search", search_bench.run, built.path, gen)
            if "supersede" in chosen:
                progress(f"{size:,}: remember with supersede")
                scan_calls = 20 if size <= 100_000 else 3
                _measured(out, "supersede", supersede_bench.run, stores.work_copy(built, workdir), gen, scan_calls=scan_calls)
            if "forget" in chosen:
                progress(f"{size:,}: forget")
                _measured(out, "forget", forget_bench.run, stores.work_copy(built, workdir), seed)
            if "sweep" in chosen:
                progress(f"{size:,}: sweep")
                _measured(out, "sweep", sweep_bench.run, stores.work_copy(built, workdir))
            if "gui" in chosen:
                progress(f"{size:,}: gui")
                _measured(out, "gui", gui, stores.work_copy(built, workdir))
            for leftover in workdir.glob("work-*"):
                leftover.unlink()
    if 50_000 in sizes:
        results["agentmemory_50k"] = {"theirs": AGENTMEMORY_50K, "ours": _at_50k(results["by_size"]["50000"])}
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["cpu_seconds"] = round(time.process_time() - started_cpu, 1)
    results["load_average_at_end"] = machine()["load_average"]
    return results


def _measured(out: dict[str, Any], name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """``out[name] = fn(*args, **kwargs)``, with the whole call's wall and CPU seconds under ``out["run"][name]``
    as ``seconds`` and ``cpu_seconds``; the CPU of child processes it ran and waited for (the GUI's process, an
    import's worker) counts too."""
    children = _children_cpu()
    result, sample = clock(lambda: _reported(name, fn, *args, **kwargs))
    out[name] = result
    cpu = sample.cpu + _children_cpu() - children
    out.setdefault("run", {})[name] = {"seconds": round(sample.wall, 2), "cpu_seconds": round(cpu, 2)}


def _reported(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; if it raises, ``{"error": ...}`` with the traceback on standard error, so one
    benchmark's failure costs its own figures, not the whole run's (an hour's at a million)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        return {"error": f"{name} failed: {type(exc).__name__}: {exc}"}


def gui(path: Path) -> dict[str, Any]:
    """The GUI benchmark in a fresh process of its own (core never imports Qt): ``python -m memlens.gui.bench``.

    Its peak memory is the one the child reports for itself (``VmHWM``): this process's own peak, which can be a
    gigabyte after the other benchmarks, must not count. ``getrusage`` cannot tell them apart: the kernel carries
    a parent's peak into a child it forks and execs, in the child's ``ru_maxrss`` and so in ``RUSAGE_CHILDREN``.
    Its CPU time is ``RUSAGE_CHILDREN``'s (exact for CPU, which starts at zero in a child), as ``process_cpu_s``.
    """
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    before = _children_cpu()
    try:
        proc = subprocess.run([sys.executable, "-m", "memlens.gui.bench", "--db", str(path), "--json"], capture_output=True, text=True, env=env, timeout=900)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 15 minutes"}
    child_cpu = round(_children_cpu() - before, 2)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        reason = next((line for line in lines if line.startswith(("Fatal Python error", "Traceback"))), lines[-1])
        if reason.startswith("Traceback"):
            reason = lines[-1]
        return {"error": f"python -m memlens.gui.bench exited with {proc.returncode}: {reason}"}
    result: dict[str, Any] = json.loads(proc.stdout)
    result["process_cpu_s"] = child_cpu
    return result


def _children_cpu() -> float:
    """User plus system CPU seconds of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _at_50k(by: dict[str, Any]) -> dict[str, Any]:
    return {
        "bm25_search_ms": by.get("search", {}).get("search", {}).get("p50_ms"),
        "index_build_s": by.get("import", {}).get("remember_many_s", by.get("store_build_s")),
        "storage_mb": by.get("storage", {}).get("file_mb"),
    }


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
    publish(results, out=args.out, as_json=args.json, table=bench_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
