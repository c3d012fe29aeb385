"""The aggressiveness knob: five positions mapping visibly to thresholds, capacity and rate multipliers; previews of
what each would forget now and in 30 days (planned without writing); setting one (audited); CLI."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memlens import MemoryStore, tidiness
from memlens.cli import main
from memlens.config import StoreSettings
from memlens.decay import DEFAULT_RATES
from memlens.errors import InvalidInput

DAY = timedelta(days=1)


def observations(store: MemoryStore, t0: datetime, n: int) -> list[int]:
    return [store.observe("s", "Bash", {"command": f"ls dir{i}"}, f"listing {i} of dir{i}", now=t0).id for i in range(n)]


def test_positions_run_from_keeping_to_tidying_and_the_middle_is_the_design() -> None:
    assert [lv.position for lv in tidiness.LEVELS] == [1, 2, 3, 4, 5]
    assert tidiness.position_of(StoreSettings()) == tidiness.DEFAULT_POSITION == 3
    for keep, tidy in zip(tidiness.LEVELS, tidiness.LEVELS[1:], strict=False):
        assert keep.forget_threshold < tidy.forget_threshold
        assert keep.rate_multiplier < tidy.rate_multiplier
        assert keep.low_value_days > tidy.low_value_days
    assert "decay rates x4" in tidiness.level(5).settings_text() and "capacity 5,000 memories" in tidiness.level(5).settings_text()
    with pytest.raises(InvalidInput, match="from 1"):
        tidiness.level(6)


def test_setting_a_position_changes_the_settings_it_covers_and_is_audited(store: MemoryStore, t0: datetime) -> None:
    settings = store.set_tidiness(5, now=t0)
    assert settings.decay.forget_threshold == 0.2 and settings.capacity == 5000 and settings.low_value_days == 30
    assert settings.decay.rate_for("observation") == pytest.approx(4 * DEFAULT_RATES["observation"])
    assert store.tidiness() == 5
    [entry] = store.audit(operation="configure", limit=1)
    assert entry.details["reason"] == "tidiness 5 (Tidy)"
    store.configure({"decay": {"rates": {"fact": 0.5}}}, now=t0)
    assert store.tidiness() is None  # tuned away from every position
    store.set_tidiness(3, now=t0)
    assert store.tidiness() == 3 and store.settings.decay == StoreSettings().decay


def test_preview_shows_what_each_position_forgets_now_and_in_30_days_without_writing(store: MemoryStore, t0: datetime) -> None:
    observations(store, t0, 6)
    now = t0 + 5 * DAY  # strength 0.6 * e^(-0.01 * 120) = 0.18 at the default rate: kept by balanced
    audit_before = len(store.audit_ids())
    previews = {p.level.position: p for p in tidiness.preview(store, now=now)}
    assert [e.at for e in previews[3].effects] == [now, now + 30 * DAY]
    assert previews[3].effects[0].proposed_total == previews[3].effects[0].current_total == 0
    assert previews[5].effects[0].proposed_total == 6  # four times the rate, threshold 0.2: all gone now
    assert previews[1].effects[1].proposed_total == 0  # a month on, position 1 still keeps them (0.6 * e^-2.1 = 0.07 > 0.02)
    assert previews[3].effects[1].current_total == 6 == store.sweep(now=now + 30 * DAY, dry_run=True).total
    assert len(store.audit_ids()) == audit_before and store.settings == StoreSettings()


def test_cli_tidiness_shows_previews_and_sets(capsys: pytest.CaptureFixture[str], db_path: Path, t0: datetime) -> None:
    with MemoryStore.open(db_path) as store:
        observations(store, t0, 4)
    now = (t0 + 5 * DAY).isoformat()
    assert main(["--db", str(db_path), "tidiness", "--now", now]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tidiness: 3") and "* 3 Balanced" in out
    assert main(["--db", str(db_path), "tidiness", "--preview", "--now", now, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["position"] == 3 and [p["effects"][0]["proposed_total"] for p in data["previews"]] == [0, 0, 0, 4, 4]
    assert main(["--db", str(db_path), "tidiness", "--set", "2"]) == 0
    assert "tidiness set to 2 (Keep more)" in capsys.readouterr().out
    with MemoryStore.open(db_path) as store:
        assert store.tidiness() == 2
    assert main(["--db", str(db_path), "tidiness", "--set", "9"]) == 2
    assert "from 1" in capsys.readouterr().err
