"""MemoryFilter: one filter for listing, counting, ids, search and forget_matching, and the search tuning settings.

The combination test runs every filter combination through ``list_memories``, ``list_ids``, ``count_memories``
and ``search`` (a query every memory matches) and compares each with the memories a plain Python reading of the
filter selects, so the five entry points cannot drift apart again.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memlens import MemoryStore
from memlens.config import SearchTuning, StoreSettings
from memlens.errors import InvalidInput
from memlens.models import Memory
from memlens.storage.filters import MemoryFilter, filter_sql

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)  # the conftest clock; the module fixture cannot take t0
NOW = T0 + timedelta(days=5)  # memories with a 1-day TTL have expired by then
MIDDLE = T0 + timedelta(hours=12)  # the since/until boundary
SOON = NOW + timedelta(days=20)  # 10-day TTLs run out before this, 100-day ones after

LAYERS = ("semantic", "episodic", "working", "procedural")
TYPES = ("fact", "preference", "observation")
PROJECTS = ("p1", "p2", None)
SESSIONS = ("s1", "s2", None)
TAGS = ((), ("x",), ("x", "y"), ("y",))
TTLS = (None, 1.0, 10.0, 100.0)


def _seed(store: MemoryStore) -> None:
    """36 memories spread over every filtered attribute, each mentioning "alpha", plus a superseded version."""
    words = ["amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "jasper", "kelp", "lumen"]
    for i in range(36):
        store.remember(
            f"alpha {words[i % 12]} {words[(i * 5 + 3) % 12]} note {i}",
            layer=LAYERS[i % 4],
            type=TYPES[i % 3],
            project=PROJECTS[(i // 2) % 3],
            session_id=SESSIONS[(i // 3) % 3],
            tags=TAGS[(i // 4) % 4],
            ttl_days=TTLS[(i // 5) % 4],
            pinned=i % 7 == 0,
            supersede=False,
            now=T0 + timedelta(hours=i),
        )
    old = store.remember("alpha the deploy checklist has five steps", layer="semantic", project="p1", tags=["x"], now=T0 + timedelta(hours=1))
    new = store.remember("alpha the deploy checklist has six steps", layer="semantic", project="p1", tags=["x"], now=T0 + timedelta(hours=30))
    assert new.supersedes == (old.id,)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryStore, list[Memory]]]:
    """One seeded store for the module (read only by the tests), and every memory in it."""
    store = MemoryStore.open(Path(tmp_path_factory.mktemp("filters")) / "memory.db")
    try:
        _seed(store)
        every = store.list_memories(filter=MemoryFilter(include_superseded=True, include_expired=True), limit=1000, now=NOW)
        yield store, every
    finally:
        store.close()


def _passes(m: Memory, f: MemoryFilter, now: datetime) -> bool:
    """The filter read in plain Python, as the documentation of MemoryFilter states it."""
    return (
        (f.include_superseded or m.is_latest)
        and (f.include_expired or m.forget_after is None or m.forget_after > now)
        and (not f.layers or m.layer in f.layers)
        and (not f.types or m.type in f.types)
        and (f.project is None or m.project == f.project)
        and (f.session_id is None or m.session_id == f.session_id)
        and all(t in m.tags for t in f.tags)
        and (f.since is None or m.created_at >= f.since)
        and (f.until is None or m.created_at < f.until)
        and (f.pinned is None or m.pinned == f.pinned)
        and (f.expiring_before is None or (m.forget_after is not None and m.forget_after <= f.expiring_before))
    )


FILTER_VALUES = {
    "layers": [(), ("semantic",), ("episodic", "working")],
    "types": [(), ("fact",)],
    "project": [None, "p1"],
    "tags": [(), ("x",)],
    "session_id": [None, "s1"],
    "window": [(None, None), (MIDDLE, None), (None, MIDDLE)],
    "pinned": [None, True, False],
    "expiring_before": [None, SOON],
    "include_superseded": [False, True],
    "include_expired": [False, True],
}


def _every_filter() -> Iterator[MemoryFilter]:
    for values in itertools.product(*FILTER_VALUES.values()):
        chosen = dict(zip(FILTER_VALUES, values, strict=True))
        since, until = chosen.pop("window")
        yield MemoryFilter(since=since, until=until, **chosen)


def test_every_filter_combination_selects_the_same_memories_everywhere(seeded: tuple[MemoryStore, list[Memory]]) -> None:
    store, every = seeded
    assert any(not m.is_latest for m in every) and any(m.pinned for m in every)
    assert any(m.forget_after is not None and m.forget_after <= NOW for m in every)
    nonempty = 0
    for f in _every_filter():
        expected = {m.id for m in every if _passes(m, f, NOW)}
        nonempty += bool(expected)
        listed = {m.id for m in store.list_memories(filter=f, limit=1000, now=NOW)}
        assert listed == expected, f
        assert set(store.list_ids(filter=f, now=NOW)) == expected, f
        assert store.count_memories(filter=f, now=NOW) == len(expected), f
        found = {h.memory.id for h in store.search("alpha", filter=f, limit=1000, now=NOW)}
        assert found == expected, f
    assert nonempty > 500  # the seed is spread enough that most combinations select something


def test_keywords_and_filter_object_agree(seeded: tuple[MemoryStore, list[Memory]]) -> None:
    store, _every = seeded
    f = MemoryFilter(layers=("semantic", "procedural"), project="p1", pinned=False, include_superseded=True)
    keywords = {"layers": ["semantic", "procedural"], "project": "p1", "pinned": False}
    assert store.list_ids(filter=f, now=NOW) == store.list_ids(**keywords, latest_only=False, now=NOW)
    assert store.count_memories(filter=f, now=NOW) == store.count_memories(**keywords, latest_only=False, now=NOW)
    by_filter = [h.memory.id for h in store.search("alpha note", filter=f, limit=50, now=NOW)]
    by_keywords = [h.memory.id for h in store.search("alpha note", **keywords, include_superseded=True, limit=50, now=NOW)]
    assert by_filter == by_keywords


def test_pinned_plus_a_search_finds_the_pinned_matches(store: MemoryStore, t0: datetime) -> None:
    # The GUI's "Pinned" with a search: the pinned matches rank below many others, and used to be cut off by
    # the search limit before the view kept only the pinned rows (search ignored pinned; 0 rows shown).
    for i in range(30):
        store.remember(f"invoice reminder: invoice {i}", supersede=False, now=t0)
    pinned = [
        store.remember(f"a reminder, sent twice, about the overdue invoice from supplier {i}", pinned=True, supersede=False, now=t0)
        for i in range(2)
    ]
    top = [h.memory.id for h in store.search("invoice reminder", limit=5, now=t0)]
    assert not set(top) & {m.id for m in pinned}
    hits = store.search("invoice reminder", limit=5, pinned=True, now=t0)
    assert {h.memory.id for h in hits} == {m.id for m in pinned}
    hits = store.search("invoice reminder", limit=5, filter=MemoryFilter(pinned=True), now=t0)
    assert {h.memory.id for h in hits} == {m.id for m in pinned}


def test_expiring_before_narrows_a_search(store: MemoryStore, t0: datetime) -> None:
    soon = store.remember("rotate the api token", ttl_days=2, now=t0)
    store.remember("rotate the tyres", now=t0)
    hits = store.search("rotate", expiring_before=t0 + timedelta(days=7), now=t0)
    assert [h.memory.id for h in hits] == [soon.id]


def test_forget_matching_takes_a_filter(store: MemoryStore, t0: datetime) -> None:
    keep = store.remember("alpha stays", project="a", now=t0)
    gone = store.remember("alpha goes", project="b", now=t0)
    result = store.forget_matching(filter=MemoryFilter(project="b"), now=t0)
    assert result.erased == (gone.id,)
    assert store.exists(keep.id) and not store.exists(gone.id)
    with pytest.raises(InvalidInput, match="at least one filter"):
        store.forget_matching(filter=MemoryFilter(include_expired=True), now=t0)
    with pytest.raises(InvalidInput, match="not both"):
        store.forget_matching(project="a", filter=MemoryFilter(project="a"), now=t0)


def test_filter_and_keywords_together_are_refused(store: MemoryStore, t0: datetime) -> None:
    for call in (store.list_memories, store.list_ids, store.count_memories):
        with pytest.raises(InvalidInput, match="not both"):
            call(project="p", filter=MemoryFilter(project="p"), now=t0)
    with pytest.raises(InvalidInput, match="not both"):
        store.search("x", pinned=True, filter=MemoryFilter(), now=t0)
    with pytest.raises(InvalidInput, match="MemoryFilter"):
        store.list_memories(filter={"project": "p"}, now=t0)  # type: ignore[arg-type]


def test_a_filter_checks_and_cleans_its_values(t0: datetime) -> None:
    f = MemoryFilter(layers="semantic", types=["Fact", "fact"], tags="x, y", pinned=1)  # type: ignore[arg-type]
    assert (f.layers, f.types, f.tags, f.pinned) == (("semantic",), ("fact",), ("x", "y"), True)
    assert not MemoryFilter().narrows and not MemoryFilter(include_superseded=True, include_expired=True).narrows
    assert MemoryFilter(pinned=False).narrows and MemoryFilter(since=t0).narrows
    bad: list[dict[str, object]] = [
        {"layers": ["nowhere"]},
        {"types": ["two words"]},
        {"project": 3},
        {"tags": 5},
        {"since": datetime(2026, 1, 1)},  # naive
        {"expiring_before": "tomorrow"},
        {"pinned": "yes"},
        {"include_expired": None},
    ]
    for kwargs in bad:
        with pytest.raises(InvalidInput):
            MemoryFilter(**kwargs)  # type: ignore[arg-type]


def test_filter_sql_is_empty_only_for_everything(t0: datetime) -> None:
    assert filter_sql(MemoryFilter(include_superseded=True, include_expired=True), t0) == ([], [])
    where, params = filter_sql(MemoryFilter(tags=("a", "b")), t0)
    assert len(where) == 4 and params[-2:] == ["a", "b"]


# --- search tuning (settings.search) ------------------------------------------------------------------------


def test_search_tuning_round_trips_and_old_settings_load() -> None:
    tuned = StoreSettings.from_dict({"search": {"rrf_k": 30, "next_turn_share": 0.5}})
    assert tuned.search == replace(SearchTuning(), rrf_k=30, next_turn_share=0.5)
    assert StoreSettings.from_dict(tuned.to_dict()) == tuned
    stored_before = {k: v for k, v in StoreSettings().to_dict().items() if k != "search"}
    assert StoreSettings.from_dict(stored_before).search == SearchTuning()


@pytest.mark.parametrize(
    "bad",
    [{"rrf_k": 0}, {"candidate_pool": 2.5}, {"session_share": 1.5}, {"context_penalty": -0.1}, {"context_factor": 1.5}, {"tags_weight": float("nan")},
     {"title_weight": 0, "content_weight": 0, "tags_weight": 0}],
)  # fmt: skip
def test_bad_search_tuning_is_refused(store: MemoryStore, bad: dict[str, float]) -> None:
    with pytest.raises(InvalidInput, match="search"):
        store.configure({"search": bad})


def test_search_tuning_from_the_store_changes_ranking(store: MemoryStore, t0: datetime) -> None:
    tagged = store.remember("cache invalidation notes", tags=["backend"], now=t0)
    plain = store.remember("cache invalidation notes and more cache", now=t0)
    hits = store.search("cache", context_tags=["backend"], now=t0)
    assert hits[0].memory.id == tagged.id and hits[1].context_penalty > 0
    store.configure({"search": {"context_factor": 1.0}}, now=t0)
    hits = store.search("cache", context_tags=["backend"], now=t0)
    assert all(h.context_penalty == 0.0 for h in hits) and {h.memory.id for h in hits} == {tagged.id, plain.id}
    reopened = MemoryStore.open(store.path)
    try:
        assert reopened.settings.search.context_factor == 1.0
    finally:
        reopened.close()


def test_tuning_one_search_constant_keeps_the_others(store: MemoryStore, t0: datetime) -> None:
    store.configure({"search": {"rrf_k": 30}}, now=t0)
    store.configure({"search": {"context_factor": 0.8}}, now=t0)  # once reset rrf_k to its default
    assert store.settings.search == replace(SearchTuning(), rrf_k=30, context_factor=0.8)
