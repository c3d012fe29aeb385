"""kill -9 in the middle of an operation, many times: the store must open, be intact, and the operation be whole
or absent.

``python -m memlens.tools.crash --runs 20`` builds one store with a realistic mix (knowledge with version chains,
sessions of observations, expired and pinned memories, derived summaries), then, run after run, copies it, starts
a child process that performs one operation on the copy and kills that child with SIGKILL at a random point:

* ``import`` — a large memlens JSONL import through :func:`memlens.io.import_file` (one transaction),
* ``remember_many`` — a large bulk load in one batch,
* ``forget`` — erasing hundreds of memories at once (and the WAL checkpoint that follows),
* ``sweep`` and ``consolidate`` — when the store has them.

Kill points rotate through three kinds: *step* kills, where the child kills itself after a random number of SQLite
VM steps (a progress handler counts them; the total is measured by a calibration run), which lands inside
statements; *timer* kills, where the parent sends SIGKILL after a random delay within the operation's measured
duration; and *commit* kills, as soon as the operation's transaction has committed (before the checkpoint, the
close).

After each kill the copy must open with :class:`core.MemoryStore`; ``PRAGMA integrity_check``, the FTS5 checks, the
full-text and supersede indexes' agreement with the table, orphans, chains and the audit chain are checked by
:func:`memlens.maintenance.doctor` (a crash may not add any finding that the uninterrupted operation does not also
leave); and a digest of every table's rows must equal either the store before the operation (absent) or after it
ran uninterrupted (whole). The tally printed: runs, killed mid-operation, finished before the kill, absent, whole,
partial (must be 0), unhealthy (must be 0).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
LATER = NOW + timedelta(days=400)
#: The progress handler runs every this many SQLite VM instructions; a step kill lands on one of these calls.
STEP = 100
#: Tables whose rows make up a store's logical state (the FTS indexes are checked for agreement separately).
#: Columns that say when a run happened rather than what it did: the audit log's wall-clock time and the hashes over it.
RUN_TIME_COLUMNS = {"audit": ("at", "prev_hash", "hash")}
STATE_TABLES = ("memories", "memory_tags", "relations", "sessions", "access_log", "audit", "audit_targets", "meta")
OPERATIONS = ("import", "remember_many", "forget", "sweep", "consolidate")


# --- building the store -------------------------------------------------------------------------------------------


def build_store(path: Path, *, size: int) -> None:
    """A store with ``size`` knowledge memories and everything the operations act on, all at fixed times."""
    from memlens import MemoryStore

    past = NOW - timedelta(days=300)
    with MemoryStore.open(path) as store:
        store.remember_many(
            (
                {
                    "content": f"Service {i % 97} talks to queue {i % 13} through port {8000 + i} and logs to bucket {i % 7}",
                    "tags": [f"svc{i % 11}", "infra"],
                    "importance": 0.3 + (i % 7) / 10,
                    "created_at": past + timedelta(minutes=i),
                    "ttl_days": 30 if i % 9 == 0 else None,
                }
                for i in range(size)
            ),
            now=past,
        )
        # Version chains through supersede.
        for i in range(40):
            store.remember(f"The deploy target for team {i} is cluster alpha in region one", project="ops", now=past + timedelta(hours=i))
            store.remember(f"The deploy target for team {i} is cluster alpha in region two", project="ops", now=past + timedelta(hours=i, minutes=5))
        # Sessions of observations (for consolidation), some ended, some idle; near-duplicates sharing a tag (for the sweep).
        for s in range(12):
            sid = f"session-{s}"
            for k in range(15):
                store.observe(
                    sid,
                    "Bash" if k % 3 else "Edit",
                    {"command": f"pytest tests/test_mod{k}.py -q", "file_path": f"src/mod{k}.py"},
                    "3 passed" if k % 4 else "Traceback (most recent call last): AssertionError",
                    project="app",
                    now=past + timedelta(days=s, minutes=k),
                )
            if s % 2 == 0:
                store.end_session(sid, now=past + timedelta(days=s, hours=1))
        for i in range(30):
            store.remember(f"Remember to rotate the credentials of vault {i} every month", tags=["security"], now=past + timedelta(days=1, minutes=i))
            store.remember(f"Remember to rotate the credentials of vault {i} every month please", tags=["security"], supersede=False, now=past + timedelta(days=2, minutes=i))
        pinned = store.list_memories(limit=20, order_by="id", descending=False, now=past)
        for m in pinned[:10]:
            store.update(m.id, pinned=True, now=past)
        store.recall([m.id for m in pinned[10:20]], now=past + timedelta(days=3))
        summary = store.remember("Summary: services 1 to 5 share queue 1", type="summary", layer="episodic", now=past + timedelta(days=4))
        for source in (1, 2, 3, 4, 5):
            store.relate(summary.id, source, "derives", now=past + timedelta(days=4))


def build_payload(path: Path, *, size: int) -> None:
    """A memlens JSONL export of ``size`` memories from a scratch store (what the ``import`` operation reads)."""
    from memlens import MemoryStore
    from memlens.io import export_file

    scratch = path.with_suffix(".scratch.db")
    with MemoryStore.open(scratch) as store:
        store.remember_many(
            ({"content": f"Imported note {i}: the cache for tenant {i % 50} expires after {i % 30} minutes", "tags": ["imported"], "created_at": NOW} for i in range(size)),
            now=NOW,
        )
        export_file(store, path, now=NOW)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{scratch}{suffix}").unlink(missing_ok=True)


def available_operations() -> list[str]:
    """The operations this installation can run (sweep, consolidation and import arrive with their modules)."""
    from memlens import MemoryStore

    ops = ["remember_many", "forget"]
    try:
        from memlens.io import export_file, import_file  # noqa: F401
    except ImportError:
        pass
    else:
        ops.insert(0, "import")
    for name in ("sweep", "consolidate"):
        if hasattr(MemoryStore, name):
            ops.append(name)
    return ops


# --- the child: one operation, maybe killed ---------------------------------------------------------------------------


def perform(store: Any, op: str, payload: Path | None, size: int) -> None:
    """Run one operation on an open store (the same call for the calibration, the reference and the crash runs)."""
    if op == "import":
        from memlens.io import import_file

        assert payload is not None
        import_file(store, payload, now=LATER)
    elif op == "remember_many":
        store.remember_many(
            ({"content": f"Bulk fact {i}: the gateway {i % 40} retries {i % 5} times before failing over", "tags": ["bulk"], "created_at": LATER} for i in range(size)),
            batch_size=size,
            now=LATER,
        )
    elif op == "forget":
        ids = [m.id for m in store.list_memories(limit=size // 3, order_by="id", descending=False, latest_only=False, include_expired=True, now=LATER)]
        store.forget_many(ids, reason="crash test", now=LATER)
    elif op == "sweep":
        store.sweep(now=LATER)
    elif op == "consolidate":
        store.consolidate(now=LATER)
    else:
        raise ValueError(op)


def child(db_path: str, op: str, payload: str | None, size: int, kill_after: int) -> int:
    """Open the store, report readiness, run the operation; SIGKILL itself after ``kill_after`` progress calls
    (0: never; -1: as soon as the first transaction has committed) and otherwise print how many there were."""
    from memlens import MemoryStore

    store = MemoryStore.open(db_path)
    calls = 0

    def progress() -> int:
        nonlocal calls
        calls += 1
        if calls == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return 0

    store.conn.set_progress_handler(progress, STEP)
    boundaries: list[str] = []
    if kill_after == 0:
        # The uninterrupted run records the state after each of its commits: an operation that commits in several
        # transactions (the sweep applies a large backlog in batches) may legitimately stop between them.
        _after_each_commit(lambda: boundaries.append(digest(Path(db_path))))
    if kill_after == -1:
        # Right after the first top-level COMMIT has returned (durable), before anything else runs. Not a trace
        # callback: FTS5 runs its own statements inside the COMMIT, and those would be mistaken for "after".
        _after_each_commit(lambda: os.kill(os.getpid(), signal.SIGKILL))
    print("ready", flush=True)
    started = time.monotonic()
    perform(store, op, Path(payload) if payload else None, size)
    store.close()
    print(f"done {calls} {time.monotonic() - started:.4f} {json.dumps(boundaries)}", flush=True)
    return 0


def _after_each_commit(action: Callable[[], None]) -> None:
    """Run ``action`` in this process each time a top-level transaction has committed (after COMMIT returned)."""
    from memlens import db

    real = db.transaction

    @contextlib.contextmanager
    def then_act(conn: Any, path: Any = "") -> Iterator[Any]:
        top_level = not conn.in_transaction
        with real(conn, path) as c:
            yield c
        if top_level:
            action()

    db.transaction = then_act


# --- checking a store ---------------------------------------------------------------------------------------------


def digest(path: Path) -> str:
    """SHA-256 of every row of the state tables, in a fixed order: equal digests mean equal stores."""
    from memlens import db

    conn = db.open_connection(path, f"file:{path.as_posix()}?mode=ro")
    try:
        h = hashlib.sha256()
        for table in STATE_TABLES:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] not in RUN_TIME_COLUMNS.get(table, ())]
            order = ", ".join(str(i + 1) for i in range(len(columns)))
            h.update(table.encode())
            for row in conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}"):
                h.update(repr(row).encode())
        return h.hexdigest()
    finally:
        conn.close()


def findings(path: Path) -> set[str]:
    """The names of the doctor's failed checks (file permissions aside: copies are made by this tool)."""
    from memlens.maintenance import doctor

    report = doctor(path)
    return {f"{c.name}: {c.summary}" for c in report.checks if not c.ok and c.name != "permissions"}


def _copy(src: Path, dest: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{dest}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(src, dest)
    os.chmod(dest, 0o600)


def _spawn(db_path: Path, op: str, payload: Path | None, size: int, kill_after: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLENS_LLM")}  # the deterministic consolidation
    cmd = [sys.executable, "-m", "memlens.tools.crash", "--child", op, "--db", str(db_path), "--size", str(size), "--kill-after", str(kill_after)]
    if payload is not None:
        cmd += ["--payload", str(payload)]
    root = Path(__file__).resolve().parents[2]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=root)


@dataclass
class Reference:
    """An operation run to completion: its VM progress calls, its duration, the whole state's digest, and the
    digest after each of its commits (one for an operation that is a single transaction)."""

    op: str
    calls: int
    seconds: float
    after: str
    findings_after: set[str]
    boundaries: list[str] = field(default_factory=list)


@dataclass
class RunOutcome:
    """One crash run."""

    run: int
    op: str
    kind: str  # "step", "timer" or "commit"
    point: float  # progress call or seconds
    killed: bool
    state: str  # "absent", "whole", "between transactions (k of n committed)" or "partial"
    healthy: bool
    opened: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class CrashTally:
    """The figures of a crash campaign."""

    runs: int
    killed: int
    finished: int
    absent: int
    whole: int
    between: int
    partial: int
    unhealthy: int
    failed_to_open: int
    operations: dict[str, int]
    outcomes: list[RunOutcome]
    reference_findings: dict[str, list[str]]
    references: dict[str, list[str]] = field(default_factory=dict)  # operation -> digests after each commit

    @property
    def ok(self) -> bool:
        """Every run left an openable, healthy store, with the operation absent, whole, or stopped between two of
        its own transactions (never inside one)."""
        return self.partial == 0 and self.unhealthy == 0 and self.failed_to_open == 0

    def describe(self) -> str:
        """The tally as printed."""
        lines = [
            f"crash: {self.runs} runs ({', '.join(f'{op} {n}' for op, n in self.operations.items())})",
            f"  killed mid-operation    {self.killed:>5}",
            f"  finished before kill    {self.finished:>5}",
            f"  store opened afterwards {self.runs - self.failed_to_open:>5} / {self.runs}",
            f"  operation absent        {self.absent:>5}",
            f"  operation whole         {self.whole:>5}",
            f"  between transactions    {self.between:>5}   (an operation of several transactions stopped at a commit)",
            f"  operation partial       {self.partial:>5}",
            f"  unhealthy afterwards    {self.unhealthy:>5}",
            f"  crashes survived        {self.runs - self.partial - self.unhealthy - self.failed_to_open:>5} / {self.runs}",
        ]
        for op, found in self.reference_findings.items():
            if found:
                lines.append(f"  note: {op} run to completion itself leaves: {'; '.join(found)}")
        for op, ref in self.references.items():
            if len(ref) > 1:
                lines.append(f"  note: {op} commits in {len(ref)} transactions here; a kill between them leaves the earlier ones applied")
        for o in self.outcomes:
            if o.state == "partial" or not o.healthy or not o.opened:
                lines.append(f"  run {o.run} ({o.op}, {o.kind} kill at {o.point:g}): {o.state}; {'; '.join(o.problems)}")
        lines.append("PASS" if self.ok else "FAIL")
        return "\n".join(lines)


def run(*, runs: int = 20, size: int = 3000, seed: int = 1, operations: list[str] | None = None, workdir: Path | None = None) -> CrashTally:
    """Run the crash campaign and return the tally. The copies live in ``workdir`` (default: a temporary folder,
    removed after a passing campaign; a failing run's copy is kept and named in the tally)."""
    from memlens import MemoryStore

    rng = random.Random(seed)
    own_workdir = workdir is None
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="memlens-crash-"))
    work.mkdir(parents=True, exist_ok=True)
    ops = operations or available_operations()
    template = work / "template.db"
    build_store(template, size=size)
    payload = work / "payload.jsonl"
    if "import" in ops:
        build_payload(payload, size=size)
    before = digest(template)
    findings_before = findings(template)

    references: dict[str, Reference] = {}
    for op in ops:
        target = work / f"reference-{op}.db"
        _copy(template, target)
        proc = _spawn(target, op, payload if op == "import" else None, size, 0)
        out, err = proc.communicate()
        if proc.returncode != 0 or "done" not in out:
            raise RuntimeError(f"the uninterrupted {op} failed: {err.strip()[-2000:]}")
        calls, seconds, boundaries = out.split("done", 1)[1].strip().split(" ", 2)
        references[op] = Reference(op, int(calls), float(seconds), digest(target), findings(target), json.loads(boundaries))

    outcomes: list[RunOutcome] = []
    point: float
    for i in range(runs):
        op = ops[i % len(ops)]
        ref = references[op]
        target = work / f"run-{i}.db"
        _copy(template, target)
        kind = ("step", "timer", "commit")[(i // len(ops)) % 3]
        if kind == "commit":
            point = 0
            proc = _spawn(target, op, payload if op == "import" else None, size, -1)
            out, err = proc.communicate()
        elif kind == "step":
            # Half the step kills anywhere, half in the last tenth, where the commit and the checkpoint happen.
            low = 1 if rng.random() < 0.5 else max(1, ref.calls * 9 // 10)
            point = rng.randint(low, max(1, ref.calls))
            proc = _spawn(target, op, payload if op == "import" else None, size, int(point))
            out, err = proc.communicate()
        else:
            proc = _spawn(target, op, payload if op == "import" else None, size, 0)
            assert proc.stdout is not None
            proc.stdout.readline()  # "ready": the store is open, the operation starts now
            # Half anywhere in the operation, half around its end (the commit, the checkpoint, closing).
            point = rng.uniform(0, ref.seconds) if rng.random() < 0.5 else rng.uniform(0.9 * ref.seconds, 1.1 * ref.seconds)
            time.sleep(point)  # the random kill point itself
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate()
        killed = proc.returncode == -signal.SIGKILL
        if not killed and proc.returncode != 0:
            raise RuntimeError(f"run {i} ({op}) failed on its own: {err.strip()[-2000:]}")
        outcome = RunOutcome(i, op, kind, point, killed, "partial", True, True)
        try:
            MemoryStore.open(target).close()
        except Exception as exc:
            outcome.opened = False
            outcome.healthy = False
            outcome.problems.append(f"does not open: {exc}")
        if outcome.opened:
            state = digest(target)
            if state == before:
                outcome.state = "absent"
            elif state == ref.after:
                outcome.state = "whole"
            elif state in ref.boundaries:
                outcome.state = f"between transactions ({ref.boundaries.index(state) + 1} of {len(ref.boundaries)} committed)"
            else:
                outcome.state = "partial"
            allowed = {"absent": findings_before, "partial": set()}.get(outcome.state, findings_before | ref.findings_after)
            extra = findings(target) - allowed
            if extra:
                outcome.healthy = False
                outcome.problems.extend(sorted(extra))
        outcomes.append(outcome)
        if outcome.state == "partial" or not outcome.healthy:
            outcome.problems.append(f"kept for inspection: {target}")
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)

    count = {op: sum(1 for o in outcomes if o.op == op) for op in ops}
    tally = CrashTally(
        runs=runs,
        killed=sum(1 for o in outcomes if o.killed),
        finished=sum(1 for o in outcomes if not o.killed),
        absent=sum(1 for o in outcomes if o.state == "absent"),
        whole=sum(1 for o in outcomes if o.state == "whole"),
        between=sum(1 for o in outcomes if o.state.startswith("between")),
        partial=sum(1 for o in outcomes if o.state == "partial"),
        unhealthy=sum(1 for o in outcomes if not o.healthy),
        failed_to_open=sum(1 for o in outcomes if not o.opened),
        operations=count,
        outcomes=outcomes,
        reference_findings={op: sorted(r.findings_after - findings_before) for op, r in references.items()},
        references={op: r.boundaries for op, r in references.items()},
    )
    if own_workdir and tally.ok:
        shutil.rmtree(work, ignore_errors=True)  # a failing campaign keeps its copies for inspection
    return tally


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m memlens.tools.crash", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--size", type=int, default=3000, help="memories in the store, and in each import (default 3000)")
    parser.add_argument("--ops", help=f"comma-separated operations (default: all available of {', '.join(OPERATIONS)})")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", help="where the copies go (default: a temporary folder)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--payload", help=argparse.SUPPRESS)
    parser.add_argument("--kill-after", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.db, args.child, args.payload, args.size, args.kill_after)
    ops = [o for o in args.ops.split(",") if o] if args.ops else None
    unknown = [o for o in ops or [] if o not in OPERATIONS]
    if unknown:
        parser.error(f"unknown operation(s): {', '.join(unknown)}")
    tally = run(runs=args.runs, size=args.size, seed=args.seed, operations=ops, workdir=Path(args.workdir) if args.workdir else None)
    if args.json:
        data = asdict(tally)
        data["ok"] = tally.ok
        print(json.dumps(data, indent=2, default=str))
    else:
        print(tally.describe())
    return 0 if tally.ok else 1


if __name__ == "__main__":
    sys.exit(main())
