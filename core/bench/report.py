"""How the measuring tools (``python -m memlens.bench``, ``python -m memlens.eval.locomo``) report: progress
lines on standard error, the result as JSON in a file and as a table or JSON on standard output; and the
benchmark table, which prints every time as wall beside CPU (``wall / cpu``), since the machines are shared.

The table reads the result keys :mod:`memlens.bench.timing` describes; a figure a benchmark does not report (yet)
prints as ``-`` rather than failing the run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def progress(message: str) -> None:
    """One progress line on standard error (standard output carries the result)."""
    print(f"... {message}", file=sys.stderr, flush=True)


def publish(result: Any, *, out: Path | None, as_json: bool, table: Callable[[Any], str]) -> None:
    """Write ``result`` as JSON to ``out`` (when given) and print it: as JSON with ``as_json``, else as ``table`` has it."""
    text = json.dumps(result, indent=2, default=str)
    if out:
        out.write_text(text + "\n")
    print(text if as_json else table(result))


# --- the benchmark table ---------------------------------------------------------------------------------------

#: Benchmark names in the order their blocks print (``memlens.bench.__main__.BENCHMARKS`` runs them in this order).
ORDER = ("import", "supersede", "search", "sweep", "forget", "storage", "gui")


def get(data: Any, *path: str) -> Any:
    """``data[path[0]][path[1]]...``, or None where a level is missing (a benchmark that reports less)."""
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def number(value: Any, unit: str = "") -> str:
    """A figure as the table prints it: thousands separated, one decimal from 10 up, two below; ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        text = f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return text + unit


def per_call(summary: Any, stat: str) -> str:
    """``"wall / cpu ms"`` for ``stat`` (p50, p95, mean) of a per-call summary; ``-`` where either is missing."""
    wall = get(summary, f"{stat}_ms")
    if wall is None:
        return "-"
    return f"{number(wall)} / {number(get(summary, f'cpu_{stat}_ms'))} ms"


def cpu_key(key: str) -> str:
    """Where a total's CPU seconds sit beside it: ``x_s`` -> ``x_cpu_s``, ``seconds`` -> ``cpu_seconds``,
    ``baseline_seconds`` -> ``baseline_cpu_seconds``."""
    if key.endswith("seconds"):
        return key[: -len("seconds")] + "cpu_seconds"
    return key[:-2] + "_cpu_s" if key.endswith("_s") else key + "_cpu"


def total(data: Any, key: str) -> str:
    """``"wall / cpu s"`` for a total in seconds reported as ``key``, with its CPU seconds under :func:`cpu_key`."""
    wall = get(data, key)
    if wall is None:
        return "-"
    return f"{number(wall)} / {number(get(data, cpu_key(key)))} s"


HEADS: dict[str, list[str]] = {
    "import": ["size", "remember_many/s", "raw executemany/s", "ratio", "remember_many wall/cpu", "raw wall/cpu", "s per 1M"],
    "supersede": ["size", "remember p50 wall/cpu", "p95", "find_best p50", "brute-force scan p50", "speedup", "agreement"],
    "search": ["size", "search p50 wall/cpu", "p95", "raw FTS5 OR p50", "p95", "raw/search"],
    "sweep": ["size", "due", "find due (dry run) p50 wall/cpu", "raw due query p50", "apply: due", "apply wall/cpu", "baseline wall/cpu", "ms/memory",
              "first sweep wall/cpu"],
    "forget": ["size", "forget p50 wall/cpu", "p95", "plain DELETE p50", "ratio", "secure-delete", "forget_many: n", "wall/cpu", "row by row wall/cpu"],
    "storage": ["size", "file MB", "bytes/memory", "text bytes/memory", "ratio"],
    "gui": ["size", "open to first rows wall/cpu", "scroll to end wall/cpu", "peak RSS MB (own)"],
}


def _row(name: str, n: str, r: dict[str, Any]) -> list[str]:
    if "error" in r:  # the benchmark failed or could not run: its reason, in the first column after the size
        return [n, str(r["error"]), *[""] * (len(HEADS[name]) - 2)]
    if name == "import":
        return [n, number(get(r, "remember_many_per_s")), number(get(r, "raw_executemany_per_s")), number(get(r, "ratio"), "x"),
                total(r, "remember_many_s"), total(r, "raw_executemany_s"), number(get(r, "seconds_per_million"), " s")]
    if name == "supersede":
        agreement = f"{get(r, 'agreement', 'identical')}/{get(r, 'agreement', 'sample')}"
        return [n, per_call(r.get("remember"), "p50"), per_call(r.get("remember"), "p95"), per_call(r.get("find_best"), "p50"),
                per_call(r.get("brute_force_scan"), "p50"), number(get(r, "speedup_p50"), "x"), agreement]
    if name == "search":
        return [n, per_call(r.get("search"), "p50"), per_call(r.get("search"), "p95"), per_call(r.get("raw_fts5_or"), "p50"),
                per_call(r.get("raw_fts5_or"), "p95"), number(get(r, "ratio_p50"), "x")]
    if name == "sweep":
        due, share = get(r, "due_at_60_days"), get(r, "due_share")
        apply = r.get("apply")
        return [n, f"{number(due)} ({share:.1%})" if share is not None else number(due), per_call(r.get("find_due_dry_run"), "p50"),
                per_call(r.get("raw_due_query"), "p50"), number(get(apply, "due")), total(apply, "seconds"), total(apply, "baseline_seconds"),
                number(get(apply, "ms_per_memory"), " ms"), total(r, "first_sweep_s")]
    if name == "forget":
        bulk = r.get("bulk")
        return [n, per_call(r.get("forget"), "p50"), per_call(r.get("forget"), "p95"), per_call(r.get("plain_delete"), "p50"),
                number(get(r, "ratio_p50"), "x"), number(get(r, "fts_secure_delete")), number(get(bulk, "forgets")), total(bulk, "seconds"),
                total(bulk, "baseline_seconds")]
    if name == "storage":
        return [n, number(get(r, "file_mb")), number(get(r, "bytes_per_memory")), number(get(r, "text_bytes_per_memory")), number(get(r, "ratio_to_text"), "x")]
    # gui
    scroll = total(r, "scroll_to_end_s") if r.get("reached_end") else f"not in {number(get(r, 'timeout_s'))} s ({number(get(r, 'rows_loaded'))} rows)"
    return [n, total(r, "open_to_first_rows_s"), scroll, number(get(r, "peak_rss_mb"))]


def bench_table(results: dict[str, Any]) -> str:
    """``python -m memlens.bench``'s results as aligned text: one block per benchmark, one row per size, every time
    as wall / CPU, and each block's whole run (setup included) in wall and CPU seconds."""
    m = results["machine"]
    lines = [f"memlens benchmarks (seed {results['seed']}) on {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, "
             f"Python {m['python']}, SQLite {m['sqlite']}; load average at start {m['load_average']}, at end {results.get('load_average_at_end')}",
             "times are wall / CPU of this process: wall well above CPU means the call waited (for a core, or the disk)"]
    rows: dict[str, list[list[str]]] = {}
    for size, by in results["by_size"].items():
        n = number(int(size))
        for name in ORDER:
            if name in by:
                rows.setdefault(name, []).append([*_row(name, n, by[name]), total(get(by, "run", name), "seconds")])
    for name in ORDER:
        if name not in rows:
            continue
        lines.append("")
        lines.append(name)
        grid = [[*HEADS[name], "whole run wall/cpu"], *rows[name]]
        widths = [max(len(r[c]) for r in grid) for c in range(len(grid[0]))]
        for r in grid:
            lines.append("  " + "  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)))
    if "agentmemory_50k" in results:
        a = results["agentmemory_50k"]
        lines.append("")
        lines.append("at 50k, beside agentmemory's published figures (their machine, their data)")
        lines.append(f"  BM25 search: memlens {number(a['ours']['bm25_search_ms'], ' ms')} p50, agentmemory {a['theirs']['bm25_search_ms']} ms "
                     f"(hybrid {a['theirs']['hybrid_search_ms']} ms)")
        lines.append(f"  index build: memlens {number(a['ours']['index_build_s'], ' s')}, agentmemory {a['theirs']['index_build_s']} s")
        lines.append(f"  storage:     memlens {number(a['ours']['storage_mb'], ' MB')}, agentmemory {a['theirs']['storage_mb']} MB")
    lines.append("")
    lines.append(f"total {results['seconds']} s wall, {results.get('cpu_seconds', '-')} s CPU")
    return "\n".join(lines)
