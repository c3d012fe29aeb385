"""explain(): why a memory is where it is, in a sentence or two, agreeing with what the next sweep does."""

from __future__ import annotations

import json
import math
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlens import MemoryStore, NotFound
from memlens.cli import main

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def test_weak_memory_the_next_sweep_forgets(store: MemoryStore, t0):
    # An observation rate chosen so that strength is 0.08 after 41 days: 0.6 * exp(-rate * 984 h) = 0.08.
    store.configure({"decay": {"rates": {"observation": math.log(0.6 / 0.08) / (41 * 24)}}}, now=t0)
    obs = store.observe("s1", "Bash", {"command": "ls"}, "ok", now=t0)
    now = t0 + 41 * DAY
    assert store.explain(obs.id, now=now) == "Strength 0.08 after 41 days unused; below 0.1, so the next sweep forgets it."
    assert [d.memory_id for d in store.sweep(now=now, dry_run=True).decisions] == [obs.id]


def test_memory_that_will_fade(store: MemoryStore, t0):
    obs = store.observe("s1", "Bash", {"command": "ls"}, "ok", now=t0)
    fade = store.fades_at(obs.id)
    text = store.explain(obs.id, now=t0 + DAY)
    assert text == (
        "Strength 0.47 after 24 hours unused (never recalled; an observation: half-life 69 h); it falls below 0.1 on "
        f"{fade:%Y-%m-%d %H:%M} +00:00 (in 6 days) unless recalled, and the sweep then forgets it."
    )


def test_knowledge_on_its_floor(store: MemoryStore, t0):
    fact = store.remember("The VPN gateway is vpn-3", importance=0.0, now=t0)
    store.recall([fact.id], now=t0 + HOUR)
    text = store.explain(fact.id, now=t0 + 5000 * DAY)
    assert text == (
        "Strength 0.10 after 5000 days unused (recalled 1 time; a fact: half-life 43 days), at its floor of 0.1; "
        "knowledge leaves only by TTL, capacity or by hand."
    )


def test_ttl_pinned_grace_and_low_value(store: MemoryStore, t0):
    ttl = store.remember("Temporary: the demo account password rotates daily", ttl_days=2, now=t0)
    assert store.explain(ttl.id, now=t0 + DAY).endswith("Its TTL runs out on 2026-01-07 09:00 +00:00 (in 24 hours).")
    assert store.explain(ttl.id, now=t0 + 3 * DAY).startswith("Its TTL ran out on 2026-01-07 09:00 +00:00; the next sweep forgets it")
    pinned = store.remember("lol", type="chitchat", pinned=True, now=t0)
    assert store.explain(pinned.id, now=t0 + 900 * DAY) == "Pinned: strength stays at 0.75 and no sweep touches it."
    young = store.remember("Fresh knowledge about the cache layer", now=t0)
    assert store.explain(young.id, now=t0 + 20 * timedelta(minutes=1)) == (
        "Created 20 minutes ago, inside the 1-hour grace period: no sweep touches it before 2026-01-05 10:00 +00:00 (strength 0.75)."
    )
    old = store.observe("s1", "Read", {"file_path": "x.py"}, "pass", now=t0)
    store.recall([old.id], now=t0 + 180 * DAY)
    assert store.explain(old.id, now=t0 + 181 * DAY) == (
        "An observation 181 days old with importance 0.20 (at most 0.2): low value, so the next sweep forgets it."
    )


def test_superseded_and_duplicate(store: MemoryStore, t0):
    a = store.remember("Use yarn to install dependencies in this project", now=t0)
    b = store.remember("Use pnpm to install dependencies in this project", now=t0 + DAY)
    sim = store.get(b.id).supersede_similarity
    assert store.explain(a.id, now=t0 + 2 * DAY).endswith(
        f"Superseded by #{b.id} on 2026-01-06 (similarity {sim:.2f}); kept as version 1, out of search."
    )
    text = "Incident reviews are held every Thursday afternoon in the large meeting room downstairs"
    store.remember_many([{"content": text, "tags": ["meetings"]}, {"content": text, "tags": ["meetings"], "created_at": t0 + HOUR}], now=t0)
    older, newer = store.id_sequence() - 1, store.id_sequence()
    assert store.explain(older, now=t0 + 3 * HOUR).startswith(
        f"A near-duplicate of the newer #{newer} (similarity 1.00, above 0.9, sharing a tag): the next sweep marks it not latest."
    )
    store.sweep(now=t0 + 3 * HOUR)
    assert store.explain(older, now=t0 + 4 * HOUR).endswith(
        f"Marked a near-duplicate of #{newer} by the sweep on 2026-01-05 (similarity 1.00); kept as its previous version, out of search."
    )


def test_forgotten_memories_are_explained_from_the_audit_log(store: MemoryStore, t0):
    chat = store.remember("see ya", type="chitchat", now=t0)
    store.sweep(now=t0 + 3 * DAY)
    assert store.explain(chat.id, now=t0 + 4 * DAY).startswith(
        "Forgotten by the sweep on 2026-01-08 09:00 +00:00 (weak): strength 0.00 after 3 days unused"
    )
    fact = store.remember("The old office was on Main Street", now=t0)
    store.forget(fact.id, reason="moved offices", now=t0 + DAY)
    assert store.explain(fact.id, now=t0 + 2 * DAY) == "Forgotten by api on 2026-01-06 09:00 +00:00: moved offices."
    with pytest.raises(NotFound):
        store.explain(9999, now=t0)


def test_derived_memories_name_their_sources(store: MemoryStore, t0):
    a = store.remember("Build once, deploy many", now=t0)
    b = store.remember("The pipeline promotes the same artifact", now=t0)
    derived = store.remember("Artifacts are promoted, never rebuilt", origin="consolidation", now=t0)
    store.relate(derived.id, a.id, "derives", now=t0)
    store.relate(derived.id, b.id, "derives", now=t0)
    assert store.explain(derived.id, now=t0 + DAY).endswith(f"Derived by consolidation from #{a.id}, #{b.id}.")


def test_over_capacity_is_mentioned(store: MemoryStore, t0):
    a = store.remember("The canteen closes at three", importance=0.2, now=t0)
    store.remember("The parking garage opens at six", now=t0)
    store.configure({"capacity": 1}, now=t0)
    assert store.explain(a.id, now=t0 + DAY).endswith(
        "The store holds 2 latest memories, over its capacity of 1: the lowest retention scores go first (this one's is 0.36)."
    )


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=st.lists(st.sampled_from(["fact", "chitchat", "observation", "ttl", "dup", "pinned"]), min_size=1, max_size=10),
    hours=st.integers(0, 24 * 400),
)
def test_explain_agrees_with_the_next_sweep(t0, kinds, hours):
    with tempfile.TemporaryDirectory() as folder, MemoryStore.open(Path(folder) / "m.db") as store:
        ids = []
        for i, kind in enumerate(kinds):
            when = t0 + i * timedelta(minutes=20)
            if kind == "observation":
                ids.append(store.observe("s1", "Bash", {"command": f"step {i}"}, "ok", now=when).id)
            elif kind == "dup":
                store.remember_many([{"content": "the shared words about pilots tides tables and schedule", "tags": ["x"], "created_at": when}], now=when)
                ids.append(store.id_sequence())
            else:
                ids.append(
                    store.remember(
                        f"Memory number {i} of kind {kind} about item{i}", type="chitchat" if kind in ("chitchat", "pinned") else "fact",
                        ttl_days=1 if kind == "ttl" else None, pinned=kind == "pinned", supersede=False, now=when,
                    ).id
                )
        now = t0 + hours * HOUR
        acted = {d.memory_id for d in store.sweep(now=now, dry_run=True).decisions}
        for memory_id in ids:
            text = store.explain(memory_id, now=now)
            says = "the next sweep forgets it" in text or "the next sweep marks it not latest" in text
            assert says == (memory_id in acted), text


def test_cli_explain_and_strength(capsys, db_path, t0):
    with MemoryStore.open(db_path) as s:
        obs = s.observe("s1", "Bash", {"command": "ls"}, "ok", now=t0)
    db = ["--db", str(db_path)]
    when = (t0 + DAY).isoformat()
    assert main([*db, "explain", str(obs.id), "--now", when, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["id"] == obs.id and data["explanation"].startswith("Strength 0.47 after 24 hours unused")
    assert main([*db, "strength", str(obs.id), "--now", when, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["strength"] == pytest.approx(0.6 * math.exp(-0.24), abs=1e-6) and data["threshold"] == 0.1
    assert data["fades_at"].startswith("2026-01-12")
    assert main([*db, "strength", str(obs.id), "--now", when]) == 0
    assert "falls below 0.1 on 2026-01-12" in capsys.readouterr().out
    assert main([*db, "explain", "777"]) == 1
    assert "no memory #777" in capsys.readouterr().err
