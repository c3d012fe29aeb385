"""How the benchmarks measure: wall and CPU time of every call, a figure and its baseline interleaved in one
process, percentiles, a process's own peak memory, and the machine the figures came from.

The machines these figures come from are shared, so a benchmark never times its figure in one block and its
baseline in another (a neighbour's build in the middle would skew the ratio), and it reports CPU time beside
wall time (a call that waited for a core shows wall well above CPU).

Using it in a benchmark::

    from memlens.bench.timing import interleaved

    pair = interleaved(lambda i: store.search(queries[i], limit=10, now=now),       # side a: the figure
                       lambda i: conn.execute(RAW_SQL, (raw(queries[i]), 10)).fetchall(),  # side b: the baseline
                       rounds=len(queries))
    result = {"search": pair.a.summary(), "raw_fts5_or": pair.b.summary(), "ratio_p50": pair.ratio_p50()}
    hits = sum(bool(r) for r in pair.a.results)

- ``interleaved(a, b, rounds)`` calls ``a(i)`` and ``b(i)`` for round ``i = 0 .. rounds-1``, alternating which of
  the two goes first from round to round, and times each call's wall (``time.perf_counter``) and CPU
  (``time.process_time``: this process, all threads) seconds. Everything the two sides share (the batch, the
  query) is prepared before the call; everything inside the callable is timed. Batch-by-batch work (an import)
  passes ``rounds=len(batches)`` and has each side take batch ``i``; repeated rounds of per-call work
  (search) pass ``rounds=len(queries) * repeats`` and index ``queries[i % len(queries)]``. Results that are big
  (a sweep plan, a list of rows) are kept as a verdict: ``keep_a=`` / ``keep_b=`` (both or neither) say what to
  keep of each, worked out after the clocks stop, so the results of earlier rounds do not stay alive.
- It returns an :class:`Interleaved`: ``.a`` and ``.b`` are :class:`Side` objects with ``.wall`` and ``.cpu``
  (seconds per call, in call order), ``.results`` (what each call returned, or what ``keep_a``/``keep_b`` made of it), ``.wall_s`` / ``.cpu_s`` (totals) and
  ``.summary()`` (per-call milliseconds, the keys below); ``.ratio_p50()`` and ``.ratio_total()`` give baseline over
  figure (above 1: the figure is faster).
- A single timed call: ``clock(fn)`` returns ``(result, Sample(wall, cpu))``; ``timed(fn)`` (wall only) stays
  for old callers.

What the report table (:mod:`memlens.bench.report`) reads, so a benchmark's results print with CPU beside wall:

- a per-call summary dict from ``summary_ms(wall, cpu)`` or ``Side.summary()``: ``calls``, ``p50_ms``, ``p95_ms``,
  ``mean_ms`` and, when CPU times were given, ``cpu_p50_ms``, ``cpu_p95_ms``, ``cpu_mean_ms``;
- a total in seconds under a key ending ``_s``: its CPU seconds under the same key ending ``_cpu_s``
  (``remember_many_s`` and ``remember_many_cpu_s``); :func:`seconds` builds the pair from a :class:`Sample`. A key
  ending ``seconds`` has its CPU under ``...cpu_seconds`` (``baseline_seconds`` and ``baseline_cpu_seconds``).
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from memlens import db

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values`` by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary_ms(seconds: Sequence[float], cpu: Sequence[float] | None = None) -> dict[str, float]:
    """p50, p95 and mean of per-call wall times in milliseconds, with the number of calls; given the same calls'
    CPU times, their p50, p95 and mean too (``cpu_p50_ms``, ...)."""
    out: dict[str, float] = {
        "calls": len(seconds),
        "p50_ms": round(percentile(seconds, 50) * 1000, 3),
        "p95_ms": round(percentile(seconds, 95) * 1000, 3),
        "mean_ms": round(statistics.fmean(seconds) * 1000, 3) if seconds else 0.0,
    }
    if cpu is not None:
        out["cpu_p50_ms"] = round(percentile(cpu, 50) * 1000, 3)
        out["cpu_p95_ms"] = round(percentile(cpu, 95) * 1000, 3)
        out["cpu_mean_ms"] = round(statistics.fmean(cpu) * 1000, 3) if cpu else 0.0
    return out


@dataclass(frozen=True)
class Sample:
    """One measurement: wall-clock seconds and the CPU seconds this process spent in them."""

    wall: float
    cpu: float


def clock(fn: Callable[[], T]) -> tuple[T, Sample]:
    """Call ``fn`` once; its result and the wall and CPU seconds it took."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = fn()
    return result, Sample(time.perf_counter() - wall0, time.process_time() - cpu0)


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Call ``fn`` once; its result and the wall seconds it took (:func:`clock` gives CPU time too)."""
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def seconds(name: str, sample: Sample, digits: int = 3) -> dict[str, float]:
    """``{name_s: wall, name_cpu_s: cpu}``: a total as the report table reads it."""
    return {f"{name}_s": round(sample.wall, digits), f"{name}_cpu_s": round(sample.cpu, digits)}


@dataclass
class Side(Generic[T]):
    """One side of an interleaved comparison: each call's wall and CPU seconds and its result, in call order."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    results: list[T] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        """Total wall seconds over all calls."""
        return sum(self.wall)

    @property
    def cpu_s(self) -> float:
        """Total CPU seconds over all calls."""
        return sum(self.cpu)

    def summary(self) -> dict[str, float]:
        """Per-call milliseconds, wall and CPU, as :func:`summary_ms` gives them."""
        return summary_ms(self.wall, self.cpu)

    def call(self, fn: Callable[[int], Any], i: int, keep: Callable[[Any], T] | None = None) -> T:
        """Call ``fn(i)``, note its wall and CPU seconds and its result on this side (or, given ``keep``, what
        ``keep`` makes of the result, worked out after the clocks stop); what was noted."""
        wall0, cpu0 = time.perf_counter(), time.process_time()
        result = fn(i)
        self.wall.append(time.perf_counter() - wall0)
        self.cpu.append(time.process_time() - cpu0)
        kept = result if keep is None else keep(result)
        self.results.append(kept)
        return kept


@dataclass
class Interleaved(Generic[A, B]):
    """Both sides of :func:`interleaved`: ``a`` (the figure) and ``b`` (its baseline)."""

    a: Side[A]
    b: Side[B]

    def ratio_p50(self) -> float | None:
        """Baseline p50 over figure p50, by wall time (above 1: the figure's calls are faster); None without data."""
        mine, theirs = percentile(self.a.wall, 50), percentile(self.b.wall, 50)
        return round(theirs / mine, 3) if mine > 0 else None

    def ratio_total(self) -> float | None:
        """Baseline total over figure total, by wall time (for throughput: an import's whole batches)."""
        return round(self.b.wall_s / self.a.wall_s, 3) if self.a.wall_s > 0 else None


@overload
def interleaved(a: Callable[[int], A], b: Callable[[int], B], rounds: int) -> Interleaved[A, B]: ...


@overload
def interleaved(a: Callable[[int], Any], b: Callable[[int], Any], rounds: int, *, keep_a: Callable[[Any], A], keep_b: Callable[[Any], B]) -> Interleaved[A, B]: ...


def interleaved(
    a: Callable[[int], Any], b: Callable[[int], Any], rounds: int, *, keep_a: Callable[[Any], Any] | None = None, keep_b: Callable[[Any], Any] | None = None
) -> Interleaved[Any, Any]:
    """Call ``a(i)`` and ``b(i)`` for ``i`` in ``range(rounds)``, alternately, timing each call's wall and CPU seconds.

    Even rounds run ``a`` first, odd rounds ``b`` first, so neither side always gets the warmer cache or the
    quieter moment; both see the same load over the run, which is what makes their ratio hold on a shared machine.

    Each side keeps every call's result, or what ``keep_a`` / ``keep_b`` makes of it (a check, a count), worked out
    outside the timing. A side whose results are big should keep a verdict: results kept alive across rounds make
    each later call build its objects in fresh memory, and the first-touch page faults are then timed as its cost
    (a sweep plan of 10,000 decisions took twice as long, 26-30 ms against 14, with seven earlier plans alive).
    """
    pair: Interleaved[Any, Any] = Interleaved(Side(), Side())
    for i in range(rounds):
        if i % 2 == 0:
            pair.a.call(a, i, keep_a)
            pair.b.call(b, i, keep_b)
        else:
            pair.b.call(b, i, keep_b)
            pair.a.call(a, i, keep_a)
    return pair


def median_of_rounds(rounds: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per-key medians of several rounds' summaries (repeated measurements on a shared machine)."""
    keys = rounds[0].keys()
    return {k: round(statistics.median(r[k] for r in rounds), 3) for k in keys}


def own_peak_rss_mb() -> float:
    """This process's own peak resident memory in MB, from the kernel's high-water mark of its address space.

    On Linux that is ``VmHWM`` in ``/proc/self/status``, which starts afresh at ``exec``: ``getrusage``'s
    ``ru_maxrss`` does not (the kernel carries the parent's peak into a forked and exec'd child, so a process
    started by a 1 GB benchmark reports at least 1 GB). Elsewhere ``ru_maxrss`` is the best there is.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 2**10, 1)  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


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
