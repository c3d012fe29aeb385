"""``python -m memlens.eval.consolidation``: precision and recall of the deterministic consolidation on labelled sessions.

The fixture (``tests/data/consolidation_sessions.json`` by default) holds groups of sessions, one project each: coding
agent sessions with passing and failing commands, conversations with stated preferences among chit-chat, speaker
turns stored as bare observations, decisions among requests. Each group lists the memories that should come out
(``expected``: layer, type and words the memory must all contain) and patterns that must not (``forbidden``).

Every group is written into a fresh temporary store the way hooks write (prompts, tool calls, chat turns), its
sessions ended, and consolidated once with the deterministic method. A created fact, workflow, lesson or bug is
correct when it matches an expected item and no forbidden pattern. Precision is correct / created; recall is expected
items matched / expected items. Episodes are not scored: every finished session gets one by design.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memlens.consolidate import run
from memlens.models import Memory
from memlens.store import MemoryStore

#: The fixture that ships with the tests (the source tree's ``tests/data``).
DEFAULT_FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "data" / "consolidation_sessions.json"
#: When the first session of each group starts; sessions follow a day apart, events a minute apart.
START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


@dataclass
class GroupResult:
    """What consolidation created for one group, and how each memory was judged."""

    project: str
    kind: str
    sessions: int
    correct: list[Memory] = field(default_factory=list)
    wrong: list[tuple[Memory, str]] = field(default_factory=list)  # (memory, why it is wrong)
    missed: list[Mapping[str, Any]] = field(default_factory=list)
    expected: int = 0


@dataclass
class Evaluation:
    """Precision and recall over every group."""

    groups: list[GroupResult]

    @property
    def created(self) -> int:
        """Memories created (facts, workflows, lessons, bugs; episodes excluded)."""
        return sum(len(g.correct) + len(g.wrong) for g in self.groups)

    @property
    def precision(self) -> float:
        """Correct / created (1.0 when nothing was created)."""
        return sum(len(g.correct) for g in self.groups) / self.created if self.created else 1.0

    @property
    def recall(self) -> float:
        """Expected items found / expected items."""
        expected = sum(g.expected for g in self.groups)
        return (expected - sum(len(g.missed) for g in self.groups)) / expected if expected else 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with every wrong and missed item named."""
        return {
            "sessions": sum(g.sessions for g in self.groups),
            "created": self.created,
            "correct": sum(len(g.correct) for g in self.groups),
            "expected": sum(g.expected for g in self.groups),
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "groups": [
                {
                    "project": g.project,
                    "kind": g.kind,
                    "sessions": g.sessions,
                    "correct": [_describe(m) for m in g.correct],
                    "wrong": [{**_describe(m), "why": why} for m, why in g.wrong],
                    "missed": [dict(item) for item in g.missed],
                }
                for g in self.groups
            ],
        }


def evaluate(fixture: Path = DEFAULT_FIXTURE) -> Evaluation:
    """Consolidate every group of ``fixture`` in a fresh store and score what was created."""
    data = json.loads(Path(fixture).read_text(encoding="utf-8"))
    results = []
    with tempfile.TemporaryDirectory(prefix="memlens-consolidation-eval-") as folder:
        for index, group in enumerate(data["groups"]):
            results.append(_evaluate_group(Path(folder) / f"group{index}.db", group))
    return Evaluation(results)


def _evaluate_group(path: Path, group: Mapping[str, Any]) -> GroupResult:
    project = str(group["project"])
    with MemoryStore.open(path, actor="eval") as store:
        when = START
        for number, session in enumerate(group["sessions"]):
            when = START + timedelta(days=number)
            for event in session["events"]:
                _write_event(store, str(session["id"]), project, event, when)
                when += timedelta(minutes=1)
            store.end_session(str(session["id"]), now=when)
        report = run(store, now=when + timedelta(days=1), llm=None, from_env=False)
        created = store.get_many(report.created)
    result = GroupResult(project, str(group.get("kind", "")), len(group["sessions"]), expected=len(group["expected"]))
    found: set[int] = set()
    for memory in created:
        forbidden = next((f for f in group.get("forbidden", []) if _matches(memory, f)), None)
        hit = next((i for i, e in enumerate(group["expected"]) if _matches(memory, e)), None)
        if forbidden is not None:
            result.wrong.append((memory, f"matches forbidden {json.dumps(forbidden, ensure_ascii=False)}"))
        elif hit is None:
            result.wrong.append((memory, "matches no expected memory"))
        else:
            result.correct.append(memory)
            found.add(hit)
    result.missed = [e for i, e in enumerate(group["expected"]) if i not in found]
    return result


def _write_event(store: MemoryStore, session_id: str, project: str, event: Mapping[str, Any], when: datetime) -> None:
    if "prompt" in event:
        store.observe(session_id, "prompt", event["prompt"], None, event="prompt", project=project, now=when)
    elif "tool" in event:
        output: Any = event.get("output", "")
        if "exit_code" in event:
            output = {"stdout": output, "exit_code": event["exit_code"]}
        store.observe(session_id, event["tool"], event.get("input", {}), output, project=project, now=when)
    else:
        # A chat turn or note without tool metadata, as importers and other agents write them.
        store.remember(
            event["message"], type=event.get("type", "message"), layer="working", project=project, session_id=session_id,
            supersede=False, now=when,
        )  # fmt: skip


def _matches(memory: Memory, pattern: Mapping[str, Any]) -> bool:
    if "layer" in pattern and memory.layer != pattern["layer"]:
        return False
    if "type" in pattern and memory.type != pattern["type"]:
        return False
    text = f"{memory.title}\n{memory.content}".lower()
    if "all" in pattern and not all(word.lower() in text for word in pattern["all"]):
        return False
    return "any" not in pattern or any(word.lower() in text for word in pattern["any"])


def _describe(memory: Memory) -> dict[str, Any]:
    return {"layer": memory.layer, "type": memory.type, "title": memory.title, "importance": memory.importance}


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: print precision and recall (and every wrong or missed item); returns 0."""
    parser = argparse.ArgumentParser(prog="python -m memlens.eval.consolidation", description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE, help="labelled sessions (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    args = parser.parse_args(argv)
    evaluation = evaluate(args.fixture)
    if args.json:
        print(json.dumps(evaluation.to_dict(), indent=2, ensure_ascii=False))
        return 0
    data = evaluation.to_dict()
    print(
        f"{data['sessions']} sessions in {len(evaluation.groups)} groups: {data['created']} memories created, "
        f"{data['correct']} correct; precision {evaluation.precision:.3f}, recall {evaluation.recall:.3f} "
        f"({data['expected'] - sum(len(g.missed) for g in evaluation.groups)}/{data['expected']} expected found)"
    )
    for group in evaluation.groups:
        print(f"  {group.project}: {len(group.correct)} correct, {len(group.wrong)} wrong, {len(group.missed)} missed")
        for memory, why in group.wrong:
            print(f"    wrong  {memory.layer}/{memory.type} {memory.title!r}: {why}")
        for item in group.missed:
            print(f"    missed {json.dumps(dict(item), ensure_ascii=False)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
