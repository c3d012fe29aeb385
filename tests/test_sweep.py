"""The auto-forget sweep: every rule with its audit reason and numbers, dry run equal to the real run, grace period,
pinning, capacity archiving, index use, and the CLI."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlens import InvalidInput, MemoryStore
from memlens import sweep as sweep_engine
from memlens.cli import main
from memlens.decay import composite_score
from memlens.rules import BUILT_IN_NAMES as RULES
from memlens.sweep import ARCHIVE_MIN_CHARS

WORDS = ["apple", "bridge", "candle", "dragon", "engine", "forest", "guitar", "harbor", "island", "jungle", "kettle", "lantern"]
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


def sweep_entries(store: MemoryStore) -> dict[int, dict]:
    """memory id -> details of the per-memory sweep audit entry about it."""
    out = {}
    for entry in store.audit(operation="sweep", limit=1000):
        action = entry.details.get("action")
        if action in ("forget", "archive"):
            out.update((t, entry.details) for t in entry.target_ids)
        elif action == "mark_not_latest":
            newer = int(entry.details["numbers"]["newer_id"])
            [older] = [t for t in entry.target_ids if t != newer]
            out[older] = entry.details
    return out


def test_ttl_rule_forgets_expired_memories_with_reason_and_numbers(store: MemoryStore, t0):
    m = store.remember("The release freeze lasts until Friday", ttl_days=2, now=t0)
    keep = store.remember("The office wifi is called guest-net", ttl_days=10, now=t0)
    now = t0 + 3 * DAY
    report = store.sweep(now=now)
    assert [(d.memory_id, d.rule, d.action) for d in report.decisions] == [(m.id, "ttl", "forget")]
    d = report.decisions[0]
    assert d.numbers["forget_after"] == (t0 + 2 * DAY).timestamp() and d.numbers["hours_past"] == 24.0
    assert "TTL ran out on 2026-01-07 09:00 UTC" in d.reason and d.title == m.title
    assert not store.exists(m.id) and store.exists(keep.id)
    entry = sweep_entries(store)[m.id]
    assert entry["rule"] == "ttl" and entry["numbers"] == d.numbers and entry["reason"] == d.reason
    assert report.counts == {"conflict": 0, "ttl": 1, "weak": 0, "low_value": 0, "duplicate": 0, "capacity": 0}


def test_weak_rule_forgets_only_working_observations_and_chitchat(store: MemoryStore, t0):
    obs = store.observe("s1", "Bash", {"command": "ls"}, "README.md", now=t0)  # importance 0.2: s0 0.6, 0.01/h
    chat = store.remember("Good morning, how was your weekend?", type="chitchat", now=t0)
    fact = store.remember("The invoice service is written in Go", importance=0.0, now=t0)
    pref = store.remember("Prefers tabs over spaces in Makefiles", type="preference", importance=0.0, now=t0)
    flow = store.remember("To release: bump version, tag, push", type="workflow", importance=0.0, now=t0)
    episode = store.remember("Session s9: fixed the login bug", type="summary", importance=0.0, now=t0)
    now = t0 + 400 * DAY
    report = store.sweep(now=now)
    weak = {d.memory_id: d for d in report.by_rule("weak")}
    assert set(weak) == {obs.id, chat.id}
    d = weak[obs.id]
    assert d.numbers["threshold"] == 0.1 and d.numbers["strength"] < 0.1 and d.numbers["hours_unused"] == 9600.0
    assert d.numbers["rate_per_hour"] == 0.01 and d.numbers["access_count"] == 0
    assert d.reason.startswith("strength 0.00 after 400 days unused (an observation: half-life 69 h); below 0.1")
    for kept in (fact, pref, flow, episode):
        assert store.exists(kept.id)
    # Knowledge sits on its floor, never below the threshold by time alone.
    assert store.strength(fact.id, now=now) == pytest.approx(0.1)
    assert sweep_entries(store)[chat.id]["rule"] == "weak"


def test_weak_rule_waits_for_the_threshold(store: MemoryStore, t0):
    obs = store.observe("s1", "Bash", {"command": "ls"}, "ok", now=t0)
    fade = store.fades_at(obs.id)
    assert fade is not None
    assert store.sweep(now=fade - timedelta(seconds=1), dry_run=True).decisions == []
    assert [d.memory_id for d in store.sweep(now=fade + timedelta(seconds=1), dry_run=True).decisions] == [obs.id]


def test_low_value_rule_forgets_old_unimportant_observations(store: MemoryStore, t0):
    old = store.observe("s1", "Read", {"file_path": "a.py"}, "x = 1", now=t0)
    important = store.observe("s1", "Read", {"file_path": "b.py"}, "y = 2", importance=0.3, now=t0)
    young = store.observe("s2", "Read", {"file_path": "c.py"}, "z = 3", now=t0 + 10 * DAY)
    # Recalled two days before the sweep, so none of them is weak: only age and importance can take them.
    store.recall([old.id, important.id, young.id], now=t0 + 179 * DAY)
    report = store.sweep(now=t0 + 181 * DAY)
    assert [(d.memory_id, d.rule) for d in report.decisions] == [(old.id, "low_value")]
    d = report.decisions[0]
    assert d.numbers == {"age_days": 181.0, "importance": 0.2, "max_age_days": 180.0, "max_importance": 0.2}
    assert "181 days old" in d.reason and "importance 0.20" in d.reason
    assert store.exists(important.id) and store.exists(young.id)
    assert sweep_entries(store)[old.id]["rule"] == "low_value"


def _import(store: MemoryStore, records: list[dict], when: datetime) -> list[int]:
    before = store.id_sequence()
    store.remember_many([{**r, "created_at": r.get("created_at", when)} for r in records], now=when)
    return list(range(before + 1, store.id_sequence() + 1))


def test_near_duplicates_sharing_a_tag_hide_the_older_one(store: MemoryStore, t0):
    text = "The staging database listens on port 5433 behind the bastion host in the Frankfurt region for all services"
    older, newer = _import(
        store,
        [
            {"content": text, "tags": ["db", "staging"], "created_at": t0},
            {"content": text + " now", "tags": ["db"], "created_at": t0 + HOUR},
        ],
        t0,
    )
    report = store.sweep(now=t0 + 3 * HOUR)
    assert [(d.memory_id, d.rule, d.action) for d in report.decisions] == [(older, "duplicate", "mark_not_latest")]
    d = report.decisions[0]
    assert d.numbers["newer_id"] == newer and d.numbers["threshold"] == 0.9 and 0.9 < d.numbers["similarity"] < 1.0
    assert f"near-duplicate of the newer #{newer}" in d.reason
    old = store.get(older)  # kept, not deleted
    assert not old.is_latest and store.get(newer).is_latest
    assert [h.memory.id for h in store.search("staging database port", now=t0 + 3 * HOUR)] == [newer]
    assert any(r.kind == "supersedes" and r.src_id == newer and r.dst_id == older for r in store.relations(older))
    entries = [e for e in store.audit(operation="sweep") if e.details.get("rule") == "duplicate"]
    assert len(entries) == 1 and set(entries[0].target_ids) == {older, newer} and entries[0].details["numbers"] == d.numbers
    assert store.sweep(now=t0 + 4 * HOUR).decisions == []  # done once
    # The newer memory took the older one's place in its chain: one chain, exactly one latest version.
    assert [m.id for m in store.history(newer)] == [older, newer]
    moved = store.get(newer)
    assert (moved.version, moved.parent_id, moved.chain_id, moved.supersedes) == (2, older, older, (older,))


def test_a_newer_duplicate_with_a_history_of_its_own_does_not_hide_the_older(store: MemoryStore, t0):
    text = "The staging database listens on port 5433 behind the bastion host in the Frankfurt region for all services"
    first = store.remember(text, tags=["db"], now=t0)
    second = store.remember(text + " now", tags=["db"], now=t0 + HOUR)
    assert second.parent_id == first.id
    # A bulk load (no supersede check) adds an older near-duplicate of the chain's latest version.
    (older,) = _import(store, [{"content": text, "tags": ["db"], "created_at": t0 - HOUR}], t0)
    report = store.sweep(now=t0 + 3 * HOUR)
    assert [d for d in report.decisions if d.rule == "duplicate"] == []
    assert store.get(older).is_latest
    rows = store.conn.execute("SELECT chain_id, SUM(is_latest) FROM memories GROUP BY chain_id").fetchall()
    assert all(n == 1 for _, n in rows)


def test_near_duplicates_need_a_shared_tag_same_layer_compatible_project_and_high_similarity(store: MemoryStore, t0):
    text = "Deployments to production happen only on Tuesday mornings after the standup"
    _import(
        store,
        [
            {"content": text, "tags": ["deploy"]},
            {"content": text, "tags": ["other"]},  # no shared tag with the first
            {"content": text, "tags": ["ops"], "project": "api"},
            {"content": text, "tags": ["ops"], "project": "web"},  # different project from the one before
            {"content": text, "tags": ["log"], "layer": "episodic", "type": "summary"},
            {"content": text, "tags": ["log"], "layer": "working", "type": "observation"},  # different layer
            {"content": "Deployments to production happen on Thursday evenings", "tags": ["deploy"]},  # below 0.9
        ],
        t0,
    )
    assert store.sweep(now=t0 + 2 * HOUR, dry_run=True).by_rule("duplicate") == []


def test_near_duplicate_check_runs_again_when_tags_change(store: MemoryStore, t0):
    text = "Customer exports are generated nightly at two in the morning"
    a, b = _import(store, [{"content": text, "tags": ["exports"]}, {"content": text, "tags": ["batch"]}], t0)
    assert store.sweep(now=t0 + 2 * HOUR).decisions == []
    store.update(b, tags=["batch", "exports"], now=t0 + 3 * HOUR)
    report = store.sweep(now=t0 + 4 * HOUR)
    assert [(d.memory_id, d.rule) for d in report.decisions] == [(a, "duplicate")]


def test_capacity_forgets_the_lowest_scores_and_archives_long_ones(store: MemoryStore, t0):
    long_text = "Notes from the architecture review: " + " ".join(f"point{i} about the queue design" for i in range(40))
    assert len(long_text) > ARCHIVE_MIN_CHARS
    ids = []
    for i in range(8):
        m = store.remember(f"The {WORDS[i]} subsystem has its own {WORDS[i + 1]}s", importance=i / 10, project="web", tags=[f"t{i}"], now=t0)
        ids.append(m.id)
    long_low = store.remember(long_text, importance=0.0, project="web", tags=["review"], now=t0)
    pinned = store.remember("Pinned low value memory about nothing much", importance=0.0, pinned=True, project="web", now=t0)
    store.recall(ids[4:], now=t0 + DAY)  # the used ones score higher
    store.configure({"capacity": 6}, now=t0)
    now = t0 + 2 * DAY
    everyone = [store.get(i) for i in [*ids, long_low.id]]
    expected_order = sorted(everyone, key=lambda m: (composite_score(m, now, store.settings.decay), m.created_at, m.id))
    plan = store.sweep(now=now, dry_run=True)
    report = store.sweep(now=now)
    assert [d.to_dict() for d in plan.decisions] == [d.to_dict() for d in report.decisions]
    victims = [d.memory_id for d in report.decisions]
    assert all(d.rule == "capacity" for d in report.decisions)
    # 10 latest memories, capacity 6: five go (one archive memory comes back), lowest scores first, pinned spared.
    assert victims == [m.id for m in expected_order[:5]] and pinned.id not in victims
    assert store.count_memories(latest_only=True, include_expired=True) == 6
    archived = [d for d in report.decisions if d.action == "archive"]
    assert [d.memory_id for d in archived] == [long_low.id]
    assert archived[0].numbers["chars"] == len(long_text) and archived[0].numbers["capacity"] == 6
    [archive_id] = report.archives
    archive = store.get(archive_id)
    assert archive.type == "archive" and archive.project == "web" and archive.origin == "consolidation"
    assert archive.metadata["source_ids"] == [long_low.id] and f"#{long_low.id}" in archive.content
    assert len(archive.content) < len(long_text) and "review" in archive.tags
    assert not store.exists(long_low.id)
    details = sweep_entries(store)[long_low.id]
    assert details["action"] == "archive" and details["archived_into"] == archive_id
    assert f"archived into #{archive_id}" in store.explain(long_low.id, now=now)


def test_capacity_victim_takes_its_whole_chain(store: MemoryStore, t0):
    v1 = store.remember("The build server is called jenkins-old in the basement", importance=0.0, now=t0)
    v2 = store.remember("The build server is called jenkins-new in the basement", importance=0.0, now=t0)
    assert v2.parent_id == v1.id
    keep = store.remember("Unrelated and important knowledge about payroll runs", importance=1.0, now=t0)
    store.configure({"capacity": 1}, now=t0)
    report = store.sweep(now=t0 + 2 * HOUR)
    assert [(d.memory_id, d.numbers["versions"]) for d in report.decisions] == [(v2.id, 2.0)]
    assert not store.exists(v1.id) and not store.exists(v2.id) and store.exists(keep.id)


def _store_with_everything(store: MemoryStore, t0: datetime) -> None:
    store.remember("A short-lived reminder about the meeting room", ttl_days=1, now=t0)
    store.remember("Nice weather today, isn't it?", type="chitchat", now=t0)
    store.observe("s1", "Bash", {"command": "make"}, "ok", now=t0)
    text = "Backups are copied to the cold storage bucket every Sunday night"
    store.remember_many([{"content": text, "tags": ["backup"]}, {"content": text + " too", "tags": ["backup"], "created_at": t0 + HOUR}], now=t0)
    for i in range(5):
        store.remember(f"Knowledge about the {WORDS[i]} and the {WORDS[i + 5]}", importance=0.1 * i, now=t0)


def test_dry_run_is_the_exact_plan_and_writes_nothing(store: MemoryStore, db_path: Path, t0):
    _store_with_everything(store, t0)
    store.configure({"capacity": 4}, now=t0)
    now = t0 + 10 * DAY
    audit_before = len(store.audit(limit=10_000))
    rows_before = store.conn.execute("SELECT * FROM memories ORDER BY id").fetchall()
    plan = store.sweep(now=now, dry_run=True)
    assert plan.dry_run and plan.archives == []
    assert len(store.audit(limit=10_000)) == audit_before
    assert store.conn.execute("SELECT * FROM memories ORDER BY id").fetchall() == rows_before
    assert {d.rule for d in plan.decisions} == set(RULES) - {"low_value", "conflict"}  # no resolved conflict here
    report = store.sweep(now=now)
    assert not report.dry_run
    assert [d.to_dict() for d in report.decisions] == [d.to_dict() for d in plan.decisions]
    assert report.counts == plan.counts
    assert store.sweep(now=now).decisions == []  # a second sweep at the same time has nothing left to do


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=st.lists(st.sampled_from(["fact", "chitchat", "observation", "ttl", "dup", "pinned", "preference"]), min_size=1, max_size=12),
    importances=st.lists(st.floats(0, 1), min_size=12, max_size=12),
    offsets=st.lists(st.integers(0, 72), min_size=12, max_size=12),
    sweep_after_hours=st.integers(0, 24 * 400),
    capacity=st.sampled_from([0, 0, 3, 6]),
)
def test_dry_run_equals_real_run_on_random_stores(t0, kinds, importances, offsets, sweep_after_hours, capacity):
    with tempfile.TemporaryDirectory() as folder, MemoryStore.open(Path(folder) / "m.db") as store:
        for i, kind in enumerate(kinds):
            when = t0 + offsets[i] * HOUR
            text = f"Memory {i} says {'alpha beta gamma delta epsilon' if kind == 'dup' else f'unique words {i} {kind}'}"
            if kind == "observation":
                store.observe(f"s{i % 3}", "Bash", {"command": f"cmd {i}"}, "ok", importance=importances[i], now=when)
            elif kind == "dup":
                store.remember_many([{"content": text.replace(str(i), "x", 1), "tags": ["shared"], "created_at": when}], now=when)
            else:
                store.remember(
                    text, type="chitchat" if kind == "chitchat" else "preference" if kind == "preference" else "fact",
                    importance=importances[i], ttl_days=1 if kind == "ttl" else None, pinned=kind == "pinned", now=when,
                )
        if capacity:
            store.configure({"capacity": capacity}, now=t0)
        now = t0 + sweep_after_hours * HOUR
        plan = store.sweep(now=now, dry_run=True)
        report = store.sweep(now=now)
        assert [d.to_dict() for d in report.decisions] == [d.to_dict() for d in plan.decisions]
        assert len({d.memory_id for d in report.decisions}) == len(report.decisions)
        assert store.sweep(now=now, dry_run=True).decisions == []
        assert store.verify_audit().ok


def test_grace_period_protects_young_memories(store: MemoryStore, t0):
    ttl = store.remember("Expires in about fifteen minutes", ttl_days=0.01, now=t0)
    text = "Invoices are numbered per calendar year starting from one in the billing service"
    older, _newer = _import(store, [{"content": text, "tags": ["billing"]}, {"content": text, "tags": ["billing"], "created_at": t0 + 10 * timedelta(minutes=1)}], t0)
    assert store.sweep(now=t0 + 50 * timedelta(minutes=1)).decisions == []  # expired and duplicated, but young
    assert store.exists(ttl.id) and store.get(older).is_latest
    report = store.sweep(now=t0 + HOUR)  # exactly one hour old: no longer younger than the grace period
    assert [(d.memory_id, d.rule) for d in report.decisions] == [(ttl.id, "ttl")]  # its duplicate is still young
    report = store.sweep(now=t0 + HOUR + 10 * timedelta(minutes=1))
    assert [(d.memory_id, d.rule) for d in report.decisions] == [(older, "duplicate")]


def test_grace_period_is_a_setting(store: MemoryStore, t0):
    chat = store.remember("brb", type="chitchat", importance=0.0, now=t0)  # weak after 16 hours
    store.configure({"grace_hours": 48}, now=t0)
    assert store.sweep(now=t0 + 47 * HOUR, dry_run=True).decisions == []
    assert [d.memory_id for d in store.sweep(now=t0 + 48 * HOUR, dry_run=True).decisions] == [chat.id]


def test_pinned_memories_are_never_touched(store: MemoryStore, t0):
    ttl = store.remember("Pinned but with a TTL", ttl_days=1, pinned=True, now=t0)
    chat = store.remember("Pinned small talk", type="chitchat", pinned=True, now=t0)
    obs = store.observe("s1", "Bash", {"command": "ls"}, "ok", now=t0)
    store.update(obs.id, pinned=True, now=t0)
    text = "The pager rotation changes every Monday at nine in the morning"
    older, _newer = _import(store, [{"content": text, "tags": ["oncall"], "pinned": True}, {"content": text, "tags": ["oncall"], "created_at": t0 + HOUR}], t0)
    store.configure({"capacity": 1}, now=t0)
    report = store.sweep(now=t0 + 400 * DAY)
    touched = {d.memory_id for d in report.decisions}
    assert not touched & {ttl.id, chat.id, obs.id, older}
    for memory_id in (ttl.id, chat.id, obs.id, older):
        assert store.exists(memory_id) and store.get(memory_id).is_latest


def test_audit_has_one_entry_per_decision_and_never_the_text(store: MemoryStore, t0):
    _store_with_everything(store, t0)
    store.configure({"capacity": 4}, now=t0)
    texts = [m.content for m in store.list_memories(latest_only=False, include_expired=True, limit=1000)]
    report = store.sweep(now=t0 + 10 * DAY)
    per_memory = [e for e in store.audit(operation="sweep", limit=1000) if e.details.get("action") != "write_archive"]
    assert sorted(e.details["rule"] for e in per_memory) == sorted(d.rule for d in report.decisions)
    for e in per_memory:
        assert {"rule", "action", "numbers", "reason"} <= e.details.keys()
    [run_entry] = store.audit(operation="sweep_run")
    assert run_entry.details["counts"] == report.counts and run_entry.details["decisions"] == len(report.decisions)
    dumped = json.dumps([e.to_dict() for e in store.audit(limit=10_000)], ensure_ascii=False)
    for text in texts:
        assert text not in dumped
    assert store.verify_audit().ok


@pytest.mark.sqlite_only  # counts the SQLite statements a sweep runs (set_trace_callback)
def test_sweep_finds_what_is_due_through_indexes(store: MemoryStore, t0):
    _store_with_everything(store, t0)
    store.sweep(now=t0 + 2 * HOUR)  # checks the new memories for near-duplicates once
    for i in range(30):
        store.remember(f"Filler about the {WORDS[i % 12]}, the {WORDS[(i * 5 + 1) % 12]} and {i}", tags=["filler"], now=t0 + 3 * HOUR)
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    try:
        store.sweep(now=t0 + 30 * DAY, dry_run=True)
    finally:
        store.conn.set_trace_callback(None)
    plans = []
    for sql in statements:
        # The in-memory supersede index's check for changes reads the change log's last row (SQLite calls walking
        # a table backwards from its end a SCAN, LIMIT 1 or not).
        if sql.lstrip().upper().startswith("SELECT") and not sql.endswith("ORDER BY seq DESC LIMIT 1"):
            plans += [row[3] for row in store.conn.execute("EXPLAIN QUERY PLAN " + sql)]
    assert plans
    # "SCAN CONSTANT ROW" is the one row of a SELECT without FROM (whether the store has tags at all): no table.
    full_scans = [p for p in plans if p.startswith("SCAN") and p != "SCAN CONSTANT ROW" and "VIRTUAL TABLE" not in p and "COVERING INDEX" not in p]
    assert full_scans == []


@pytest.mark.sqlite_only  # counts the SQLite statements a sweep runs (set_trace_callback)
def test_a_backlog_is_applied_in_batches_and_changes_meanwhile_are_respected(store: MemoryStore, t0, monkeypatch: pytest.MonkeyPatch):
    chats = [store.remember(f"small talk about the {WORDS[i]}", type="chitchat", now=t0).id for i in range(7)]
    now = t0 + 3 * DAY
    assert len(store.sweep(now=now, dry_run=True).decisions) == 7
    monkeypatch.setattr(sweep_engine, "APPLY_BATCH", 3)
    real_apply = sweep_engine._apply_batch
    calls: list[list[int]] = []

    def apply_batch(st, conn, p, batch, when, applied, archives):
        calls.append([d.memory_id for d in batch])
        if len(calls) == 2:
            st.recall([batch[0].memory_id], now=now)  # another writer's turn between two batches
        return real_apply(st, conn, p, batch, when, applied, archives)

    monkeypatch.setattr(sweep_engine, "_apply_batch", apply_batch)
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    try:
        report = store.sweep(now=now)
    finally:
        store.conn.set_trace_callback(None)
    assert calls == [chats[0:3], chats[3:6], chats[6:7]]
    assert statements.count("COMMIT") == 3  # one transaction per batch
    assert report.skipped == 1 and [d.memory_id for d in report.decisions] == chats[0:3] + chats[4:7]
    assert store.exists(chats[3]) and store.get(chats[3]).access_count == 1
    [run_entry] = store.audit(operation="sweep_run")
    assert run_entry.details["skipped"] == 1 and run_entry.details["decisions"] == 6


def test_readonly_store_can_plan_but_not_sweep(db_path: Path, t0):
    with MemoryStore.open(db_path) as s:
        s.remember("ok bye", type="chitchat", now=t0)
    with MemoryStore.open(db_path, readonly=True) as ro:
        assert len(ro.sweep(now=t0 + 10 * DAY, dry_run=True).decisions) == 1
        with pytest.raises(InvalidInput, match="read-only"):
            ro.sweep(now=t0 + 10 * DAY)


def test_cli_sweep_dry_run_then_real(capsys, db_path: Path, t0):
    with MemoryStore.open(db_path) as s:
        chat = s.remember("see you tomorrow", type="chitchat", now=t0)
        s.remember("The API gateway times out after 30 seconds", now=t0)
    db = ["--db", str(db_path)]
    when = (t0 + 3 * DAY).isoformat()
    assert main([*db, "sweep", "--dry-run", "--now", when, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["dry_run"] is True and [d["memory_id"] for d in plan["decisions"]] == [chat.id]
    assert plan["decisions"][0]["rule"] == "weak" and plan["counts"]["weak"] == 1
    assert main([*db, "sweep", "--now", when]) == 2  # a real sweep at another time needs --yes
    assert "--yes" in capsys.readouterr().err
    assert main([*db, "sweep", "--now", when, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "acted on 1 memory (1 weak)" in out and "below 0.1, so the sweep forgets it" in out
    assert main([*db, "sweep", "--now", when, "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["decisions"] == []
