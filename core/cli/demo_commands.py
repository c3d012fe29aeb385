"""``memlens demo``: fill a store with a realistic demo (see :mod:`memlens.demo`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memlens.cli.common import add_command, emit, now_from, store_path
from memlens.errors import InvalidInput


def register(sub: Any) -> None:
    """Add the ``demo`` subcommand."""
    # --now needs no --yes here: back-dated activity is what a demo is (and it never touches a store holding
    # memories without --force).
    p = add_command(
        sub, "demo", cmd_demo, help="write a realistic demo: a few weeks of an agent's work across all four layers", now_help="end the demo's activity at this time"
    )
    p.add_argument("--days", type=int, default=21, help="how many days of activity, ending now (3-365, default 21)")
    p.add_argument("--seed", type=int, default=7, help="random seed (the same seed and time give the same store)")
    p.add_argument("--force", action="store_true", help="add the demo even if the store already holds memories")


def cmd_demo(args: argparse.Namespace) -> int:
    """Generate the demo into the chosen store."""
    from memlens.demo import generate
    from memlens.store import MemoryStore

    now = now_from(args)
    with MemoryStore.open(store_path(args), actor="demo") as store:
        existing = store.count_memories(latest_only=False, include_expired=True, now=now)
        if existing and not args.force:
            raise InvalidInput(f"{store.path} already holds {existing} memories; use --force to add the demo anyway, or --db to pick another file")

        def progress(done: int, total: int) -> None:
            if not args.json and sys.stderr.isatty():
                print(f"\rday {done}/{total}", end="", file=sys.stderr, flush=True)

        summary = generate(store, now=now, days=args.days, seed=args.seed, progress=progress)
        if not args.json and sys.stderr.isatty():
            print(file=sys.stderr)
        counts = store.layer_counts(now=now)
    data = {"path": str(store.path), "summary": summary.__dict__, "layer_counts": counts}
    emit(args, data, lambda: f"demo written to {store.path}: {summary.describe()}\n" + "  ".join(f"{k} {v}" for k, v in counts.items()))
    return 0
