"""Strength and decay: per-type rates, reinforcement, the floor, cold-start importance, curves, the composite
score, and idempotence: strength is a pure function of what is stored and now, whatever the sweep schedule."""

from __future__ import annotations

import math
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlens import InvalidInput, MemoryStore
from memlens.decay import DEFAULT_RATES, DecayConfig, composite_parts, composite_score, initial_strength

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "glacier", "heath", "inlet", "jade", "karst", "loess", "mesa", "nimbus"]


@pytest.mark.parametrize(("type_", "rate"), [("fact", 0.001), ("preference", 0.02), ("chitchat", 0.1), ("decision", 0.002), ("bug", 0.01)])
def test_each_type_decays_at_its_own_rate(store: MemoryStore, t0, type_, rate):
    assert DEFAULT_RATES[type_] == rate
    m = store.remember(f"Something worth a {type_} about the deployment", type=type_, importance=0.6, now=t0)
    s0 = initial_strength(0.6)
    assert s0 == pytest.approx(0.8)
    assert store.strength(m.id, now=t0) == pytest.approx(s0)
    for hours in (1, 10, 100):
        expected = max(s0 * math.exp(-rate * hours), 0.1 if type_ != "chitchat" else 0.0)
        assert store.strength(m.id, now=t0 + hours * HOUR) == pytest.approx(expected)


def test_faster_types_fade_first(store: MemoryStore, t0):
    fact = store.remember("The primary region is eu-west-1", type="fact", importance=0.5, now=t0)
    pref = store.remember("Prefers short commit messages", type="preference", importance=0.5, now=t0)
    chat = store.remember("Thanks, that was helpful!", type="chitchat", importance=0.5, now=t0)
    later = t0 + 12 * HOUR
    assert store.strength(fact.id, now=later) > store.strength(pref.id, now=later) > store.strength(chat.id, now=later)


def test_recall_resets_the_clock_and_slows_decay(store: MemoryStore, t0):
    a = store.remember("Ask before force-pushing to shared branches", type="preference", importance=0.4, now=t0)
    b = store.remember("Write changelog entries in the present tense", type="preference", importance=0.4, now=t0)
    s0 = initial_strength(0.4)
    store.recall([a.id], now=t0 + 10 * HOUR)
    store.recall([a.id], now=t0 + 20 * HOUR)
    assert store.get(a.id).access_count == 2
    # Right after a recall the memory is back at its initial strength...
    assert store.strength(a.id, now=t0 + 20 * HOUR) == pytest.approx(s0)
    # ...and then decays at the base rate divided by 1 + 0.5 * recalls.
    later = t0 + 50 * HOUR
    assert store.strength(a.id, now=later) == pytest.approx(s0 * math.exp(-0.02 / (1 + 0.5 * 2) * 30))
    assert store.strength(b.id, now=later) == pytest.approx(max(0.1, s0 * math.exp(-0.02 * 50)))
    assert store.strength(a.id, now=later) > store.strength(b.id, now=later)


def test_reinforcement_is_a_setting(store: MemoryStore, t0):
    m = store.remember("Use the staging VPN profile for the admin panel", importance=0.0, now=t0)
    store.recall([m.id], now=t0)
    store.configure({"decay": {"reinforcement": 2.0}}, now=t0)
    assert store.strength(m.id, now=t0 + 100 * HOUR) == pytest.approx(0.5 * math.exp(-0.001 / 3 * 100))


def test_floor_holds_semantic_and_procedural_but_not_chitchat_or_observations(store: MemoryStore, t0):
    fact = store.remember("The mail relay is smtp-2", importance=0.0, now=t0)
    flow = store.remember("Release: tag, build, publish", type="workflow", importance=0.0, now=t0)
    chat = store.remember("haha nice one", type="chitchat", importance=0.0, now=t0)
    obs = store.observe("s1", "Bash", {"command": "ls"}, "ok", now=t0)
    far = t0 + 3000 * DAY
    assert store.strength(fact.id, now=far) == pytest.approx(0.1)
    assert store.strength(flow.id, now=far) == pytest.approx(0.1)
    assert store.strength(chat.id, now=far) < 1e-6
    assert store.strength(obs.id, now=far) < 1e-6
    assert store.fades_at(fact.id) is None  # the floor is not below the forget threshold
    assert store.fades_at(fact.id, 0.2) is not None


def test_pinned_memories_keep_their_strength(store: MemoryStore, t0):
    m = store.remember("Never deploy on Fridays", type="chitchat", importance=0.8, pinned=True, now=t0)
    assert store.strength(m.id, now=t0 + 5000 * DAY) == pytest.approx(initial_strength(0.8))
    assert store.fades_at(m.id) is None


@pytest.mark.parametrize(
    ("text", "importance"),
    [
        ("Remember this: the release branch is cut on the 1st", 0.9),
        ("Please don't forget that the demo is at noon", 0.9),
        ("记住：周五不要部署", 0.9),
        ("The API key lives in the vault under ops/payments", 0.8),
        ("We decided to drop Python 3.10 support", 0.8),
        ("The handshake protocol is version 3", 0.8),
        ("数据库密码在保险库里", 0.8),
        ("The cafeteria opens at eight", 0.5),
    ],
)
def test_cold_start_importance(store: MemoryStore, t0, text, importance):
    m = store.remember(text, now=t0)
    assert m.importance == importance
    assert store.strength(m.id, now=t0) == pytest.approx(initial_strength(importance))


def test_explicit_importance_wins_over_cold_start(store: MemoryStore, t0):
    assert store.remember("Remember this: lunch is at one", importance=0.3, now=t0).importance == 0.3


def test_fades_at_is_when_strength_crosses_the_threshold(store: MemoryStore, t0):
    obs = store.observe("s1", "Bash", {"command": "make test"}, "ok", now=t0)
    fade = store.fades_at(obs.id)
    assert fade is not None
    # s0 0.6 at 0.01/h reaches 0.1 after ln(6)/0.01 hours.
    assert (fade - t0) / HOUR == pytest.approx(math.log(6) / 0.01)
    assert store.strength(obs.id, now=fade) == pytest.approx(0.1)
    assert store.strength(obs.id, now=fade - HOUR) > 0.1 > store.strength(obs.id, now=fade + HOUR)
    assert store.fades_at(obs.id, 0.3) < fade
    store.recall([obs.id], now=t0 + DAY)
    assert store.fades_at(obs.id) > fade  # recall pushes it out
    with pytest.raises(InvalidInput):
        store.fades_at(obs.id, 1.5)


def test_strength_curve_rebuilds_the_past_and_projects_the_future(store: MemoryStore, t0):
    m = store.remember("The nightly job needs the reports volume mounted", type="preference", importance=0.2, now=t0)
    store.recall([m.id], now=t0 + 10 * HOUR)
    store.recall([m.id], now=t0 + 30 * HOUR)
    now = t0 + 40 * HOUR
    curve = store.strength_curve(m.id, start=t0 - 5 * HOUR, end=t0 + 100 * HOUR, points=106, now=now)
    assert isinstance(curve.times, np.ndarray) and curve.times.shape == curve.values.shape == curve.past.shape == (106,)
    hours = (curve.times - t0.timestamp()) / 3600
    assert np.allclose(hours, np.arange(-5, 101))
    s0 = initial_strength(0.2)
    assert np.all(curve.values[hours < 0] == 0)  # before it existed
    assert curve.past.tolist() == (hours <= 40).tolist()
    assert curve.access_times.tolist() == [(t0 + 10 * HOUR).timestamp(), (t0 + 30 * HOUR).timestamp()]
    assert curve.access_values.tolist() == [s0, s0]
    at = {round(h): v for h, v in zip(hours, curve.values, strict=True)}
    assert at[0] == pytest.approx(s0) and at[10] == pytest.approx(s0) and at[30] == pytest.approx(s0)
    assert at[9] == pytest.approx(s0 * math.exp(-0.02 * 9))
    assert at[20] == pytest.approx(s0 * math.exp(-0.02 / 1.5 * 10))
    # Past the present it is the projection with no further use, equal to strength() at those times.
    for h in (40, 60, 100):
        assert at[h] == pytest.approx(store.strength(m.id, now=t0 + h * HOUR))
    with pytest.raises(InvalidInput):
        store.strength_curve(m.id, start=now, end=t0, now=now)
    with pytest.raises(InvalidInput):
        store.strength_curve(m.id, start=t0, end=now, points=1, now=now)


def test_composite_retention_score_weights(t0):
    cfg = DecayConfig()
    assert (cfg.weight_recency, cfg.weight_frequency, cfg.weight_importance, cfg.weight_semantic) == (0.3, 0.4, 0.2, 0.1)
    parts = composite_parts(content="Remember this: ship on Monday", importance=0.6, last_accessed=0.0, access_count=8, now=7 * 86400.0, config=cfg)
    assert parts == pytest.approx({"recency": 0.5, "frequency": 1 - math.exp(-1), "importance": 0.6, "semantic": 0.9})


def test_composite_score_of_a_stored_memory(store: MemoryStore, t0):
    m = store.remember("The cafeteria opens at eight", importance=0.4, now=t0)
    store.recall([m.id], now=t0)
    now = t0 + 7 * DAY
    expected = 0.3 * 0.5 + 0.4 * (1 - math.exp(-1 / 8)) + 0.2 * 0.4 + 0.1 * 0.5
    assert composite_score(store.get(m.id), now, store.settings.decay) == pytest.approx(expected)


def test_computing_strength_changes_nothing(store: MemoryStore, t0):
    m = store.remember("The cache is warmed at startup", type="preference", now=t0)
    rows = store.conn.execute("SELECT * FROM memories").fetchall()
    audit = len(store.audit(limit=1000))
    values = [store.strength(m.id, now=t0 + 5 * HOUR) for _ in range(20)]
    store.strength_curve(m.id, start=t0, end=t0 + DAY, now=t0 + HOUR)
    store.fades_at(m.id)
    assert len(set(values)) == 1
    assert store.conn.execute("SELECT * FROM memories").fetchall() == rows and len(store.audit(limit=1000)) == audit


# --- idempotence over sweep schedules ----------------------------------------------------------------------------

KINDS = ["fact", "preference", "chitchat", "observation", "workflow", "summary", "ttl", "pinned_chat", "tagged"]

memory_spec = st.tuples(
    st.sampled_from(KINDS),
    st.floats(0.0, 1.0),
    st.integers(0, 48 * 60),  # created, minutes after t0
    st.lists(st.integers(0, 48 * 60), max_size=3),  # recalls, minutes after t0 (only those after creation count)
    st.integers(0, 2),  # which tagged group / word variant
)


def build(store: MemoryStore, t0: datetime, specs: list[tuple]) -> None:
    """Create the same memories and recalls in any store, in time order."""
    events: list[tuple[int, int, int]] = []  # (minute, 0 = create / 1 = recall, index)
    for i, (_kind, _imp, created, recalls, _variant) in enumerate(specs):
        events.append((created, 0, i))
        events.extend((r, 1, i) for r in recalls if r >= created)
    ids: dict[int, int] = {}
    for minute, what, i in sorted(events):
        kind, importance, _created, _recalls, variant = specs[i]
        when = t0 + minute * timedelta(minutes=1)
        if what == 1:
            store.recall([ids[i]], now=when)
            continue
        words = f"{WORDS[i % len(WORDS)]} {WORDS[(i * 3 + 1) % len(WORDS)]} {WORDS[(i * 5 + 2) % len(WORDS)]} number {i}"
        if kind == "observation":
            m = store.observe(f"s{variant}", "Bash", {"command": f"run {words}"}, "ok", importance=importance, now=when)
        elif kind == "tagged":
            shared = "the shared sentence about the harbour pilots and their tide tables and schedule"
            before = store.id_sequence()
            store.remember_many([{"content": f"{shared} {variant}", "tags": [f"g{variant}"], "created_at": when}], now=when)
            m = store.get(before + 1)
        else:
            m = store.remember(
                f"A {kind} about {words}",
                type={"ttl": "fact", "pinned_chat": "chitchat"}.get(kind, kind),
                importance=importance,
                ttl_days=2 if kind == "ttl" else None,
                pinned=kind == "pinned_chat",
                supersede=False,
                now=when,
            )
        ids[i] = m.id


def state(store: MemoryStore, at: datetime) -> dict[int, tuple]:
    out = {}
    for m in store.list_memories(latest_only=False, include_expired=True, limit=10_000):
        out[m.id] = (m.is_latest, m.access_count, m.last_accessed_at, round(store.strength(m.id, now=at), 12))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    specs=st.lists(memory_spec, min_size=1, max_size=14),
    schedule=st.lists(st.integers(0, 30 * 24 * 60), max_size=25),
)
def test_any_sweep_schedule_leaves_the_same_state_as_one_sweep(t0, specs, schedule):
    start = t0 + 2 * DAY + HOUR  # every memory and recall happened before the first sweep
    end = start + 30 * DAY
    with (
        tempfile.TemporaryDirectory() as folder,
        MemoryStore.open(Path(folder) / "often.db") as often,
        MemoryStore.open(Path(folder) / "once.db") as once,
    ):
        build(often, t0, specs)
        build(once, t0, specs)
        assert state(often, end) == state(once, end)
        for minute in sorted(set(schedule)):
            often.sweep(now=start + minute * timedelta(minutes=1))
        often.sweep(now=end)
        once.sweep(now=end)
        assert state(often, end) == state(once, end)
        # Sweeping again at the same time, or computing strength again, changes nothing.
        once.sweep(now=end)
        assert state(often, end) == state(once, end)


def test_sweeping_hourly_for_30_days_equals_one_sweep_at_day_30(t0):
    specs = [
        ("fact", 0.2, 0, [], 0),
        ("preference", 0.5, 10, [600], 0),
        ("chitchat", 0.0, 20, [], 0),
        ("chitchat", 0.9, 30, [90, 1000], 0),
        ("observation", 0.2, 40, [], 0),
        ("observation", 0.5, 50, [2000], 1),
        ("workflow", 0.3, 60, [], 0),
        ("summary", 0.3, 70, [], 0),
        ("ttl", 0.5, 80, [], 0),
        ("pinned_chat", 0.1, 90, [], 0),
        ("tagged", 0.5, 100, [], 1),
        ("tagged", 0.5, 200, [], 1),
    ]
    start = t0 + 2 * DAY
    end = start + 30 * DAY
    with (
        tempfile.TemporaryDirectory() as folder,
        MemoryStore.open(Path(folder) / "hourly.db") as hourly,
        MemoryStore.open(Path(folder) / "once.db") as once,
    ):
        build(hourly, t0, specs)
        build(once, t0, specs)
        forgotten = 0
        for hour in range(1, 30 * 24 + 1):
            forgotten += len(hourly.sweep(now=start + hour * HOUR).decisions)
        report = once.sweep(now=end)
        assert forgotten == len(report.decisions) > 0
        assert state(hourly, end) == state(once, end)
        assert {d.rule for d in report.decisions} == {"ttl", "weak", "duplicate"}


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Remember this: deploys happen on Tuesdays", 0.9),
        ("DON'T FORGET the staging freeze", 0.9),
        ("keep in mind that prod is in eu-west-1", 0.9),
        ("请记住这个端口", 0.9),
        ("The Password rotates monthly", 0.8),
        ("数据库密码在保险库里", 0.8),
        ("the monkey business in the keyboard drawer", 0.5),  # "key" inside words is no cue
        ("plain note about lunch", 0.5),
    ],
)
def test_cold_start_cues_survive_the_quick_substring_check(text, expected):
    from memlens.decay import _HIGH_VALUE, _REMEMBER_CUES, cold_start_importance

    assert cold_start_importance(text) == expected
    slow = 0.9 if _REMEMBER_CUES.search(text) else 0.8 if _HIGH_VALUE.search(text) else 0.5
    assert slow == expected


def test_changing_a_decay_rate_moves_when_the_sweep_forgets(store, t0):
    from datetime import timedelta

    obs = [store.observe("s", "Bash", {"command": f"ls {i}"}, "ok", now=t0) for i in range(3)]
    before = store.sweep(now=t0 + timedelta(days=2), dry_run=True).decisions
    assert before == []  # at 0.01/h an observation of importance 0.2 lasts about 7.5 days
    store.configure({"decay": {"rates": {"observation": 0.1}}}, now=t0)  # now about 18 hours
    after = store.sweep(now=t0 + timedelta(days=2), dry_run=True).decisions
    assert sorted(d.memory_id for d in after if d.rule == "weak") == [m.id for m in obs]
