"""Consolidation on a schedule and at session end (issue 13.3): opt-in store settings, an explicit ``now``, never a
session twice (also when two processes race), a cooldown, the hook wiring and ``memlens consolidate --due``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memlens import MemoryStore
from memlens.cli import main
from memlens.consolidate import run
from memlens.consolidation_schedule import (
    COOLDOWN,
    DISABLED,
    NOT_DUE,
    NOTHING_NEW,
    RAN,
    consolidate_after_session,
    consolidate_due,
    next_due_at,
)
from memlens.errors import InvalidInput
from memlens.hooks import handle_event

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
# The offscreen platform says this whenever a window is shown.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")


@pytest.fixture(autouse=True)
def _no_llm_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMLENS_LLM_BASE_URL", "MEMLENS_LLM_MODEL", "MEMLENS_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def record(store: MemoryStore, sid: str, start: datetime, *, end: bool = True) -> None:
    store.observe(sid, "prompt", f"Fix the login check ({sid})", None, event="prompt", project="web", now=start)
    store.observe(sid, "Bash", {"command": "pytest -q"}, "3 passed", project="web", now=start + MINUTE)
    if end:
        store.end_session(sid, now=start + 2 * MINUTE)


def episodes_of(store: MemoryStore, sid: str) -> list[int]:
    return list(store.session(sid).metadata.get("episode_ids", []))


def operations(store: MemoryStore) -> list[str]:
    return [e.operation for e in store.audit(limit=1000)]


def test_the_schedule_is_off_by_default_and_then_writes_nothing(store: MemoryStore, t0):
    record(store, "s1", t0)
    schedule = store.settings.consolidation
    assert (schedule.enabled, schedule.interval_hours, schedule.on_session_end) == (False, 2.0, False)
    before = operations(store)
    result = consolidate_due(store, now=t0 + HOUR)
    assert result.status == DISABLED and result.ok and "--schedule on" in result.summary
    assert episodes_of(store, "s1") == [] and operations(store) == before
    assert next_due_at(store, t0) is None


def test_due_runs_once_per_interval_and_never_consolidates_a_session_twice(store: MemoryStore, t0):
    store.configure({"consolidation": {"enabled": True}}, now=t0)
    record(store, "s1", t0)
    now = t0 + HOUR
    first = consolidate_due(store, now=now)
    assert first.status == RAN and first.report is not None and first.report.sessions == ["s1"]
    assert first.last_run_at == now and first.next_due_at == now + 2 * HOUR

    # The same call again: the interval has not passed, nothing is read or written.
    audit = operations(store)
    again = consolidate_due(store, now=now)
    assert again.status == NOT_DUE and again.next_due_at == now + 2 * HOUR and operations(store) == audit
    assert consolidate_due(store, now=now + 2 * HOUR - MINUTE).status == NOT_DUE

    # Due again but nothing new: a no-op that says so, with no audit entry.
    idle = consolidate_due(store, now=now + 3 * HOUR)
    assert idle.status == NOTHING_NEW and idle.summary == "nothing new to consolidate" and operations(store) == audit
    # Forcing it (the app's "run now") with nothing new is a no-op too.
    assert consolidate_due(store, now=now + 3 * HOUR, force=True).status == NOTHING_NEW
    assert episodes_of(store, "s1") == first.report.episodes

    record(store, "s2", now + 4 * HOUR)
    later = consolidate_due(store, now=now + 5 * HOUR)
    assert later.status == RAN and later.report is not None and later.report.sessions == ["s2"]
    assert len(episodes_of(store, "s1")) == 1 and len(episodes_of(store, "s2")) == 1


def test_a_manual_run_counts_as_the_last_consolidation(store: MemoryStore, t0):
    store.configure({"consolidation": {"enabled": True, "interval_hours": 1}}, now=t0)
    record(store, "s1", t0)
    store.consolidate(now=t0 + HOUR)
    assert consolidate_due(store, now=t0 + HOUR + 30 * MINUTE).status == NOT_DUE
    assert store.audit(limit=1)[0].details["trigger"] == "manual"


def test_two_runs_racing_write_one_episode_per_session(store: MemoryStore, store_location: Path | str, t0):
    """A second process consolidates between this run's reading and its writing: its sessions are skipped."""
    record(store, "s1", t0)
    record(store, "s2", t0 + MINUTE)
    now = t0 + HOUR
    raced: list[list[str]] = []

    def progress(done: int, total: int, stage: str) -> None:
        if stage == "knowledge" and not raced:
            with MemoryStore.open(store_location) as other:
                raced.append(run(other, now=now, llm=None, from_env=False).sessions)

    report = run(store, now=now, llm=None, from_env=False, progress=progress)
    assert raced == [["s1", "s2"]]
    assert report.ok and report.sessions == [] and report.skipped_sessions == ["s1", "s2"]
    assert len(episodes_of(store, "s1")) == 1 and len(episodes_of(store, "s2")) == 1
    episodes = [m for m in store.list_memories(layers=["episodic"], limit=100)]
    assert len(episodes) == 2


def test_session_end_respects_the_opt_in_and_the_cooldown(store: MemoryStore, t0):
    record(store, "s1", t0)
    off = consolidate_after_session(store, "s1", now=t0 + 3 * MINUTE)
    assert off.status == DISABLED and episodes_of(store, "s1") == []

    store.configure({"consolidation": {"on_session_end": True, "cooldown_minutes": 30}}, now=t0)
    first = consolidate_after_session(store, "s1", now=t0 + 3 * MINUTE)
    assert first.status == RAN and first.trigger == "session_end" and len(episodes_of(store, "s1")) == 1
    assert consolidate_after_session(store, "s1", now=t0 + 4 * MINUTE).status == NOTHING_NEW  # already consolidated

    record(store, "s2", t0 + 10 * MINUTE)
    cooling = consolidate_after_session(store, "s2", now=t0 + 12 * MINUTE)
    assert cooling.status == COOLDOWN and "s2" in cooling.summary and episodes_of(store, "s2") == []

    record(store, "s3", t0 + 40 * MINUTE)
    after = consolidate_after_session(store, "s3", now=t0 + 42 * MINUTE)
    assert after.status == RAN and after.report is not None and after.report.sessions == ["s2", "s3"]  # s2 waited
    assert store.audit(limit=1)[0].details["trigger"] == "session_end"


def test_the_stop_hook_consolidates_only_when_asked_to(store: MemoryStore, t0):
    record(store, "s1", t0, end=False)
    handle_event(store, {"session_id": "s1"}, event_name="Stop", now=t0 + 5 * MINUTE)
    assert store.session("s1").ended_at is not None and episodes_of(store, "s1") == []

    store.configure({"consolidation": {"on_session_end": True}}, now=t0)
    record(store, "s2", t0 + 10 * MINUTE, end=False)
    handle_event(store, {"session_id": "s2"}, event_name="SessionEnd", now=t0 + 15 * MINUTE)
    assert len(episodes_of(store, "s1")) == 1 and len(episodes_of(store, "s2")) == 1


def test_schedule_settings_are_validated_and_change_field_by_field(store: MemoryStore, t0):
    store.configure({"consolidation": {"enabled": True, "interval_hours": 6}}, now=t0)
    store.configure({"consolidation": {"cooldown_minutes": 5}}, now=t0)
    assert store.settings.consolidation.to_dict() == {"enabled": True, "interval_hours": 6.0, "on_session_end": False, "cooldown_minutes": 5.0}
    for bad in ({"interval_hours": 0}, {"cooldown_minutes": -1}, {"enabled": "yes"}, {"interval_hours": float("nan")}):
        with pytest.raises(InvalidInput, match="consolidation"):
            store.configure({"consolidation": bad}, now=t0)


def test_cli_consolidate_due(capsys, store_location: Path | str, store: MemoryStore, t0):
    record(store, "s1", t0)
    store.close()
    db = ["--db", str(store_location)]
    when = (t0 + HOUR).isoformat()
    assert main([*db, "consolidate", "--due", "--now", when, "--yes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("disabled: ") and out.count("\n") == 1

    assert main([*db, "consolidate", "--schedule", "on", "--every", "3", "--now", when, "--yes"]) == 0
    assert "every 3 h" in capsys.readouterr().out
    assert main([*db, "consolidate", "--due", "--now", when, "--yes", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "ran" and data["report"]["sessions"] == ["s1"] and data["next_due_at"] == (t0 + 4 * HOUR).isoformat()
    assert main([*db, "consolidate", "--due", "--now", when, "--yes"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("not_due: ") and line.count("\n") == 1


# --- the app: the consolidation timer beside the sweep timer ---------------------------------------------------


def scheduled_store(path: Path, now: datetime, *, enabled: bool = True) -> Path:
    with MemoryStore.open(path) as store:
        record(store, "s1", now - 3 * HOUR)
        store.configure({"consolidation": {"enabled": enabled, "interval_hours": 2}}, now=now - 3 * HOUR)
    return path


def audit_triggers(path: Path) -> list[str]:
    with MemoryStore.open(path) as store:
        return [e.details.get("trigger", "") for e in store.audit(limit=100) if e.operation == "consolidate"]


def test_the_app_runs_the_schedule_with_a_countdown_pause_and_run_now(qtbot, make_window, tmp_path: Path):
    from gui_support import NOW

    path = scheduled_store(tmp_path / "s.db", NOW)
    window = make_window(path)
    button = window.status.consolidation_button
    # Never consolidated: due at once; the timer's first shot runs it, then the countdown shows a whole interval.
    qtbot.waitUntil(lambda: audit_triggers(path) == ["schedule"], timeout=15000)
    qtbot.waitUntil(lambda: button.text() == "Next consolidation in 2 h" or button.text().startswith("Next consolidation in 2"), timeout=15000)
    timer = window.findChild(type(window.scheduler.sweep_timer), "consolidationTimer")
    assert timer is window.scheduler.consolidation_timer and timer.isActive() and timer.interval() == 2 * 3_600_000
    assert button.isVisible() and button.objectName() == "consolidationCountdown" and button.accessibleName()
    assert window.status.countdown_label.text().startswith("Next sweep in")  # beside the sweep's countdown

    # Pause: the timer stops, the label says so, and the choice is remembered.
    window.status.consolidation_pause.trigger()
    qtbot.waitUntil(lambda: button.text() == "Scheduled consolidation paused")
    assert not timer.isActive() and window.prefs.consolidation_paused and window.status.consolidation_pause.isChecked()
    window.status.consolidation_pause.trigger()
    qtbot.waitUntil(lambda: timer.isActive() and button.text().startswith("Next consolidation in"))
    assert not window.prefs.consolidation_paused

    # Run now: consolidates what is waiting whatever the interval says.
    with MemoryStore.open(path) as store:
        record(store, "s2", NOW - HOUR)
    window.status.consolidation_run_now.trigger()
    qtbot.waitUntil(lambda: audit_triggers(path) == ["schedule", "schedule"], timeout=15000)
    with MemoryStore.open(path) as store:
        assert len(episodes_of(store, "s1")) == 1 and len(episodes_of(store, "s2")) == 1
    qtbot.waitUntil(lambda: not window.tasks.is_busy())


def test_the_app_shows_no_consolidation_timer_while_the_schedule_is_off(qtbot, make_window, tmp_path: Path):
    from gui_support import NOW

    path = scheduled_store(tmp_path / "s.db", NOW, enabled=False)
    window = make_window(path)
    assert not window.scheduler.consolidation_timer.isActive() and window.scheduler.seconds_to_consolidation() is None
    assert not window.status.consolidation_button.isVisible()
    # Turned on in another process (memlens consolidate --schedule on): the app notices and starts the timer.
    with MemoryStore.open(path) as store:
        store.configure({"consolidation": {"enabled": True}}, now=NOW)
    qtbot.waitUntil(lambda: window.status.consolidation_button.isVisible(), timeout=15000)
    qtbot.waitUntil(lambda: audit_triggers(path) == ["schedule"], timeout=15000)
    qtbot.waitUntil(lambda: not window.tasks.is_busy())


def test_the_settings_dialog_edits_the_schedule(qtbot, tmp_path: Path):
    from memlens.config import StoreSettings
    from memlens.gui.dialogs import SettingsDialog
    from memlens.gui.preferences import Preferences

    dialog = SettingsDialog(Preferences(consolidation_paused=True), StoreSettings())
    qtbot.addWidget(dialog)
    assert dialog.store_changes() == {}  # opening and saving changes nothing
    dialog.consolidation_enabled.setChecked(True)
    dialog.consolidation_hours.setValue(4)
    dialog.consolidation_session_end.setChecked(True)
    dialog.consolidation_cooldown.setValue(10)
    assert dialog.store_changes() == {"consolidation": {"enabled": True, "interval_hours": 4.0, "on_session_end": True, "cooldown_minutes": 10.0}}
    assert dialog.new_preferences().consolidation_paused  # the person's pause survives a save
    assert not SettingsDialog(Preferences(), None).findChild(type(dialog.consolidation_enabled.parentWidget()), "settingsConsolidation").isEnabled()
