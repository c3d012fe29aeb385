"""The demo generator: deterministic, written through the public API, and showing every part of the lifecycle."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memlens import MemoryStore
from memlens.cli import main as cli
from memlens.demo import generate
from memlens.errors import InvalidInput

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


def _snapshot(store: MemoryStore) -> list[tuple]:
    return [
        (m.id, m.layer, m.type, m.title, m.content, m.version, m.parent_id, m.is_latest, m.access_count, m.pinned, m.forget_after)
        for m in store.iter_memories()
    ]


def test_same_seed_and_time_give_the_same_store(tmp_path: Path):
    with MemoryStore.open(tmp_path / "a.db") as a, MemoryStore.open(tmp_path / "b.db") as b:
        generate(a, now=NOW, days=10, seed=5)
        generate(b, now=NOW, days=10, seed=5)
        assert _snapshot(a) == _snapshot(b)
        assert [(e.operation, e.as_of, e.target_ids) for e in a.audit(limit=5000)] == [(e.operation, e.as_of, e.target_ids) for e in b.audit(limit=5000)]
    with MemoryStore.open(tmp_path / "c.db") as c, MemoryStore.open(tmp_path / "a.db") as a:
        generate(c, now=NOW, days=10, seed=6)
        assert _snapshot(c) != _snapshot(a)


def test_demo_covers_the_whole_lifecycle(tmp_path: Path):
    with MemoryStore.open(tmp_path / "d.db", actor="demo") as store:
        summary = generate(store, now=NOW)
        counts = store.layer_counts(now=NOW)
        assert all(n > 0 for n in counts.values()), counts
        semantic = store.list_memories(layers=["semantic"], latest_only=False, include_expired=True, limit=1000, now=NOW)
        chains = [m for m in semantic if m.version >= 3 and m.is_latest]
        assert chains and all(m.supersede_similarity and m.supersede_similarity > store.settings.supersede_threshold for m in chains)
        assert any(r.kind == "related" for m in semantic for r in store.relations(m.id))  # an advisory "similar to" pair
        assert store.count_memories(expiring_before=NOW, include_expired=True, now=NOW) >= 1  # a TTL that ran out
        assert store.list_memories(expiring_before=NOW.replace(day=9), now=NOW)  # and ones about to
        assert store.count_memories(pinned=True, now=NOW) >= 1
        assert any(store.access_times(m.id) for m in semantic if store.exists(m.id))
        operations = set(store.audit_operations())
        assert {"remember", "supersede", "recall", "update", "forget", "consolidate"} <= operations
        assert any(e.details.get("reason") for e in store.audit(operation="forget", limit=50))
        dry = store.sweep(now=NOW, dry_run=True)
        assert {d.rule for d in dry.decisions} >= {"weak", "ttl"}  # decayed and expired memories are waiting
        assert store.verify_audit().ok
    assert summary.sessions > 10 and summary.consolidations >= 2 and summary.sweeps >= 2 and summary.swept > 0


def test_bad_arguments_are_refused(tmp_path: Path):
    with MemoryStore.open(tmp_path / "e.db") as store:
        with pytest.raises(InvalidInput):
            generate(store, now=datetime(2026, 1, 1), days=10)
        with pytest.raises(InvalidInput):
            generate(store, now=NOW, days=1)
        assert store.count_memories(latest_only=False, include_expired=True, now=NOW) == 0


def test_demo_command(tmp_path: Path, capsys):
    db = tmp_path / "cli.db"
    assert cli(["--db", str(db), "demo", "--days", "7", "--now", NOW.isoformat(), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["days"] == 7 and sum(data["layer_counts"].values()) > 0
    assert cli(["--db", str(db), "demo", "--days", "7"]) == 2
    assert "already holds" in capsys.readouterr().err
    assert cli(["--db", str(db), "demo", "--days", "7", "--force", "--now", NOW.isoformat()]) == 0


def test_the_demo_has_conflicts_to_settle(tmp_path) -> None:
    # The Conflicts view was empty on the demo store (issue 13 walk-through).
    from datetime import datetime, timezone

    from memlens.demo import generate
    from memlens.store import MemoryStore

    with MemoryStore.open(tmp_path / "demo.db") as store:
        generate(store, now=datetime(2026, 5, 1, 12, tzinfo=timezone.utc))
        found = store.conflicts.find()
    assert len(found) == 2
    assert {(c.newer.origin, c.older.origin, c.evidence.signals) for c in found} == {("user", "agent", ("value",))}
