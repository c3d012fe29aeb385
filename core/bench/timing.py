"""Timing helpers: percentiles of per-call times, and machine facts to print beside the figures."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from memlens import db

T = TypeVar("T")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values`` by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean of per-call times, in milliseconds, with the number of calls."""
    return {
        "calls": len(seconds),
        "p50_ms": round(percentile(seconds, 50) * 1000, 3),
        "p95_ms": round(percentile(seconds, 95) * 1000, 3),
        "mean_ms": round(statistics.fmean(seconds) * 1000, 3) if seconds else 0.0,
    }


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Call ``fn`` once; its result and the seconds it took."""
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def median_of_rounds(rounds: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per-key medians of several rounds' summaries (repeated measurements on a shared machine)."""
    keys = rounds[0].keys()
    return {k: round(statistics.median(r[k] for r in rounds), 3) for k in keys}


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory_gb = None
    try:
        memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "os": platform.platform(),
        "python": platform.python_version(),
        "sqlite": db.sqlite.sqlite_version,
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }
