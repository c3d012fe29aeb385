"""How well the deterministic conflict detector does on a labelled set of memory pairs.

``python -m memlens.bench.conflicts [--data PATH] [--json] [--show-errors]`` reads one pair a line (``older``,
``newer``, ``conflict``: true or false, ``category``: conflict, paraphrase, unrelated or compatible, optionally
``kind`` and ``split``) and prints the detector's precision and recall over the whole set, per category (the share
flagged), per conflict kind, and per split (``dev``, written while the detector was built; ``holdout``, after). The default set is
``tests/data/conflict_pairs.jsonl`` of a source checkout. Figures are reported, never asserted.

``--in-store SIZE`` measures what the write path finds instead: a copy of the generated benchmark store of SIZE
memories, every pair's older text remembered into it (the pairs are each other's distractors, on top of the
generated ones), then each newer text; it counts the pairs the rules flag whose conflict the write recorded (the
write compares a new memory with a few candidates only, see :func:`memlens.conflicts.candidate_ids`) and times
those writes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from memlens.conflicts import detect

#: The labelled set of a source checkout (core/bench/ -> the repository root -> tests/data).
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "conflict_pairs.jsonl"


@dataclass(frozen=True)
class PairResult:
    """One labelled pair and what the detector said about it."""

    id: int
    category: str
    kind: str
    expected: bool
    flagged: bool
    split: str
    signals: tuple[str, ...]
    older: str
    newer: str


def load_pairs(path: Path) -> list[dict[str, Any]]:
    """The labelled pairs in ``path`` (JSON lines); a malformed line raises ValueError naming it."""
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("older", "newer", "category")):
            raise ValueError(f"{path}:{number}: a pair needs older, newer and category texts")
        if not isinstance(record.get("conflict"), bool):
            raise ValueError(f"{path}:{number}: conflict must be true or false")
        pairs.append(record)
    return pairs


def evaluate(pairs: Sequence[dict[str, Any]]) -> list[PairResult]:
    """The detector's verdict on every pair."""
    results = []
    for i, p in enumerate(pairs, start=1):
        verdict = detect(p["newer"], p["older"])
        results.append(
            PairResult(
                int(p.get("id", i)), p["category"], str(p.get("kind", "")), p["conflict"], verdict.conflict, str(p.get("split", "dev")),
                verdict.evidence.signals, p["older"], p["newer"],
            )
        )  # fmt: skip
    return results


def scores(results: Sequence[PairResult], *, by_split: bool = True) -> dict[str, Any]:
    """Precision, recall and F1 over ``results``, with the counts, the share flagged per category and per
    conflict kind, and (``by_split``) the same figures per split: ``dev`` pairs were written while the detector was
    built, ``holdout`` pairs after it was frozen."""
    tp = sum(r.flagged and r.expected for r in results)
    fp = sum(r.flagged and not r.expected for r in results)
    fn = sum(not r.flagged and r.expected for r in results)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    categories: dict[str, dict[str, int]] = {}
    kinds: dict[str, dict[str, int]] = {}
    for r in results:
        c = categories.setdefault(r.category, {"pairs": 0, "flagged": 0})
        c["pairs"] += 1
        c["flagged"] += r.flagged
        if r.expected:
            k = kinds.setdefault(r.kind or "?", {"pairs": 0, "flagged": 0})
            k["pairs"] += 1
            k["flagged"] += r.flagged
    return {
        "pairs": len(results), "true_positives": tp, "false_positives": fp, "false_negatives": fn,
        "precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4), "categories": categories, "conflict_kinds": kinds,
        "splits": {name: scores([r for r in results if r.split == name], by_split=False) for name in sorted({r.split for r in results})} if by_split else {},
    }  # fmt: skip


def report(data: dict[str, Any], seconds: float) -> str:
    """The figures as text."""
    lines = [
        f"conflict detector (rules only) on {data['pairs']} labelled pairs",
        f"  precision {data['precision']:.3f}  recall {data['recall']:.3f}  F1 {data['f1']:.3f}  "
        f"(TP {data['true_positives']}, FP {data['false_positives']}, FN {data['false_negatives']})",
        "  flagged per category (conflicts should be, the rest should not):",
    ]
    for name, c in sorted(data["categories"].items()):
        lines.append(f"    {name:<11} {c['flagged']:>3} / {c['pairs']:<3} ({c['flagged'] / c['pairs']:.0%})")
    lines.append("  recall per conflict kind:")
    for name, k in sorted(data["conflict_kinds"].items()):
        lines.append(f"    {name:<11} {k['flagged']:>3} / {k['pairs']}")
    for name, part in data["splits"].items():
        lines.append(
            f"  split {name:<8} {part['pairs']:>3} pairs: precision {part['precision']:.3f}  recall {part['recall']:.3f}  "
            f"(TP {part['true_positives']}, FP {part['false_positives']}, FN {part['false_negatives']})"
        )
    lines.append(f"  {seconds * 1000:.1f} ms for all pairs (CPU time)")
    return "\n".join(lines)


def in_store(pairs: Sequence[dict[str, Any]], size: int, *, seed: int = 7) -> dict[str, Any]:
    """Which of the conflicts the rules flag the write path records when the older side sits in a store of ``size``
    generated memories plus every other pair's older side (see the module docstring); with the writes' timings."""
    from memlens.bench.generator import EPOCH
    from memlens.bench.stores import cached_store, work_copy
    from memlens.bench.timing import clock, summary_ms
    from memlens.store import MemoryStore

    flagged = [p for p in pairs if detect(p["newer"], p["older"]).conflict]
    now = EPOCH + timedelta(days=1)
    with tempfile.TemporaryDirectory(prefix="memlens-conflicts-") as tmp:
        path = work_copy(cached_store(size, seed), Path(tmp)) if size else Path(tmp) / "memory.db"
        with MemoryStore.open(path, actor="bench") as store:
            older_ids = [
                store.remember(p["older"], layer="semantic", supersede=False, now=now + timedelta(seconds=i)).id for i, p in enumerate(flagged)
            ]  # fmt: skip
            wall: list[float] = []
            cpu: list[float] = []
            found = 0
            for i, p in enumerate(flagged):
                when = now + timedelta(hours=1, seconds=i)
                memory, took = clock(lambda: store.remember(p["newer"], layer="semantic", supersede=False, now=when))  # noqa: B023
                wall.append(took.wall)
                cpu.append(took.cpu)
                row = store.conn.execute("SELECT 1 FROM conflicts WHERE newer_id = ? AND older_id = ?", (memory.id, older_ids[i])).fetchone()
                found += row is not None
            recorded = store.conn.execute("SELECT count(*) FROM conflicts").fetchone()[0]
    return {"store_size": size, "flagged_pairs": len(flagged), "found_by_the_write": found, "conflicts_recorded": recorded, "remember": summary_ms(wall, cpu)}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m memlens.bench.conflicts", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"labelled pairs, JSON lines (default {DEFAULT_DATA})")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--show-errors", action="store_true", help="list the pairs the detector got wrong")
    parser.add_argument("--in-store", type=int, metavar="SIZE", help="measure the write path instead, among SIZE generated memories (0: none)")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"memlens: no labelled pairs at {args.data}; pass --data PATH", file=sys.stderr)
        return 1
    pairs = load_pairs(args.data)
    if args.in_store is not None:
        found = in_store(pairs, args.in_store)
        if args.json:
            print(json.dumps(found, indent=2))
        else:
            r = found["remember"]
            print(
                f"conflicts found by the write path among {found['store_size']:,} generated memories and the pairs' older sides: "
                f"{found['found_by_the_write']} of the {found['flagged_pairs']} pairs the rules flag ({found['conflicts_recorded']} conflicts "
                f"recorded in all); remember p50 {r['p50_ms']:.2f} ms wall / {r['cpu_p50_ms']:.2f} ms CPU (load {os.getloadavg()[0]:.2f})"
            )
        return 0
    start = time.process_time()
    results = evaluate(pairs)
    seconds = time.process_time() - start
    data = scores(results)
    if args.json:
        print(json.dumps({**data, "cpu_seconds": round(seconds, 4)}, indent=2))
    else:
        print(report(data, seconds))
    if args.show_errors:
        for r in results:
            if r.flagged != r.expected:
                what = "missed" if r.expected else f"false alarm ({', '.join(r.signals)})"
                print(f"  #{r.id} {r.category}: {what}\n      older: {r.older}\n      newer: {r.newer}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
