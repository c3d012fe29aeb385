"""``python -m memlens.bench.backends_bench --sizes 100k``: the same benchmark on a SQLite file and on a PostgreSQL
database, side by side, in one process.

For each size the same generated memories (:func:`memlens.bench.stores.records`, the cached stores' contents) are
loaded into a fresh SQLite file and a fresh PostgreSQL database through ``remember_many`` (the store's bulk API, as
a user's import goes; the two loads alternate round by round, and this is each backend's *fill* figure). Then, on
both stores, call by call and alternating which backend goes first:

- **search**: ``search()`` (limit 10) over the same generated queries; the hit ids of every query are compared (the
  full-text ranking is meant to be identical, so the count of differing queries should be 0);
- **sweep**: a first real sweep (nothing due yet), then the dry-run plan at the moment 1% of the store is due, as
  :mod:`memlens.bench.sweep_bench` times it;
- **remember**: ``remember()`` with exact supersede on the probes of :mod:`memlens.bench.supersede_bench` (a third
  near-duplicates, which supersede), after the supersede index is built and a few warm-up calls;
- **import**: ``remember_many`` of ``--import-records`` new memories into the filled store, in records per second;
- **writers**: 1, 2, 4, 8 writer processes (spawned, as :mod:`memlens.tools.stress` starts them) on one store each
  remembering for ``--writer-seconds`` after all of them have opened it and remembered once: total remembers per
  second and the p50/p95 latency of a call. Writers on either backend are serialised (SQLite's write lock, the
  PostgreSQL store's advisory lock), so this measures what a store's writers can do together, not a scale-out.

Every figure prints with wall and CPU time and the load average at its end; CPU is this process's, plus the import
worker's or the writer processes', and on PostgreSQL the server's CPU beside it (its processes' times from
``/proc``, when the server runs on this machine: the throwaway server (:mod:`memlens.postgres.throwaway`) that is
started unless ``--pg-url`` names another). Progress goes to standard error, the figures and a side-by-side table
to standard output (``--json`` prints the results as JSON instead; ``--out`` also writes them to a file).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import os
import resource
import shlex
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from memlens.bench import search_bench, stores, supersede_bench
from memlens.bench.generator import EPOCH, LAYER_MIX, Generator
from memlens.bench.report import progress as report_progress
from memlens.bench.report import publish
from memlens.bench.timing import Side, interleaved, machine, percentile
from memlens.store import MemoryStore

#: The two backends, in the order their columns print.
BACKENDS = ("sqlite", "postgresql")
LABELS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
#: Records per fill round (one ``remember_many`` call per backend a round): big enough to use the import's worker
#: process as a real import does (:data:`memlens.storage.bulk.PARALLEL_MIN_RECORDS`), small enough to interleave.
FILL_ROUND = 25_000
BATCH = 5000
#: Where the generated TTLs put 1% of the store due (see :mod:`memlens.bench.sweep_bench`).
SWEEP_DUE_AT = EPOCH + timedelta(days=60, hours=2)
REMEMBER_AT = EPOCH + timedelta(days=1)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --- the server's CPU ---------------------------------------------------------------------------------------------


class ServerCpu:
    """CPU seconds a local PostgreSQL server has spent so far: its postmaster's own and its finished children's (the
    postmaster reaps every backend), plus its live children's. None when the server is not on this machine or its
    processes cannot be read."""

    def __init__(self, postmaster_pid: int | None) -> None:
        self.pid = postmaster_pid
        self._tick = os.sysconf("SC_CLK_TCK")

    @classmethod
    def of(cls, admin_url: str) -> ServerCpu:
        """The server behind ``admin_url``, found through its data directory's ``postmaster.pid`` (read where the
        server says its data directory is: only a server on this machine is found)."""
        import psycopg

        pid = None
        with contextlib.suppress(Exception), psycopg.connect(admin_url, autocommit=True) as conn:
            row = conn.execute("SELECT setting FROM pg_settings WHERE name = 'data_directory'").fetchone()
            if row is not None:
                pid = int((Path(row[0]) / "postmaster.pid").read_text().split()[0])
                os.kill(pid, 0)  # there, on this machine
        return cls(pid)

    def _stat(self, pid: int) -> list[str]:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()

    def seconds(self) -> float | None:
        """The server's CPU seconds so far (user + system), or None."""
        if self.pid is None:
            return None
        # A backend reaped between reading the postmaster and reading its children would count in neither: read
        # the postmaster again afterwards, and start over when its reaped children's time changed meanwhile.
        for _ in range(10):
            try:
                before = self._own_ticks()
                live = 0
                for entry in os.scandir("/proc"):
                    if entry.name.isdigit():
                        with contextlib.suppress(OSError, IndexError, ValueError):
                            stat = self._stat(int(entry.name))
                            if int(stat[1]) == self.pid:
                                live += int(stat[11]) + int(stat[12])
                if self._own_ticks() == before:
                    return (before + live) / self._tick
            except OSError:
                return None
        return None

    def _own_ticks(self) -> int:
        assert self.pid is not None
        own = self._stat(self.pid)  # from field 3 on: utime is [11], stime [12], reaped children's cutime [13], cstime [14]
        return sum(int(own[i]) for i in (11, 12, 13, 14))


@dataclass
class Meter:
    """Wall, own CPU, children's CPU and server CPU of one stretch of work (summed over the stretches it ran)."""

    server: ServerCpu | None = None
    wall: float = 0.0
    cpu: float = 0.0
    children: float = 0.0
    server_s: float | None = None

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Add the ``with`` block's times."""
        server0 = self.server.seconds() if self.server else None
        kids0, cpu0, wall0 = _children_cpu(), time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            self.wall += time.perf_counter() - wall0
            self.cpu += time.process_time() - cpu0
            self.children += _children_cpu() - kids0
            server1 = self.server.seconds() if self.server else None
            if server0 is not None and server1 is not None:
                self.server_s = (self.server_s or 0.0) + server1 - server0

    def figures(self) -> dict[str, Any]:
        """``wall_s``, ``cpu_s`` (this process and its children), ``server_cpu_s`` when known, and the load now."""
        out: dict[str, Any] = {"wall_s": round(self.wall, 3), "cpu_s": round(self.cpu + self.children, 3)}
        if self.children:
            out["children_cpu_s"] = round(self.children, 3)
        if self.server_s is not None:
            out["server_cpu_s"] = round(self.server_s, 3)
        out["load"] = _load()
        return out


def _side_figures(side: Side[Any]) -> dict[str, Any]:
    return {**side.summary(), "wall_s": round(side.wall_s, 3), "cpu_s": round(side.cpu_s, 3)}


# --- the stores -----------------------------------------------------------------------------------------------------


@dataclass
class Pair:
    """The same generated store on both backends: where each is and the open store."""

    sqlite_path: Path
    pg_url: str
    sqlite: MemoryStore
    postgresql: MemoryStore
    server: ServerCpu

    def location(self, backend: str) -> str:
        return str(self.sqlite_path) if backend == "sqlite" else self.pg_url

    def store(self, backend: str) -> MemoryStore:
        return self.sqlite if backend == "sqlite" else self.postgresql


def fill(pair: Pair, recs: list[dict[str, object]], *, round_size: int = FILL_ROUND) -> dict[str, Any]:
    """Load ``recs`` into both (empty) stores through ``remember_many``, the backends alternating round by round."""
    meters = {"sqlite": Meter(), "postgresql": Meter(pair.server)}
    rounds = [recs[i : i + round_size] for i in range(0, len(recs), round_size)]
    for n, chunk in enumerate(rounds):
        for backend in BACKENDS if n % 2 == 0 else BACKENDS[::-1]:
            with meters[backend].running():
                pair.store(backend).remember_many(chunk, batch_size=BATCH, now=EPOCH)
    out: dict[str, Any] = {"records": len(recs), "rounds": len(rounds)}
    for backend, meter in meters.items():
        out[backend] = {**meter.figures(), "per_s": round(len(recs) / meter.wall) if meter.wall else None}
    return out


def analyze(pg_url: str) -> dict[str, Any]:
    """``VACUUM ANALYZE`` the PostgreSQL database: its statistics as autovacuum leaves them a minute after a load,
    now, so the query plans timed next are the ones a user gets rather than whichever the first minute has."""
    import psycopg

    meter = Meter()
    with meter.running(), psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return meter.figures()


# --- per-call figures -----------------------------------------------------------------------------------------------


def _pg_first(i: int) -> bool:
    """Whether round ``i`` of :func:`memlens.bench.timing.interleaved` ran side ``b`` (PostgreSQL) first."""
    return i % 2 == 1


def search(pair: Pair, gen: Generator, *, queries: int = 200, rounds: int = 2, limit: int = 10) -> dict[str, Any]:
    """``search()`` on both over the same queries: an untimed pass, then ``rounds`` timed passes, interleaved call
    by call; the hit ids (in order) of every call compared between the backends."""
    qs = search_bench.sample_queries(pair.sqlite.conn, gen, queries)

    def ids(backend: str, q: str) -> list[int]:
        return [h.memory.id for h in pair.store(backend).search(q, limit=limit, now=REMEMBER_AT)]

    warm = {backend: [ids(backend, q) for q in qs] for backend in BACKENDS}
    server = Meter(pair.server)
    with server.running():
        pair_timed = interleaved(lambda i: ids("sqlite", qs[i % len(qs)]), lambda i: ids("postgresql", qs[i % len(qs)]), rounds=rounds * len(qs))
    differing = {i for i in range(len(qs)) if warm["sqlite"][i] != warm["postgresql"][i]}
    differing |= {i % len(qs) for i, (a, b) in enumerate(zip(pair_timed.a.results, pair_timed.b.results, strict=True)) if a != b}
    same_sets = sum(set(warm["sqlite"][i]) == set(warm["postgresql"][i]) for i in differing)
    examples = [{"query": qs[i], "sqlite": warm["sqlite"][i], "postgresql": warm["postgresql"][i]} for i in sorted(differing)[:3]]
    return {
        "queries": len(qs),
        "rounds": rounds,
        "queries_with_hits": sum(bool(r) for r in warm["sqlite"]),
        "differing_queries": len(differing),
        "differing_same_ids_other_order": same_sets,
        "examples_of_difference": examples,
        "sqlite": {**_side_figures(pair_timed.a), "load": _load()},
        "postgresql": {**_side_figures(pair_timed.b), "server_cpu_s": server.server_s, "load": _load()},
    }


def sweep(pair: Pair, *, rounds: int = 5) -> dict[str, Any]:
    """A first real sweep on both (at epoch + 1 hour: nothing due; it starts the near-duplicate bookkeeping, as on
    any store swept before), then ``rounds`` dry runs at the moment 1% is due, interleaved; the plans compared."""
    out: dict[str, Any] = {}
    for backend in BACKENDS:
        meter = Meter(pair.server if backend == "postgresql" else None)
        with meter.running():
            first = pair.store(backend).sweep(now=EPOCH + timedelta(hours=1))
        out[backend] = {"first_sweep": {**meter.figures(), "decisions": first.total}}
    server = Meter(pair.server)
    with server.running():
        timed = interleaved(
            lambda _i: pair.sqlite.sweep(now=SWEEP_DUE_AT, dry_run=True),
            lambda _i: pair.postgresql.sweep(now=SWEEP_DUE_AT, dry_run=True),
            rounds=rounds,
        )
    plans = {b: [[(d.memory_id, d.rule) for d in r.decisions] for r in side.results] for b, side in zip(BACKENDS, (timed.a, timed.b), strict=True)}
    out["sqlite"]["dry_run"] = {**_side_figures(timed.a), "load": _load()}
    out["postgresql"]["dry_run"] = {**_side_figures(timed.b), "server_cpu_s": server.server_s, "load": _load()}
    out["due"] = timed.a.results[0].total if timed.a.results else None
    out["same_plan"] = plans["sqlite"] == plans["postgresql"]
    return out


def remember(pair: Pair, gen: Generator, *, calls: int = 300, warmup: int = 20) -> dict[str, Any]:
    """``remember()`` with exact supersede on both, the same probes in the same order, interleaved call by call,
    after each store's supersede index is built (timed apart) and ``warmup`` untimed calls."""
    checks = supersede_bench.probes(pair.sqlite, gen, warmup + calls)
    out: dict[str, Any] = {"calls": len(checks) - warmup}
    for backend in BACKENDS:
        store = pair.store(backend)
        meter = Meter(pair.server if backend == "postgresql" else None)
        with meter.running():
            store.ctx.postings.sync(store.conn)
        out[backend] = {"postings_build": meter.figures()}
        for text, layer, project in checks[:warmup]:
            store.remember(text, layer=layer, project=project, now=REMEMBER_AT)
    timed_checks = checks[warmup:]

    def call(backend: str) -> Callable[[int], tuple[int, int | None]]:
        def one(i: int) -> tuple[int, int | None]:
            text, layer, project = timed_checks[i]
            memory = pair.store(backend).remember(text, layer=layer, project=project, now=REMEMBER_AT)
            return memory.id, memory.parent_id

        return one

    server = Meter(pair.server)
    with server.running():
        timed = interleaved(call("sqlite"), call("postgresql"), rounds=len(timed_checks))
    out["sqlite"].update(_side_figures(timed.a), superseded=sum(p is not None for _, p in timed.a.results), load=_load())
    out["postgresql"].update(
        _side_figures(timed.b), superseded=sum(p is not None for _, p in timed.b.results), server_cpu_s=server.server_s, load=_load()
    )
    out["same_outcomes"] = timed.a.results == timed.b.results
    return out


def import_records(gen: Generator, count: int, salt: int = 41) -> list[dict[str, object]]:
    """``count`` new records (texts from the store's distribution, not in it), layers and projects mixed as the
    generator mixes them."""
    rng = np.random.default_rng([gen.seed, salt])
    cum = np.cumsum([w for _, _, w in LAYER_MIX])
    out: list[dict[str, object]] = []
    for text in gen.fresh_texts(count, salt=salt):
        layer, type_, _ = LAYER_MIX[int(np.searchsorted(cum, rng.random() * cum[-1]))]
        out.append({"content": text, "layer": layer, "type": type_, "project": gen.projects[int(rng.integers(0, len(gen.projects)))]})
    return out


def bulk_import(pair: Pair, recs: list[dict[str, object]]) -> dict[str, Any]:
    """``remember_many`` of ``recs`` into both filled stores, a batch at a time, the backends alternating."""
    meters = {"sqlite": Meter(), "postgresql": Meter(pair.server)}
    batches = [recs[i : i + BATCH] for i in range(0, len(recs), BATCH)]
    for n, batch in enumerate(batches):
        for backend in BACKENDS if n % 2 == 0 else BACKENDS[::-1]:
            with meters[backend].running():
                pair.store(backend).remember_many(batch, batch_size=BATCH, now=REMEMBER_AT)
    out: dict[str, Any] = {"records": len(recs)}
    for backend, meter in meters.items():
        out[backend] = {**meter.figures(), "per_s": round(len(recs) / meter.wall) if meter.wall else None}
    return out


# --- concurrent writers -----------------------------------------------------------------------------------------------


def _writer(location: str, index: int, seconds: float, seed: int, salt: int, ready: Any, start: Any, results: Any) -> None:
    """One writer process: open the store, remember once (the supersede index built, the connection warm), say it
    is ready, wait for the start, then remember for ``seconds``: new texts, every third a near-duplicate of the
    writer's previous text (it supersedes it). Puts its count, latencies, CPU and errors on ``results``."""
    gen = Generator(seed)
    texts = gen.fresh_texts(6000, salt=salt)
    rng = np.random.default_rng([seed, salt])
    project = gen.projects[index % len(gen.projects)]
    latencies: list[float] = []
    errors: list[str] = []
    cpu = elapsed = 0.0
    open_retries = 0
    try:
        with MemoryStore.open(location, actor=f"writer-{index}") as store:
            # The first remember builds the supersede index (seconds at a million; outside the write lock since
            # StoreContext.prepare_postings, inside it before): one locked out anyway tries again, counted.
            open_retries = until_unlocked(lambda: store.remember(texts[0], layer="semantic", project=project, now=REMEMBER_AT))
            ready.put(index)
            start.wait()
            began, cpu0 = time.perf_counter(), time.process_time()
            deadline = began + seconds
            previous = texts[0]
            i = 1
            while time.perf_counter() < deadline:
                text = gen.edit(previous, rng) if i % 3 == 0 else texts[i % len(texts)]
                now = REMEMBER_AT + timedelta(hours=1 + index, seconds=i)
                t0 = time.perf_counter()
                try:
                    store.remember(text, layer="semantic", project=project, now=now)
                    latencies.append(time.perf_counter() - t0)
                except Exception as exc:  # a lock error reaching a caller is a finding, not the end of the run
                    errors.append(f"{type(exc).__name__}: {exc}")
                previous = text
                i += 1
            elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu0
    except Exception:
        errors.append(traceback.format_exc(limit=3))
        ready.put(index)
    results.put({"index": index, "count": len(latencies), "latencies": latencies, "seconds": elapsed, "cpu_s": cpu, "errors": errors[:5],
                 "error_count": len(errors), "open_retries": open_retries})  # fmt: skip


def until_unlocked(call: Callable[[], object], *, seconds: float = 1800.0) -> int:
    """Run ``call`` until it does not raise :class:`memlens.errors.StoreLockedError` (for at most ``seconds``, then
    the error is raised); returns how many times it was locked out."""
    from memlens.errors import StoreLockedError

    deadline = time.monotonic() + seconds
    retries = 0
    while True:
        try:
            call()
            return retries
        except StoreLockedError:
            if time.monotonic() >= deadline:
                raise
            retries += 1


def writers(location: str, processes: int, seconds: float, seed: int, server: ServerCpu | None, *, salt: int = 0) -> dict[str, Any]:
    """``processes`` writer processes on the store at ``location``, remembering together for ``seconds`` once all
    have opened it; total remembers per second, latency per call over all writers, CPU (the writers' own during the
    timed stretch, and the server's)."""
    ctx = multiprocessing.get_context("spawn")
    ready, results, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_writer, args=(location, i, seconds, seed, 1000 + salt + i, ready, start, results)) for i in range(processes)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=1800)  # opening builds each writer's supersede index: a minute at a million
        load_before = _load()
        meter = Meter(server)
        with meter.running():
            start.set()
            done = [results.get(timeout=seconds + 600) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    latencies = [x for d in done for x in d["latencies"]]
    count = sum(d["count"] for d in done)
    span = max((d["seconds"] for d in done), default=0.0)
    out: dict[str, Any] = {
        "processes": processes,
        "remembers": count,
        "per_s": round(count / span, 1) if span else None,
        "p50_ms": round(percentile(latencies, 50) * 1000, 3),
        "p95_ms": round(percentile(latencies, 95) * 1000, 3),
        "max_ms": round(max(latencies, default=0.0) * 1000, 3),
        "per_writer": [d["count"] for d in sorted(done, key=lambda d: d["index"])],
        "errors": sum(d["error_count"] for d in done),
        "open_retries": sum(d.get("open_retries", 0) for d in done),
        "error_examples": [e for d in done for e in d["errors"]][:3],
        "wall_s": round(meter.wall, 3),
        "cpu_s": round(sum(d["cpu_s"] for d in done), 3),
        "load_before": load_before,
        "load": _load(),
    }
    if meter.server_s is not None:
        out["server_cpu_s"] = round(meter.server_s, 3)
    return out


# --- the run ----------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def database(admin_url: str, name: str) -> Iterator[str]:
    """A fresh database ``name`` on the server of ``admin_url`` (dropped first if left over, and afterwards)."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(admin_url)
    try:
        yield urlunsplit(parts._replace(path="/" + name))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def run_size(size: int, *, seed: int, admin_url: str, server: ServerCpu, workdir: Path, options: argparse.Namespace,
             progress: Callable[[str], None], emit: Callable[[str], None]) -> dict[str, Any]:  # fmt: skip
    """Every figure at one size (see the module docstring); each printed through ``emit`` as it is measured."""
    gen = Generator(seed)
    out: dict[str, Any] = {"size": size}
    progress(f"{size:,}: generating the records")
    recs = stores.records(gen, size)
    sqlite_path = workdir / f"backends-{size}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(sqlite_path) + suffix).unlink(missing_ok=True)
    with database(admin_url, f"memlens_backends_{size}_{os.getpid()}") as pg_url:
        lite, pg = MemoryStore.open(sqlite_path, actor="bench"), MemoryStore.open(pg_url, actor="bench")
        pair = Pair(sqlite_path, pg_url, lite, pg, server)
        try:
            steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
                ("fill", lambda: fill(pair, recs)),
                ("pg_analyze", lambda: analyze(pg_url)),
                ("search", lambda: search(pair, gen, queries=options.queries, rounds=options.search_rounds)),
                ("sweep", lambda: sweep(pair)),
                ("remember", lambda: remember(pair, gen, calls=options.remember_calls)),
                ("import", lambda: bulk_import(pair, import_records(gen, options.import_records))),
            ]
            for name, step in steps:
                progress(f"{size:,}: {name}")
                out[name] = _guarded(name, step)
                emit(describe(name, out[name]))
            recs.clear()  # a million records are a gigabyte: not kept through the writers
            lite.close()  # the writers' processes open their own
            pg.close()
            out["writers"] = {}
            for n, count in enumerate(options.writers):
                for backend in BACKENDS if n % 2 == 0 else BACKENDS[::-1]:
                    progress(f"{size:,}: {count} writer process(es) on {LABELS[backend]} for {options.writer_seconds:g} s")
                    salt = 100 * count + (50 if backend == "postgresql" else 0)  # texts of their own for every run
                    measured = functools.partial(writers, pair.location(backend), count, options.writer_seconds, seed,
                                                 server if backend == "postgresql" else None, salt=salt)  # fmt: skip
                    result = _guarded("writers", measured)
                    out["writers"].setdefault(str(count), {})[backend] = result
                emit(describe("writers", out["writers"][str(count)], count=count))
        finally:
            lite.close()
            pg.close()
            for suffix in ("", "-wal", "-shm"):
                Path(str(sqlite_path) + suffix).unlink(missing_ok=True)
    return out


def _guarded(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``fn()``, or ``{"error": ...}`` with the traceback on standard error: one figure's failure costs only it."""
    try:
        return fn()
    except Exception as exc:
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        return {"error": f"{name} failed: {type(exc).__name__}: {exc}"}


# --- printing ---------------------------------------------------------------------------------------------------------


def _cost(r: dict[str, Any]) -> str:
    """``wall / CPU s`` of a figure (CPU with the server's beside it on PostgreSQL) and the load at its end."""
    text = f"{r.get('wall_s', 0):.2f} s wall / {r.get('cpu_s', 0):.2f} s CPU"
    if r.get("server_cpu_s") is not None:
        text += f" + server {r['server_cpu_s']:.2f} s CPU"
    return text + f", load {r['load'][0]:.1f}" if r.get("load") else text


def _per_call(r: dict[str, Any]) -> str:
    return f"p50 {r['p50_ms']:.2f} / {r['cpu_p50_ms']:.2f} ms (wall / CPU), p95 {r['p95_ms']:.2f} / {r['cpu_p95_ms']:.2f} ms"


def describe(name: str, r: dict[str, Any], *, count: int = 0) -> str:
    """One figure's lines, both backends."""
    if "error" in r:
        return f"{name}: {r['error']}"
    lines: list[str] = []
    if name == "fill":
        lines.append(f"fill: {r['records']:,} records through remember_many, {r['rounds']} round(s) alternating")
        for b in BACKENDS:
            lines.append(f"  {LABELS[b]:<10} {r[b]['per_s']:>9,}/s   {_cost(r[b])}")
    elif name == "pg_analyze":
        lines.append(f"PostgreSQL VACUUM ANALYZE after the fill: {_cost(r)}")
    elif name == "search":
        lines.append(f"search: {r['queries']} queries x {r['rounds']} rounds, limit 10; {r['queries_with_hits']} with hits; "
                     f"hit ids differing in {r['differing_queries']} queries ({r['differing_same_ids_other_order']} of them the same ids in another order)")  # fmt: skip
        for b in BACKENDS:
            lines.append(f"  {LABELS[b]:<10} {_per_call(r[b])}; {_cost(r[b])}")
        lines += [f"  differs: {e}" for e in r["examples_of_difference"]]
    elif name == "sweep":
        lines.append(f"sweep: first sweep (nothing due), then the dry-run plan with {r['due']:,} due; same plan on both: {r['same_plan']}")
        for b in BACKENDS:
            lines.append(f"  {LABELS[b]:<10} dry run {_per_call(r[b]['dry_run'])}; first sweep {_cost(r[b]['first_sweep'])}")
    elif name == "remember":
        lines.append(f"remember (exact supersede): {r['calls']} calls; same ids and outcomes on both: {r['same_outcomes']}")
        for b in BACKENDS:
            lines.append(f"  {LABELS[b]:<10} {_per_call(r[b])}; {r[b]['superseded']} superseded; {_cost(r[b])}; "
                         f"supersede index built in {_cost(r[b]['postings_build'])}")  # fmt: skip
    elif name == "import":
        lines.append(f"import into the filled store: {r['records']:,} new records through remember_many")
        for b in BACKENDS:
            lines.append(f"  {LABELS[b]:<10} {r[b]['per_s']:>9,}/s   {_cost(r[b])}")
    elif name == "writers":
        lines.append(f"{count} writer process(es):")
        for b in BACKENDS:
            w = r.get(b, {})
            if "error" in w:
                lines.append(f"  {LABELS[b]:<10} {w['error']}")
                continue
            lines.append(f"  {LABELS[b]:<10} {w['per_s']:>8,} remembers/s ({w['remembers']:,} in {w['wall_s']:.1f} s; per writer {w['per_writer']}), "
                         f"p50 {w['p50_ms']:.2f} ms, p95 {w['p95_ms']:.2f} ms; writers' {_cost(w)}; errors {w['errors']}"
                         + (f"; locked out {w['open_retries']} time(s) while opening" if w.get("open_retries") else ""))  # fmt: skip
    return "\n".join(lines)


def _cell(r: Any, fmt: Callable[[dict[str, Any]], str]) -> str:
    if not isinstance(r, dict) or "error" in r:
        return "failed" if isinstance(r, dict) else "-"
    try:
        return fmt(r)
    except (KeyError, TypeError):
        return "-"


def _field(key: str) -> Callable[[dict[str, Any]], float]:
    return lambda r: float(r[key])


def _costs(r: dict[str, Any]) -> str:
    server = f"+{r['server_cpu_s']:.1f}" if r.get("server_cpu_s") is not None else ""
    return f"{r['wall_s']:.1f}/{r['cpu_s']:.1f}{server} s"


def table(results: dict[str, Any]) -> str:
    """The side-by-side table: a row per figure and size, SQLite and PostgreSQL beside each other, with the ratio
    (PostgreSQL over SQLite: for times, above 1 is slower; for rates, below 1 is slower)."""
    m = results["machine"]
    lines = [f"memlens on SQLite and PostgreSQL (seed {results['seed']}) on {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, Python {m['python']}, "
             f"SQLite {m['sqlite']}, {results.get('postgresql_version', 'PostgreSQL ?')}",
             "costs are wall/CPU s (this process, its import worker or the writers; +server: the PostgreSQL server's CPU); load: 1-minute load average at the end"]  # fmt: skip
    grid = [["size", "figure", "SQLite", "PostgreSQL", "PG/SQLite", "SQLite cost", "PostgreSQL cost", "load"]]

    def row(size: str, figure: str, r: Any, value: Callable[[dict[str, Any]], float], shown: Callable[[float], str],
            cost: Callable[[dict[str, Any]], dict[str, Any]] = lambda x: x) -> None:  # fmt: skip
        if not isinstance(r, dict) or "error" in r:
            grid.append([size, figure, "failed" if isinstance(r, dict) else "-", "", "", "", "", ""])
            return
        cells = [_cell(r.get(b), lambda x: shown(value(x))) for b in BACKENDS]
        try:
            ratio = f"{value(r['postgresql']) / value(r['sqlite']):.2f}x"
        except (KeyError, TypeError, ZeroDivisionError):
            ratio = "-"
        costs = [_cell(r.get(b), lambda x: _costs(cost(x))) for b in BACKENDS]
        load = _cell(r.get("postgresql"), lambda x: f"{cost(x)['load'][0]:.1f}")
        grid.append([size, figure, *cells, ratio, *costs, load])

    ms = "{:.2f} ms".format
    rate = "{:,.0f}/s".format
    for key, by in results["by_size"].items():
        size = f"{int(key):,}"
        row(size, "fill (remember_many)", by.get("fill"), lambda x: x["per_s"], rate)
        for stat in ("p50", "p95"):
            row(size, f"search {stat}", by.get("search"), _field(f"{stat}_ms"), ms)
        s = by.get("search")
        if isinstance(s, dict) and "error" not in s:
            grid.append([size, "search: queries with differing hit ids", f"{s['differing_queries']} of {s['queries']}", "", "", "", "", ""])
        for stat in ("p50", "p95"):
            row(size, f"remember {stat}", by.get("remember"), _field(f"{stat}_ms"), ms)
        imported = by.get("import")
        records = f"{imported['records']:,}" if isinstance(imported, dict) and "records" in imported else "?"
        row(size, f"import {records} into filled", imported, lambda x: x["per_s"], rate)
        row(size, "sweep dry run p50", by.get("sweep"), lambda x: x["dry_run"]["p50_ms"], ms, cost=lambda x: x["dry_run"])
        row(size, "first sweep", by.get("sweep"), lambda x: x["first_sweep"]["wall_s"], "{:.2f} s".format, cost=lambda x: x["first_sweep"])
        for count, per in by.get("writers", {}).items():
            row(size, f"{count} writer(s): remembers/s", per, lambda x: x["per_s"], rate)
            row(size, f"{count} writer(s): p50", per, lambda x: x["p50_ms"], ms)
    widths = [max(len(r[c]) for r in grid) for c in range(len(grid[0]))]
    for r in grid:
        lines.append("  " + "  ".join(cell.ljust(w) if c < 2 else cell.rjust(w) for c, (cell, w) in enumerate(zip(r, widths, strict=True))))
    lines.append("")
    lines.append(f"total {results['seconds']} s wall, {results['cpu_seconds']} s CPU (this process); load average at start {m['load_average']}, "
                 f"at end {results['load_average_at_end']}")  # fmt: skip
    lines.append(f"command: {results['command']}")
    return "\n".join(lines)


def run(sizes: Sequence[int], *, seed: int, admin_url: str, options: argparse.Namespace, command: str,
        progress: Callable[[str], None] = report_progress, emit: Callable[[str], None] = print) -> dict[str, Any]:  # fmt: skip
    """Every size's figures on both backends, databases made on the server of ``admin_url``; the JSON-ready results."""
    import psycopg

    server = ServerCpu.of(admin_url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        version = conn.execute("SELECT version()").fetchone()
    results: dict[str, Any] = {"machine": machine(), "seed": seed, "sizes": list(sizes), "command": command,
                               "postgresql_version": version[0].split(",")[0] if version else None,
                               "server_cpu_measured": server.pid is not None, "by_size": {}}  # fmt: skip
    started, started_cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="memlens-backends-") as tmp:
        for size in sizes:
            emit(f"--- {size:,} memories (load average {_load()})")
            results["by_size"][str(size)] = run_size(size, seed=seed, admin_url=admin_url, server=server, workdir=Path(tmp), options=options,
                                                     progress=progress, emit=emit)  # fmt: skip
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["cpu_seconds"] = round(time.process_time() - started_cpu, 1)
    results["load_average_at_end"] = _load()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Run the side-by-side benchmark from the command line; returns the exit code."""
    from memlens.errors import InvalidInput

    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m memlens.bench.backends_bench", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100k", help="comma-separated store sizes (default 100k; 1m is long: see the report of a 100k run first)")
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    parser.add_argument("--queries", type=int, default=200, help="search queries (default 200)")
    parser.add_argument("--search-rounds", type=int, default=2, help="timed passes over the queries (default 2)")
    parser.add_argument("--remember-calls", type=int, default=300, help="timed remember() calls on each backend (default 300)")
    parser.add_argument("--import-records", type=int, default=10_000, help="records imported into the filled store (default 10000)")
    parser.add_argument("--writers", default="1,2,4,8", help="comma-separated writer process counts (default 1,2,4,8)")
    parser.add_argument("--writer-seconds", type=float, default=10.0, help="how long the writers remember (default 10)")
    parser.add_argument("--pg-url", help="a PostgreSQL server's URL on which to create the databases (default: a throwaway server)")
    parser.add_argument("--pg-port", type=int, default=54371, help="the throwaway server's port (its socket's name; default 54371)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    parser.add_argument("--out", type=Path, help="also write the JSON to this file")
    args = parser.parse_args(args_list)
    try:
        sizes = [stores.parse_size(s) for s in args.sizes.split(",") if s.strip()]
        args.writers = [int(n) for n in args.writers.split(",") if n.strip()]
    except (InvalidInput, ValueError) as exc:
        print(f"python -m memlens.bench.backends_bench: {exc}", file=sys.stderr)
        return 2
    command = "python -m memlens.bench.backends_bench " + shlex.join(_redacted(args_list))
    emit: Callable[[str], None] = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    if args.pg_url:
        results = run(sizes, seed=args.seed, admin_url=args.pg_url, options=args, command=command, emit=emit)
    else:
        from memlens.postgres import throwaway

        with throwaway.running(port=args.pg_port) as server:
            results = run(sizes, seed=args.seed, admin_url=server.url(), options=args, command=command, emit=emit)
    if not args.json:
        print()
    publish(results, out=args.out, as_json=args.json, table=table)
    return 0


def _redacted(argv: list[str]) -> list[str]:
    """The arguments with a password in ``--pg-url`` left out."""
    from memlens.postgres import redact_url

    out, hide = [], False
    for arg in argv:
        if hide or arg.startswith("--pg-url="):
            arg = redact_url(arg) if hide else "--pg-url=" + redact_url(arg.split("=", 1)[1])
        hide = arg == "--pg-url"
        out.append(arg)
    return out


if __name__ == "__main__":
    sys.exit(main())
