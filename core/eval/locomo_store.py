"""``python -m memlens.eval.locomo_store --data FILE --out PATH``: one store holding every LoCoMo conversation.

A real-text store of a few thousand memories to look at in the inspector (the evaluation in
:mod:`memlens.eval.locomo` builds a fresh store per conversation and throws it away). Every turn becomes one memory
through :meth:`memlens.store.MemoryStore.remember_many`, as :func:`memlens.eval.locomo.memlens_searcher` stores it
(content ``"<speaker>: <text>"``, the session's date as its time, the turn's ``dia_id`` as ``source_ref``, one
memlens session per conversation session, type ``message``, no supersede), plus the conversation's id as the
project so the project filter tells the conversations apart. The layer defaults to ``episodic``: turns are events,
and the working layer's low-value rule would sweep two-year-old chat lines on the first sweep.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memlens.errors import MemlensError
from memlens.eval.locomo import Sample, load
from memlens.storage.validation import LAYERS
from memlens.store import MemoryStore


def records(samples: Sequence[Sample], *, layer: str) -> Iterator[dict[str, Any]]:
    """The ``remember_many`` records for every turn of every sample, in conversation order."""
    for sample in samples:
        for turn in sample.turns:
            yield {
                "content": turn.content(),
                "created_at": turn.when,
                "source_ref": turn.dia_id,
                "session_id": f"{sample.sample_id}/session_{turn.session}",
                "project": sample.sample_id,
                "layer": layer,
                "type": "message",
            }


def build(data: Path, out: Path, *, layer: str = "episodic") -> int:
    """Write every turn of the LoCoMo-shaped file ``data`` into a new store at ``out``; how many were stored.

    Refuses (FileExistsError) to write into an existing file: the store is meant to be built once, fresh.
    """
    if out.exists():
        raise FileExistsError(f"{out} already exists; remove it or choose another path")
    samples = [s for s in load(data) if s.turns]
    last = max(t.when for s in samples for t in s.turns)
    with MemoryStore.open(out, actor="locomo") as store:
        return store.remember_many(records(samples, layer=layer), supersede=False, now=last)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m memlens.eval.locomo_store", description="Build one store holding every LoCoMo conversation.")
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-shaped JSON file (e.g. shared/data/locomo/locomo-dev.json)")
    parser.add_argument("--out", type=Path, required=True, help="the store to create (must not exist)")
    parser.add_argument("--layer", choices=LAYERS, default="episodic", help="the layer of every turn (default episodic)")
    args = parser.parse_args(argv)
    try:
        stored = build(args.data, args.out, layer=args.layer)
    except (MemlensError, FileExistsError) as exc:
        print(f"python -m memlens.eval.locomo_store: {exc}", file=sys.stderr)
        return 2
    print(f"stored {stored:,} memories in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
