"""Recalibration: memories' fates by kind and initial importance, proposals with their effect on the sweep (planned
on the proposed settings at an explicit time, without writing), applying one (audited); and the context-tag factor
of search (issue 13 point 7)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memlens import MemoryStore, calibrate
from memlens.cli import main
from memlens.config import SearchTuning, StoreSettings
from memlens.errors import InvalidInput

DAY = timedelta(days=1)


def observations(store: MemoryStore, t0: datetime, n: int) -> list[int]:
    return [store.observe(f"s{i % 3}", "Bash", {"command": f"ls dir{i}"}, f"listing {i} of dir{i}", now=t0).id for i in range(n)]


def facts(store: MemoryStore, t0: datetime, n: int, importance: float) -> list[int]:
    return [store.remember(f"Service {importance} number {i} listens on port {9000 + i}", importance=importance, now=t0).id for i in range(n)]


def counts(report: calibrate.CalibrationReport, group: str, name: str) -> dict[str, int]:
    return getattr(report, group)[name].to_dict()


def test_fates_by_kind_and_band_count_recalled_unused_and_both_kinds_of_forgetting(store: MemoryStore, t0: datetime) -> None:
    obs = observations(store, t0, 10)
    plain = facts(store, t0, 4, 0.5)
    store.recall(plain[:3], now=t0 + DAY)
    store.update(plain[3], importance=0.9, now=t0 + DAY)  # the initial guess (0.5) decides its band, not the edit
    for memory_id in obs[:3]:
        store.forget(memory_id, reason="noise", now=t0 + DAY)
    swept = store.sweep(now=t0 + 30 * DAY)
    assert swept.counts["weak"] == 7

    report = store.calibration(now=t0 + 31 * DAY)

    assert counts(report, "by_kind", "working/observation") == {"recalled": 0, "never_used": 0, "forgotten_by_rule": 7, "forgotten_by_hand": 3, "total": 10}
    assert counts(report, "by_kind", "semantic/fact") == {"recalled": 3, "never_used": 1, "forgotten_by_rule": 0, "forgotten_by_hand": 0, "total": 4}
    assert counts(report, "by_band", "default (0.35-0.65)")["total"] == 4
    assert report.reasons == {"by hand": 3, "sweep: weak": 7}
    assert report.total.total == 14


def test_fates_are_as_of_now_time_travel_sees_the_past(store: MemoryStore, t0: datetime) -> None:
    obs = observations(store, t0, 6)
    store.sweep(now=t0 + 30 * DAY)
    before = store.calibration(now=t0 + DAY)
    assert counts(before, "by_kind", "working/observation")["never_used"] == len(obs)  # the sweep had not run yet
    # Memories written after `now` are not counted either.
    assert store.calibration(now=t0 - DAY).total.total == 0


def test_a_kind_forgotten_by_hand_gets_a_faster_decay_proposal_with_its_sweep_effect(store: MemoryStore, t0: datetime) -> None:
    obs = observations(store, t0, 12)
    for memory_id in obs[:4]:
        store.forget(memory_id, now=t0 + DAY)
    now = t0 + 2 * DAY
    report = store.calibration(now=now)
    proposal = report.proposal("rate:observation")
    assert proposal.changes == {"decay": {"rates": {"observation": pytest.approx(0.015)}}}
    assert "forgotten by hand" in proposal.reason
    [today, month] = proposal.effects
    assert today.at == now and month.at == now + 30 * DAY
    # Faster decay: today's sweep forgets the 8 left observations with the proposal (0.015/h for 2 days: strength
    # 0.6 * e^-0.72 = 0.29, not below 0.1) and without it; a month on both forget all 8. Checked against the
    # planner's own dry run on the changed settings.
    assert today.proposed_total == today.current_total == 0
    assert month.current_total == store.sweep(now=month.at, dry_run=True).total
    faster = store.settings.with_changes(proposal.changes)
    assert month.proposed_total == calibrate.forget_counts(store, faster, month.at)["weak"]
    assert "would forget" in month.sentence(now)


def test_the_effect_differs_where_the_settings_matter(store: MemoryStore, t0: datetime) -> None:
    observations(store, t0, 5)
    # At 6 days an observation (rate 0.01/h, importance 0.2: s0 0.6) has strength 0.6 * e^-1.44 = 0.14: kept. At
    # three times the rate it is long gone.
    [effect] = store.preview_settings({"decay": {"rates": {"observation": 0.03}}}, now=t0 + 6 * DAY, days=[0])
    assert (effect.current_total, effect.proposed_total) == (0, 5)
    assert effect.sentence(t0 + 6 * DAY) == "with these settings the sweep now would forget 5 instead of 0"
    same = calibrate.SweepEffect(t0, {"weak": 3}, {"weak": 2, "ttl": 1})
    assert same.sentence(t0) == "with these settings the sweep now would forget the same 3"  # not "3 instead of 3"


def test_previews_write_nothing(store: MemoryStore, t0: datetime) -> None:
    ids = observations(store, t0, 5)
    fades = {i: store.fades_at(i) for i in ids}
    audit_before = len(store.audit_ids())
    store.preview_settings({"decay": {"rates": {"observation": 0.5}, "forget_threshold": 0.3}}, now=t0 + DAY)
    store.calibration(now=t0 + DAY)
    assert {i: store.fades_at(i) for i in ids} == fades
    assert len(store.audit_ids()) == audit_before
    assert store.settings == StoreSettings()


def test_applying_a_proposal_changes_the_settings_and_is_audited(store: MemoryStore, t0: datetime) -> None:
    obs = observations(store, t0, 12)
    for memory_id in obs[:4]:
        store.forget(memory_id, now=t0 + DAY)
    settings = store.apply_proposal("rate:observation", now=t0 + 2 * DAY)
    assert settings.decay.rate_for("observation") == pytest.approx(0.015)
    [entry] = store.audit(operation="configure", limit=1)
    assert entry.details["reason"].startswith("calibration proposal rate:observation")
    assert entry.details["changes"] == {"decay": {"rates": {"observation": 0.015}}}
    with pytest.raises(InvalidInput, match="no proposal 'rate:nothing'"):
        store.apply_proposal("rate:nothing", now=t0 + 2 * DAY)


def test_an_importance_guess_that_does_not_predict_use_weighs_less(store: MemoryStore, t0: datetime) -> None:
    default = facts(store, t0, 6, 0.5)
    facts(store, t0, 6, 0.8)
    store.recall(default[:4], now=t0 + DAY)
    report = store.calibration(now=t0 + 2 * DAY)
    proposal = report.proposal("weights:less-importance")
    assert proposal.changes == {"decay": {"weight_importance": pytest.approx(0.1), "weight_frequency": pytest.approx(0.5)}}
    assert "guessed important" in proposal.reason


def test_too_few_memories_make_no_proposal(store: MemoryStore, t0: datetime) -> None:
    obs = observations(store, t0, 3)
    store.forget(obs[0], now=t0 + DAY)
    assert store.calibration(now=t0 + 2 * DAY).proposals == []


def test_cli_calibrate_reports_and_applies(capsys: pytest.CaptureFixture[str], db_path: Path, t0: datetime) -> None:
    with MemoryStore.open(db_path) as store:
        for memory_id in observations(store, t0, 12)[:4]:
            store.forget(memory_id, now=t0 + DAY)
    now = (t0 + 2 * DAY).isoformat()
    assert main(["--db", str(db_path), "calibrate", "--now", now]) == 0
    out = capsys.readouterr().out
    assert "working/observation" in out and "proposal rate:observation" in out and "would forget" in out
    assert main(["--db", str(db_path), "calibrate", "--now", now, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["by_kind"]["working/observation"]["forgotten_by_hand"] == 4
    assert [p["key"] for p in data["proposals"]] == ["rate:observation"]
    assert main(["--db", str(db_path), "calibrate", "--now", now, "--apply", "rate:observation", "--yes"]) == 0
    assert "applied rate:observation" in capsys.readouterr().out
    with MemoryStore.open(db_path) as store:
        assert store.settings.decay.rate_for("observation") == pytest.approx(0.015)


# --- context-tag factor (point 7) ----------------------------------------------------------------------------------


def test_hits_outside_the_context_keep_a_tenth_of_their_score_by_default(store: MemoryStore, t0: datetime) -> None:
    assert SearchTuning().context_factor == 0.1
    tagged = store.remember("Rotate the signing keys every month", tags=["billing"], now=t0)
    plain = store.remember("Signing keys: rotate them before the audit", now=t0)
    hits = store.search("rotate signing keys", context_tags=["billing"], now=t0 + DAY)
    assert hits[0].memory.id == tagged.id
    demoted = next(h for h in hits if h.memory.id == plain.id)
    undemoted = demoted.score + demoted.context_penalty
    assert demoted.score == pytest.approx(0.1 * undemoted)
    assert "context factor x0.10" in demoted.explain()


def test_the_context_factor_is_a_store_setting_shown_in_explain(store: MemoryStore, t0: datetime) -> None:
    store.remember("Rotate the signing keys every month", tags=["security"], now=t0)
    store.configure({"search": {"context_factor": 0.3}}, now=t0)
    [hit] = store.search("signing keys", context_tags=["ops"], now=t0 + DAY)
    assert hit.score == pytest.approx(0.3 * (hit.score + hit.context_penalty))
    assert "context factor x0.30" in hit.explain()
    with pytest.raises(InvalidInput, match="context_factor"):
        store.configure({"search": {"context_factor": 1.5}}, now=t0)


def test_settings_saved_with_the_old_penalty_load_as_a_factor() -> None:
    # Saved before issue 13: the whole search section, with the old default share lost (0.5): the new default wins.
    assert StoreSettings.from_dict({"search": {"context_penalty": 0.5, "rrf_k": 60}}).search.context_factor == 0.1
    # A value someone chose is kept: losing 0.2 is keeping 0.8.
    assert StoreSettings.from_dict({"search": {"context_penalty": 0.2}}).search.context_factor == pytest.approx(0.8)
    # The old name through configure still works, over the factor already in the section.
    assert StoreSettings().with_changes({"search": {"context_penalty": 0.5}}).search.context_factor == 0.5
