"""Finding what is due fast (issue 14, point 3) without changing a single decision: the planner reads only what
deciding needs, and works out each decision's numbers and sentence when they are read. The decisions (ids, rules,
numbers, the reason recorded in the audit log, titles) are compared with a straightforward reference: the rules'
code as it was before, kept here, run over every row of a generated store."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlens import MemoryStore, decay
from memlens import sweep as sweep_engine
from memlens.bench.generator import EPOCH, Generator
from memlens.config import StoreSettings
from memlens.models import utc_from_ts
from memlens.rules import ttl, weak
from memlens.rules.base import article, duration
from memlens.text import comparable

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
KINDS = (("working", "observation"), ("working", "chitchat"), ("semantic", "fact"), ("procedural", "workflow"), ("episodic", "summary"))
ROW_RULES = ("ttl", "weak", "low_value")


def _generated_store(path: Path, count: int = 1500, seed: int = 3) -> MemoryStore:
    """A generated store (the benchmark's texts and creation times over the year before EPOCH) with every kind of
    memory the row rules look at: TTLs, faded observations and chitchat, old unimportant observations; some pinned,
    some recalled, some tagged, a few written within the grace period."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    for m in Generator(seed).memories(count):
        layer, type_ = KINDS[rng.randrange(len(KINDS))]
        created = m.created_at if rng.random() < 0.97 else EPOCH + timedelta(days=rng.uniform(0, 120))
        record: dict[str, Any] = {
            "content": m.content, "layer": layer, "type": type_, "project": m.project, "created_at": created,
            "importance": round(rng.random(), 3), "pinned": rng.random() < 0.03,
            "tags": ["ops"] if rng.random() < 0.1 else [],
        }  # fmt: skip
        if rng.random() < 0.3:
            record["ttl_days"] = (EPOCH - created) / DAY + rng.uniform(-5, 90)
            if record["ttl_days"] <= 0:
                record["ttl_days"] = rng.uniform(0.5, 3)
        records.append(record)
    store = MemoryStore.open(path)
    store.remember_many(records, now=EPOCH)
    ids = [r[0] for r in store.conn.execute("SELECT id FROM memories ORDER BY id")]
    store.recall(rng.sample(ids, len(ids) // 20), now=EPOCH)
    store.configure({"duplicate_threshold": 1.0}, now=EPOCH)  # no near-duplicate decisions: they are not row rules
    return store


# --- the reference: the three row rules as they were before the fast planner ------------------------------------------


def _reference(store: MemoryStore, now: datetime) -> list[tuple[int, str, str, dict[str, float], str, str]]:
    """``(id, rule, action, numbers, reason, title)`` of every row-rule decision at ``now``, in plan order, decided
    and worded by the code the rules had before reasons became lazy, over every row of the store."""
    settings: StoreSettings = store.settings
    cfg = settings.decay
    now_ts = now.timestamp()
    cutoff = now_ts - settings.grace_hours * 3600.0
    rows = store.conn.execute(
        "SELECT id, title, layer, type, importance, created_at, last_accessed_at, access_count, forget_after, pinned, fade_at FROM memories"
    ).fetchall()
    rows = [r for r in rows if not r[9] and r[5] <= cutoff]
    out: list[tuple[int, str, str, dict[str, float], str, str]] = []
    taken: set[int] = set()

    def add(memory_id: int, rule: str, numbers: dict[str, float], reason: str, title: str) -> None:
        if memory_id not in taken:
            taken.add(memory_id)
            out.append((memory_id, rule, "forget", numbers, reason, title))

    for r in sorted((r for r in rows if r[8] is not None and r[8] <= now_ts), key=lambda r: (r[8], r[0])):
        past = (now_ts - r[8]) / 3600.0
        when = utc_from_ts(r[8])
        assert when is not None
        reason = f"its TTL ran out on {when:%Y-%m-%d %H:%M} UTC ({duration(past, hour_decimals=1)} ago), so the sweep forgets it"
        add(r[0], "ttl", {"forget_after": r[8], "hours_past": round(past, 4)}, reason, r[1])
    for r in sorted((r for r in rows if r[10] is not None and r[10] <= now_ts), key=lambda r: (r[10], r[0])):
        if not decay.forgettable_by_strength(r[2], r[3]):
            continue
        value = decay.strength_at(
            layer=r[2], type_=r[3], importance=r[4], last_accessed=r[6], access_count=r[7], pinned=False, now=now_ts, config=cfg
        )
        if value >= cfg.forget_threshold:
            continue
        hours = (now_ts - r[6]) / 3600.0
        rate = decay.effective_rate(r[3], r[7], cfg)
        shown, limit = comparable(value, cfg.forget_threshold)
        numbers = {
            "strength": round(value, 6), "threshold": cfg.forget_threshold, "hours_unused": round(hours, 4),
            "rate_per_hour": round(rate, 8), "access_count": float(r[7]), "importance": r[4],
        }  # fmt: skip
        reason = (
            f"strength {shown} after {duration(hours, hour_decimals=1)} unused ({article(r[3])}: {decay.half_life_text(rate)}); "
            f"below {limit}, so the sweep forgets it"
        )
        add(r[0], "weak", numbers, reason, r[1])
    age_limit = now_ts - settings.low_value_days * 86400.0
    for r in sorted((r for r in rows if r[2] == "working" and r[5] <= age_limit and r[4] <= settings.low_value_importance), key=lambda r: (r[5], r[0])):
        days = (now_ts - r[5]) / 86400.0
        numbers = {"age_days": round(days, 4), "importance": r[4], "max_age_days": settings.low_value_days, "max_importance": settings.low_value_importance}
        reason = (
            f"an observation {days:.0f} days old (over {settings.low_value_days:g}) with importance "
            f"{r[4]:.2f} (at most {settings.low_value_importance:g}): low value, so the sweep forgets it"
        )
        add(r[0], "low_value", numbers, reason, r[1])
    return out


def _as_tuples(decisions: list[sweep_engine.SweepDecision]) -> list[tuple[int, str, str, dict[str, float], str, str]]:
    return [(d.memory_id, d.rule, d.action, d.numbers, d.reason, d.title) for d in decisions]


#: Store settings to compare under, and the rules that must have decisions 30 days on and later under them.
VARIANTS: dict[str, tuple[dict[str, Any], set[str]]] = {
    "defaults": ({}, {"ttl", "weak"}),
    # Observations that hardly fade: the old, unimportant ones are the low-value rule's.
    "slow fading": ({"decay": {"rates": {"observation": 1e-6, "chitchat": 1e-6}}, "low_value_days": 30, "low_value_importance": 0.5}, {"ttl", "low_value"}),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def generated(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    changes, rules_seen = VARIANTS[request.param]
    store = _generated_store(tmp_path_factory.mktemp("generated") / "memory.db")
    if changes:
        store.configure(changes, now=EPOCH)
    yield store, rules_seen
    store.close()


@pytest.mark.parametrize("days", [-30, 1, 7, 30, 61, 120])
def test_the_plan_is_the_reference_decision_for_decision(generated: tuple[MemoryStore, set[str]], days: int):
    store, rules_seen = generated
    now = EPOCH + days * DAY + 7 * HOUR
    report = store.sweep(now=now, dry_run=True)
    assert {d.rule for d in report.decisions} <= set(ROW_RULES)
    expected = _reference(store, now)
    assert _as_tuples(report.decisions) == expected
    if days >= 30:
        assert rules_seen <= {rule for _, rule, *_ in expected}
    assert [d.to_dict() for d in report.decisions] == [
        {"memory_id": i, "rule": rule, "action": action, "numbers": numbers, "reason": reason, "title": title}
        for i, rule, action, numbers, reason, title in expected
    ]


def test_a_real_sweep_records_the_reference_reasons(tmp_path: Path):
    with _generated_store(tmp_path / "memory.db", count=400, seed=11) as store:
        now = EPOCH + 61 * DAY
        expected = _reference(store, now)
        assert len(expected) > 50
        report = store.sweep(now=now)
        assert _as_tuples(report.decisions) == expected
        recorded = {}
        for entry in store.audit(operation="sweep", limit=10_000):
            (memory_id,) = entry.target_ids
            recorded[memory_id] = (entry.details["rule"], entry.details["numbers"], entry.details["reason"])
        assert recorded == {i: (rule, numbers, reason) for i, rule, _, numbers, reason, _ in expected}
        assert store.verify_audit().ok


def test_reasons_and_numbers_are_worked_out_only_when_read(store: MemoryStore, t0, monkeypatch: pytest.MonkeyPatch):
    worked_out: list[int] = []
    for cls in (ttl._Expired, weak._Faded):
        real = cls.work_out
        monkeypatch.setattr(cls, "work_out", lambda self, real=real: worked_out.append(self.memory_id) or real(self))
    ids = [store.remember(f"Deploy window number {n} is open", ttl_days=1, now=t0).id for n in range(5)]
    chat = store.remember("brb, coffee", type="chitchat", importance=0.0, now=t0)
    report = store.sweep(now=t0 + 3 * DAY, dry_run=True)
    assert [d.rule for d in report.decisions] == ["ttl"] * 5 + ["weak"]
    assert worked_out == []  # planned, nothing worded
    assert report.decisions[0].reason.startswith("its TTL ran out") and worked_out == [ids[0]]
    assert report.decisions[0].reason.startswith("its TTL ran out") and worked_out == [ids[0]]  # once
    assert report.decisions[-1].numbers["threshold"] == store.settings.decay.forget_threshold and worked_out == [ids[0], chat.id]


@pytest.mark.sqlite_only  # counts SQLite statements (set_trace_callback)
def test_the_planner_reads_no_tags_unless_a_rule_asks(store: MemoryStore, t0):
    for n in range(20):
        store.remember(f"Build cache key {n} expires", ttl_days=1, tags=["ci"], now=t0)
        store.remember(f"small talk number {n}", type="chitchat", importance=0.0, tags=["chat"], now=t0)
    store.sweep(now=t0 + 2 * HOUR)  # nothing due yet; the near-duplicate rule compares the new memories (by their tags)
    seen: list[str] = []
    store.conn.set_trace_callback(seen.append)
    try:
        report = store.sweep(now=t0 + 3 * DAY, dry_run=True)
    finally:
        store.conn.set_trace_callback(None)
    assert report.counts["ttl"] == 20 and report.counts["weak"] == 20
    assert not [sql for sql in seen if "FROM memory_tags WHERE memory_id IN" in sql]
    # A rule that reads a row's tags gets them (loaded for all the rows read together).
    row = sweep_engine.StoreView(store.conn).memories(expired_by=(t0 + 3 * DAY).timestamp(), created_by=t0.timestamp())[0]
    assert row.tags == frozenset({"ci"})


def test_capacity_takes_a_chain_of_near_duplicates_this_sweep_links_whole(store: MemoryStore, t0):
    # Found by the hypothesis test of dry run against real run (tests/test_sweep.py): three copies where the newest
    # absorbs the middle one, which absorbs the oldest; capacity then forgets the newest with its chain, and the
    # oldest used to come back as latest (a second sweep at the same time found it over capacity again).
    kinds = ["fact"] * 5 + ["observation", "dup", "dup", "dup", "chitchat", "fact", "fact"]
    for i, kind in enumerate(kinds):
        when = t0 + HOUR if i == 7 else t0
        if kind == "observation":
            store.observe("s0", "Bash", {"command": f"cmd {i}"}, "ok", importance=1.0, now=when)
        elif kind == "dup":
            store.remember_many([{"content": "Memory x says alpha beta gamma delta epsilon", "tags": ["shared"], "created_at": when}], now=when)
        else:
            store.remember(f"Memory {i} says unique words {i} {kind}", type=kind, importance=1.0 if i in (9, 11) else 0.0, now=when)
    store.configure({"capacity": 3}, now=t0)
    now = t0 + 2 * HOUR
    plan = store.sweep(now=now, dry_run=True)
    assert [(d.rule, d.action) for d in plan.decisions] == [("duplicate", "mark_not_latest"), ("duplicate", "mark_not_latest"), ("capacity", "forget")]
    report = store.sweep(now=now)
    assert [d.to_dict() for d in report.decisions] == [d.to_dict() for d in plan.decisions]
    assert store.sweep(now=now, dry_run=True).decisions == []
    chains = store.conn.execute("SELECT chain_id, SUM(is_latest) FROM memories GROUP BY chain_id").fetchall()
    assert all(latest == 1 for _, latest in chains)


def _plans_of(store: MemoryStore, read: Any) -> list[str]:
    """The query plan of every statement ``read()`` runs on the store's connection (details joined per statement)."""
    seen: list[str] = []
    store.conn.set_trace_callback(seen.append)
    try:
        read()
    finally:
        store.conn.set_trace_callback(None)
    return [" | ".join(row[3] for row in store.conn.execute(f"EXPLAIN QUERY PLAN {sql}")) for sql in seen if sql.lstrip().upper().startswith("SELECT")]


@pytest.mark.sqlite_only  # SQLite's query plan
def test_what_is_due_by_ttl_is_read_from_the_covering_ttl_index_alone(store: MemoryStore, t0):
    # Schema 10: id, title and TTL come from memories_by_ttl in the order asked for (no table rows read, no sort;
    # 19.5 -> 5.7 ms CPU at a million memories, python -m memlens.bench.sweep_bench).
    for n in range(30):
        store.remember(f"Deploy window number {n} is open", ttl_days=1 + n % 3, pinned=n % 7 == 0, now=t0 + n * HOUR)
    now = t0 + 5 * DAY
    view = sweep_engine.StoreView(store.conn)
    (plan,) = _plans_of(store, lambda: view.expired(now.timestamp(), (now - DAY).timestamp()))
    assert plan.startswith("SEARCH memories USING COVERING INDEX memories_by_ttl") and "TEMP B-TREE" not in plan, plan
    assert len(view.expired(now.timestamp(), (now - DAY).timestamp())) == 30 - 5  # the pinned ones stay
    # The other readers of memories by TTL still go through it: the whole rows a rule may ask for, and the filter.
    (rows_plan,) = _plans_of(store, lambda: view.memories(expired_by=now.timestamp(), created_by=now.timestamp()))
    assert "USING INDEX memories_by_ttl" in rows_plan and "TEMP B-TREE" not in rows_plan, rows_plan
    plans = _plans_of(store, lambda: store.list_memories(expiring_before=now, include_expired=True, now=t0))
    assert any("memories_by_ttl" in p for p in plans), plans


@pytest.mark.parametrize("source", ["in-memory index", "FTS5 index", "FTS5 index, cap 2"])
def test_similar_to_finds_every_memory_a_scan_finds_above_the_threshold(store: MemoryStore, monkeypatch: pytest.MonkeyPatch, source: str):
    """The duplicate check's candidates hold every latest memory a full scan puts above the threshold: from the
    store's in-memory supersede index (kept up to date by the writes, as a sweep uses it) or, without one, from the
    FTS5 index with capped counts; with a cap of 2 nearly every token ties and the tie-break by text decides."""
    from memlens.text import jaccard, similarity_tokens

    shared = source == "in-memory index"
    if source.endswith("cap 2"):
        monkeypatch.setattr(sweep_engine, "SIMILAR_TO_COUNT_CAP", 2)

    rng = random.Random(17)
    texts = [m.content for m in Generator(5).memories(600)]
    # Band edits of stored texts (a few words dropped): similarities from about 0.5 to 1, where thresholds bite.
    texts += [" ".join(w for w in text.split() if rng.random() > 0.15) for text in rng.sample(texts, 100)]
    # Sets drawn from a few words: many pairs overlap by just the least a threshold lets pass, the case a probe
    # one token short would miss.
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]
    texts += [" ".join(rng.sample(words, rng.randint(4, 9))) for _ in range(250)]
    store.remember_many([{"content": t} for t in texts], now=EPOCH)
    latest = {mid: similarity_tokens(content) for mid, content in store.conn.execute("SELECT id, content FROM memories WHERE is_latest = 1")}
    if shared:
        store.search("warm the store's index", now=EPOCH)
        store.ctx.prepare_postings()
        store.remember_many([{"content": t} for t in texts[::7]], now=EPOCH)  # caught up through the change log
        latest = {mid: similarity_tokens(content) for mid, content in store.conn.execute("SELECT id, content FROM memories WHERE is_latest = 1")}
    view = sweep_engine.StoreView(store.conn, store.ctx.postings if shared else None)
    assert store.ctx.postings.built == shared
    checked = 0
    for subject_id in rng.sample(sorted(latest), 80):
        tokens = latest[subject_id]
        for threshold in (0.5, 0.7, 0.9):
            scan = {mid for mid, other in latest.items() if mid != subject_id and other and jaccard(tokens, other) > threshold}
            assert scan <= view.similar_to(tokens, threshold), (subject_id, threshold)
            checked += len(scan)
    assert checked > 50  # the probes did reach similar memories
