"""Cascade on supersede: links into the old version (summaries' sources, contradictions, related) follow to the
new version in the supersede's own transaction, the old version keeps its links, and the move is audited."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memlens import MemoryStore
from memlens.errors import MemlensError

YARN = "Use yarn to install dependencies in this project"
PNPM = "Use pnpm to install dependencies in this project"


def links(store: MemoryStore, memory_id: int) -> set[tuple[int, int, str]]:
    return {(r.src_id, r.dst_id, r.kind) for r in store.relations(memory_id)}


def test_relations_into_the_old_version_follow_to_the_new_one(store: MemoryStore, t0):
    yarn = store.remember(YARN, project="web", now=t0)
    summary = store.remember("The web project's tooling, summarised", type="summary", now=t0)
    rival = store.remember("The web project is built with bazel only", project="web", now=t0)
    see_also = store.remember("Lockfiles are committed to the repository", project="web", now=t0)
    store.relate(summary.id, yarn.id, "derives", now=t0)
    store.relate(rival.id, yarn.id, "contradicts", score=0.8, now=t0)
    store.relate(yarn.id, see_also.id, "related", score=0.45, now=t0)

    pnpm = store.remember(PNPM, project="web", now=t0 + timedelta(minutes=5))

    assert pnpm.parent_id == yarn.id
    assert links(store, pnpm.id) == {
        (pnpm.id, yarn.id, "supersedes"),
        (summary.id, pnpm.id, "derives"),  # the summary's source is the current version now
        (rival.id, pnpm.id, "contradicts"),
        (pnpm.id, see_also.id, "related"),
    }
    # The old version keeps its links: history still shows them.
    assert {(summary.id, yarn.id, "derives"), (rival.id, yarn.id, "contradicts"), (yarn.id, see_also.id, "related")} <= links(store, yarn.id)
    assert store.sources_of(summary.id) == [yarn.id, pnpm.id]
    moved = store.carried_relations(yarn.id, pnpm.id)
    assert {(r.src_id, r.dst_id, r.kind) for r in moved} == links(store, pnpm.id) - {(pnpm.id, yarn.id, "supersedes")}
    assert {r.score for r in moved if r.kind == "contradicts"} == {0.8}


def test_the_move_is_audited_in_the_supersedes_transaction(store: MemoryStore, t0):
    yarn = store.remember(YARN, project="web", now=t0)
    summary = store.remember("The web project's tooling, summarised", type="summary", now=t0)
    store.relate(summary.id, yarn.id, "derives", now=t0)
    pnpm = store.remember(PNPM, project="web", now=t0 + timedelta(minutes=5))
    entries = store.audit(limit=2)
    assert [e.operation for e in entries] == ["supersede", "relate"]
    carried = entries[1]
    assert carried.details["carried_from"] == yarn.id and carried.details["carried_to"] == pnpm.id
    assert carried.details["relations"] == [[summary.id, pnpm.id, "derives"]]
    assert set(carried.target_ids) == {pnpm.id, yarn.id, summary.id}
    assert store.verify_audit().ok


def test_outgoing_provenance_does_not_follow(store: MemoryStore, t0):
    # A new version of a summary is not derived from the old one's sources just because it replaces it.
    source = store.remember("Deploys go out on Tuesdays", now=t0)
    old = store.remember("Summary: we deploy weekly on Tuesday afternoons", type="summary", now=t0)
    store.relate(old.id, source.id, "derives", now=t0)
    new = store.remember("Summary: we deploy weekly on Tuesday mornings", type="summary", supersede_id=old.id, now=t0 + timedelta(hours=1))
    assert (new.id, source.id, "derives") not in links(store, new.id)
    assert store.carried_relations(old.id, new.id) == []


def test_a_supersede_without_links_moves_nothing_and_writes_no_relate_entry(store: MemoryStore, t0):
    yarn = store.remember(YARN, project="web", now=t0)
    pnpm = store.remember(PNPM, project="web", now=t0 + timedelta(minutes=5))
    assert links(store, pnpm.id) == {(pnpm.id, yarn.id, "supersedes")}
    assert [e.operation for e in store.audit(limit=5)] == ["supersede", "remember"]


def test_a_link_the_new_version_already_has_keeps_its_own_score(store: MemoryStore, t0):
    yarn = store.remember(YARN, project="web", now=t0)
    other = store.remember("Renovate bumps the lockfile weekly", project="web", now=t0)
    store.relate(other.id, yarn.id, "related", score=0.5, now=t0)
    pnpm = store.remember(PNPM, project="web", now=t0 + timedelta(minutes=5))
    assert [(r.score) for r in store.relations(pnpm.id) if r.kind == "related"] == [0.5]
    # A later supersede carries again, from v2 to v3: the link is never lost along the chain.
    v3 = store.remember("Use bun to install dependencies in this project", supersede_id=pnpm.id, now=t0 + timedelta(hours=1))
    assert (other.id, v3.id, "related") in links(store, v3.id)
    assert {(r.src_id, r.kind) for r in store.carried_relations(pnpm.id, v3.id)} == {(other.id, "related")}


def test_the_cascade_rolls_back_with_a_failed_supersede(store: MemoryStore, t0, monkeypatch: pytest.MonkeyPatch):
    yarn = store.remember(YARN, project="web", now=t0)
    summary = store.remember("The web project's tooling, summarised", type="summary", now=t0)
    store.relate(summary.id, yarn.id, "derives", now=t0)
    before = links(store, summary.id)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise MemlensError("disk full")

    monkeypatch.setattr(store.ctx, "audit", broken)
    with pytest.raises(MemlensError):
        store.remember(PNPM, project="web", now=t0 + timedelta(minutes=5))
    monkeypatch.undo()
    assert links(store, summary.id) == before
    assert store.get(yarn.id).is_latest


def test_the_sweeps_near_duplicate_merge_carries_relations_too(store: MemoryStore, t0):
    text = "The staging database listens on port 5433 behind the bastion host in the Frankfurt region for all services"
    store.remember_many(
        [{"content": text, "tags": ["db"], "created_at": t0}, {"content": text + " now", "tags": ["db"], "created_at": t0 + timedelta(hours=1)}],
        now=t0,
    )
    older, newer = (m.id for m in sorted(store.list_memories(), key=lambda m: m.id))
    summary = store.remember("Where the staging services live, summarised", type="summary", now=t0)
    store.relate(summary.id, older, "derives", now=t0)

    report = store.sweep(now=t0 + timedelta(hours=3))

    assert [(d.memory_id, d.action) for d in report.decisions] == [(older, "mark_not_latest")]
    assert (summary.id, newer, "derives") in links(store, newer)  # the summary's source is the current version now
    assert (summary.id, older, "derives") in links(store, older)  # and the old version keeps its link
    assert [(r.src_id, r.dst_id, r.kind) for r in store.carried_relations(older, newer)] == [(summary.id, newer, "derives")]
    [carried] = [e for e in store.audit(operation="relate") if e.details.get("carried_from") == older]
    assert carried.details["carried_to"] == newer and carried.details["relations"] == [[summary.id, newer, "derives"]]
    [swept] = [e for e in store.audit(operation="sweep") if e.details.get("rule") == "duplicate"]
    assert swept.details["carried_relations"] == 1
