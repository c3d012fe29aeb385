"""Concurrent writers on one store: does every committed write survive, and does no lock error reach a caller?

``python -m memlens.tools.stress --processes 4 --writes 2000`` starts that many writer processes on a fresh store (all
opening it at the same moment, so creation and migration race too), one maintainer process that forgets, recalls,
sweeps and consolidates while they write (sweep and consolidation when the store has them), and one reader that
searches and lists like the GUI. Each process logs every write it saw commit (the memory id) to its own file.

Afterwards the store is checked: each committed write is either present or was erased by an audited forget or
sweep (the audit log keeps the id of everything erased); anything else is *lost*. Version chains must have exactly
one latest version, and :func:`memlens.maintenance.doctor` must find nothing wrong. The figures printed: writes
attempted, committed, lost, lock errors that reached a caller, lock retries (BEGIN IMMEDIATE attempts repeated
after the busy timeout ran out), other errors. The exit status is 0 only when lost, lock errors and other errors
are all 0 and the store is healthy.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memlens.postgres import is_url

#: A small vocabulary so that writers' texts often supersede each other (chains grow across processes).
_SUBJECTS = ("the api service", "the web client", "the build", "the deploy job", "the database", "the test suite")
_VERBS = ("uses", "needs", "prefers", "runs on", "depends on", "was moved to")
_OBJECTS = ("postgres sixteen", "python three twelve", "node twenty", "redis seven", "nginx", "pnpm nine", "docker compose")
_EXTRAS = ("in production", "on staging", "for local work", "since the migration", "after the outage", "by default")

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


@dataclass
class WorkerStats:
    """What one process attempted and saw happen."""

    role: str
    attempted: int = 0
    committed: int = 0
    lock_errors: int = 0
    conflicts: int = 0  # expected races: recalling or forgetting a memory another process just erased
    errors: list[str] = field(default_factory=list)
    retries: int = 0
    reads: int = 0
    max_wait_ms: float = 0.0
    slowest: dict[str, float] = field(default_factory=dict)  # longest call per kind of operation, in ms


def _text(rng: random.Random, marker: str) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_EXTRAS)} {marker}"


def _timed(stats: WorkerStats, kind: str, fn: Any) -> Any:
    start = time.monotonic()
    try:
        return fn()
    finally:
        ms = (time.monotonic() - start) * 1000
        stats.max_wait_ms = max(stats.max_wait_ms, ms)
        stats.slowest[kind] = max(stats.slowest.get(kind, 0.0), ms)


def _classify_failure(stats: WorkerStats, exc: BaseException) -> None:
    from memlens.errors import NotFound, StoreLockedError

    if isinstance(exc, StoreLockedError) or "locked" in str(exc).lower():
        stats.lock_errors += 1
        stats.errors.append(f"{type(exc).__name__}: {exc}")
    elif isinstance(exc, NotFound):
        stats.conflicts += 1
    else:
        stats.errors.append("".join(traceback.format_exception_only(type(exc), exc)).strip())


def _open(path: str, busy_timeout_ms: int | None, actor: str) -> Any:
    from memlens import MemoryStore

    store = MemoryStore.open(path, actor=actor)
    if busy_timeout_ms is not None:
        store.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    return store


def writer(path: str, index: int, writes: int, seed: int, log_path: str, busy_timeout_ms: int | None, start: Any) -> None:
    """One agent process: remembers (supersede on), imports small batches, observes tool calls and recalls."""
    from memlens import db

    rng = random.Random(seed * 1000 + index)
    stats = WorkerStats(f"writer-{index}")
    start.wait()
    with open(log_path, "a", encoding="utf-8") as log:

        def committed(kind: str, ids: list[int], n: int = 1) -> None:
            stats.committed += n
            log.write(json.dumps({"kind": kind, "ids": ids}) + "\n")
            log.flush()

        try:
            store = _timed(stats, "open", lambda: _open(path, busy_timeout_ms, f"writer-{index}"))
        except Exception as exc:
            _classify_failure(stats, exc)
            log.write(json.dumps({"stats": asdict(stats)}) + "\n")
            return
        own: list[int] = []
        session = f"stress-{index}"
        with store:
            done = 0
            while done < writes:
                op = rng.random()
                now = T0 + timedelta(seconds=done)
                n = 10 if 0.70 <= op < 0.80 else 1  # a small import writes ten memories in one transaction
                stats.attempted += n
                try:
                    if op < 0.70:
                        marker = f"w{index}n{done}"
                        m = _timed(stats, "remember", lambda marker=marker, now=now: store.remember(_text(rng, marker), source_ref=marker, importance=0.9, now=now))
                        own.append(m.id)
                        committed("remember", [m.id])
                        done += 1
                    elif op < 0.80:
                        refs = [f"w{index}n{done}b{k}" for k in range(n)]
                        records = [{"content": _text(rng, r), "source_ref": r, "importance": 0.9, "created_at": now} for r in refs]
                        _timed(stats, "remember_many", lambda records=records: store.remember_many(records, batch_size=len(records)))
                        # The batch's ids, from its own audit entry (a lookup by source could miss one that the
                        # maintainer erased in the meantime, and the entry is the writer's newest of its kind).
                        entry = next(e for e in store.audit(operation="remember_many", limit=500) if e.actor == f"writer-{index}")
                        ids = list(entry.target_ids)
                        own.extend(ids)
                        committed("remember_many", ids, n)
                        done += n
                    elif op < 0.92:
                        m = _timed(stats, "observe", lambda now=now, step=done: store.observe(session, "Bash", {"command": f"make step{step}"}, "ok", project="stress", now=now))
                        committed("observe", [m.id])
                        done += 1
                    else:
                        picked = rng.sample(own, min(3, len(own))) if own else []
                        _timed(stats, "recall", lambda picked=picked, now=now: store.recall(picked, now=now))
                        committed("recall", [])
                        done += 1
                except Exception as exc:
                    _classify_failure(stats, exc)
                    done += n
        stats.retries = db.lock_retries
        log.write(json.dumps({"stats": asdict(stats)}) + "\n")


def maintainer(path: str, seed: int, log_path: str, busy_timeout_ms: int | None, skip: tuple[str, ...], start: Any, stop: Any) -> None:
    """The GUI or a scheduled job: forgets, updates, ends sessions, sweeps and consolidates while agents write."""
    from memlens import db

    rng = random.Random(seed)
    stats = WorkerStats("maintainer")
    start.wait()
    with open(log_path, "a", encoding="utf-8") as log:
        store = _timed(stats, "open", lambda: _open(path, busy_timeout_ms, "maintainer"))
        with store:
            step = 0
            while not stop.is_set():
                step += 1
                now = T0 + timedelta(hours=step)
                stats.attempted += 1
                try:
                    latest = store.list_memories(limit=50, order_by="id", now=now)
                    stats.reads += 1
                    action = step % 6
                    if action in (0, 3) and latest:
                        victim = rng.choice(latest)
                        result = _timed(stats, "forget", lambda victim=victim, now=now: store.forget(victim.id, reason="stress", now=now))
                        log.write(json.dumps({"kind": "forget", "ids": list(result.erased)}) + "\n")
                    elif action == 1 and latest:
                        target = rng.choice(latest)
                        _timed(stats, "update", lambda target=target: store.update(target.id, importance=round(rng.uniform(0.5, 1.0), 2), tags=["checked"]))
                    elif action == 2:
                        for s in store.sessions(limit=3):
                            _timed(stats, "end_session", lambda s=s, now=now: store.end_session(s.id, now=now))
                    elif action == 4 and hasattr(store, "sweep") and "sweep" not in skip:
                        _timed(stats, "sweep", lambda now=now: store.sweep(now=now))
                    elif action == 5 and hasattr(store, "consolidate") and "consolidate" not in skip:
                        _timed(stats, "consolidate", lambda now=now: store.consolidate(now=now))
                    stats.committed += 1
                    log.flush()
                except Exception as exc:
                    _classify_failure(stats, exc)
        stats.retries = db.lock_retries
        log.write(json.dumps({"stats": asdict(stats)}) + "\n")


def reader(path: str, seed: int, log_path: str, start: Any, stop: Any) -> None:
    """The GUI's views: search, list, count and read audit entries while everything else writes."""
    rng = random.Random(seed + 7)
    stats = WorkerStats("reader")
    start.wait()
    with open(log_path, "a", encoding="utf-8") as log:
        try:
            store = _open(path, None, "reader")
        except Exception as exc:
            _classify_failure(stats, exc)
            log.write(json.dumps({"stats": asdict(stats)}) + "\n")
            return
        with store:
            while not stop.is_set():
                stats.attempted += 1
                try:
                    _timed(stats, "search", lambda: store.search(rng.choice(_OBJECTS), limit=20, now=T0))
                    store.list_memories(limit=100, now=T0)
                    store.count_memories(now=T0)
                    store.audit(limit=20)
                    stats.reads += 1
                    stats.committed += 1
                except Exception as exc:
                    _classify_failure(stats, exc)
        log.write(json.dumps({"stats": asdict(stats)}) + "\n")


@dataclass
class StressResult:
    """The figures of one stress run."""

    processes: int
    writes_per_process: int
    attempted: int
    committed: int
    lost: int
    lock_errors: int
    retries: int
    conflicts: int
    other_errors: list[str]
    forgotten_by_maintainer: int
    chains: int
    bad_chains: int
    chains_without_latest: int
    chains_with_several_latest: int
    skipped: tuple[str, ...]
    memories: int
    doctor_ok: bool
    doctor_problems: list[str]
    maintainer_ops: int
    reader_ops: int
    max_wait_ms: float
    slowest: dict[str, float]
    seconds: float
    lost_ids: list[int] = field(default_factory=list)
    workdir: str | None = None  # where the store and the logs were kept (a failing run, or a folder given)

    @property
    def ok(self) -> bool:
        """Nothing lost, no lock error reached a caller, no unexpected error, a healthy store."""
        return self.lost == 0 and self.lock_errors == 0 and not self.other_errors and self.bad_chains == 0 and self.doctor_ok

    def describe(self) -> str:
        """The figures as printed."""
        lines = [
            f"stress: {self.processes} writer processes x {self.writes_per_process} writes, 1 maintainer, 1 reader, {self.seconds:.1f} s"
            + (f" (maintainer skips {', '.join(self.skipped)})" if self.skipped else ""),
            f"  writes attempted        {self.attempted:>8}",
            f"  writes committed        {self.committed:>8}",
            f"  writes lost             {self.lost:>8}",
            f"  lock errors to callers  {self.lock_errors:>8}",
            f"  lock retries            {self.retries:>8}",
            f"  other errors            {len(self.other_errors):>8}",
            f"  expected conflicts      {self.conflicts:>8}   (recall/forget of a memory another process had just erased)",
            f"  erased by maintainer    {self.forgotten_by_maintainer:>8}",
            f"  maintainer operations   {self.maintainer_ops:>8}",
            f"  reader operations       {self.reader_ops:>8}",
            f"  longest single call     {self.max_wait_ms:>8.0f} ms   ("
            + ", ".join(f"{k} {v:.0f}" for k, v in sorted(self.slowest.items(), key=lambda kv: -kv[1]))
            + ")",
            f"  memories afterwards     {self.memories:>8}",
            f"  version chains          {self.chains:>8}   ({self.chains_without_latest} with no latest version, "
            f"{self.chains_with_several_latest} with several)",
            f"  doctor                  {'ok' if self.doctor_ok else 'PROBLEMS: ' + '; '.join(self.doctor_problems)}",
        ]
        for err in self.other_errors[:10]:
            lines.append(f"  error: {err}")
        if self.lost_ids:
            lines.append(f"  lost ids: {', '.join(map(str, self.lost_ids))}")
        if self.workdir:
            lines.append(f"  store and logs: {self.workdir}")
        lines.append("PASS" if self.ok else "FAIL")
        return "\n".join(lines)


def run(
    *,
    processes: int = 4,
    writes: int = 2000,
    db_path: str | Path | None = None,
    seed: int = 1,
    busy_timeout_ms: int | None = None,
    with_maintainer: bool = True,
    with_reader: bool = True,
    skip: tuple[str, ...] = (),
    workdir: str | Path | None = None,
) -> StressResult:
    """Run the stress test and check the store; ``db_path`` defaults to a fresh file in ``workdir``, which holds
    the processes' logs and defaults to a temporary folder (removed after a passing run, kept after a failing one)."""
    from memlens import MemoryStore
    from memlens.maintenance import doctor

    own_workdir = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="memlens-stress-")) if workdir is None else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    # A file, or a database on a PostgreSQL server (the processes then stand for agents on several hosts).
    path = str(db_path) if is_url(db_path) else str(Path(db_path) if db_path else workdir / "stress.db")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    stop = ctx.Event()
    logs = [workdir / f"writer-{i}.jsonl" for i in range(processes)]
    procs = [ctx.Process(target=writer, args=(path, i, writes, seed, str(logs[i]), busy_timeout_ms, start)) for i in range(processes)]
    helpers = []
    if with_maintainer:
        helpers.append(ctx.Process(target=maintainer, args=(path, seed, str(workdir / "maintainer.jsonl"), busy_timeout_ms, tuple(skip), start, stop)))
    if with_reader:
        helpers.append(ctx.Process(target=reader, args=(path, seed, str(workdir / "reader.jsonl"), start, stop)))
    for p in procs + helpers:
        p.start()
    began = time.monotonic()
    start.set()  # every process opens the (not yet existing) store at the same moment
    for p in procs:
        p.join()
    stop.set()
    for p in helpers:
        p.join()
    seconds = time.monotonic() - began

    stats: list[WorkerStats] = []
    committed_ids: list[int] = []
    maintainer_erased = 0
    for log_file in [*logs, workdir / "maintainer.jsonl", workdir / "reader.jsonl"]:
        if not log_file.exists():
            continue
        for line in log_file.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if "stats" in entry:
                stats.append(WorkerStats(**entry["stats"]))
            elif entry["kind"] == "forget":
                maintainer_erased += len(entry["ids"])
            else:
                committed_ids.extend(entry["ids"])
    dead = [p for p in procs + helpers if p.exitcode != 0]

    with MemoryStore.open(path) as store:
        conn = store.conn
        present = {r[0] for r in conn.execute("SELECT id FROM memories")}
        erased: set[int] = set()
        for (details,) in conn.execute("SELECT details FROM audit WHERE details LIKE '%content_sha256%'"):
            erased.update(int(k) for k in json.loads(details).get("content_sha256", {}))
        chains = conn.execute("SELECT COUNT(DISTINCT chain_id) FROM memories").fetchone()[0]
        per_chain = conn.execute("SELECT SUM(is_latest) FROM memories GROUP BY chain_id HAVING SUM(is_latest) != 1").fetchall()
        without_latest = sum(1 for (n,) in per_chain if n == 0)
        memories = len(present)
    lost_ids = sorted({i for i in committed_ids if i not in present and i not in erased})
    if is_url(path):
        # doctor checks a file's pages and FTS5 tables; a server's store is checked by its audit chain here.
        with MemoryStore.open(path) as store:
            check = store.verify_audit()
        doctor_ok, doctor_problems = check.ok, ([] if check.ok else [f"audit: {check.problem}"])
    else:
        report = doctor(path)
        doctor_ok, doctor_problems = report.ok, [f"{c.name}: {c.summary}" for c in report.checks if not c.ok]
    writers = [s for s in stats if s.role.startswith("writer")]
    other_errors = [e for s in stats for e in s.errors if "locked" not in e.lower()]
    other_errors += [f"process exited with code {p.exitcode}" for p in dead]
    result = StressResult(
        processes=processes,
        writes_per_process=writes,
        attempted=sum(s.attempted for s in writers),
        committed=sum(s.committed for s in writers),
        lost=len(lost_ids),
        lock_errors=sum(s.lock_errors for s in stats),
        retries=sum(s.retries for s in stats),
        conflicts=sum(s.conflicts for s in stats),
        other_errors=other_errors,
        forgotten_by_maintainer=maintainer_erased,
        chains=chains,
        bad_chains=len(per_chain),
        chains_without_latest=without_latest,
        chains_with_several_latest=len(per_chain) - without_latest,
        skipped=tuple(skip),
        memories=memories,
        doctor_ok=doctor_ok,
        doctor_problems=doctor_problems,
        maintainer_ops=sum(s.committed for s in stats if s.role == "maintainer"),
        reader_ops=sum(s.committed for s in stats if s.role == "reader"),
        max_wait_ms=max((s.max_wait_ms for s in stats), default=0.0),
        slowest={k: max(s.slowest.get(k, 0.0) for s in stats) for k in {k for s in stats for k in s.slowest}},
        seconds=seconds,
        lost_ids=lost_ids[:50],
    )
    if own_workdir and result.ok:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        result.workdir = str(workdir)
    return result


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m memlens.tools.stress", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--processes", type=int, default=4, help="writer processes (default 4)")
    parser.add_argument("--writes", type=int, default=2000, help="writes per writer process (default 2000)")
    parser.add_argument("--db", help="store file (default: a fresh one in a temporary folder)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--busy-timeout-ms", type=int, help="lower SQLite's busy timeout to force memlens's own retry path")
    parser.add_argument("--skip", default="", help="comma-separated maintainer operations to leave out: sweep, consolidate")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.processes < 1 or args.writes < 1:
        parser.error("--processes and --writes must be at least 1")
    skip = tuple(s for s in args.skip.split(",") if s)
    result = run(processes=args.processes, writes=args.writes, db_path=args.db, seed=args.seed, busy_timeout_ms=args.busy_timeout_ms, skip=skip)
    if args.json:
        print(json.dumps({**asdict(result), "ok": result.ok}, indent=2))
    else:
        print(result.describe())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
