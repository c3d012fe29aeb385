"""The app's smaller parts: word diffs, formatting, preferences, timers, icons, themes, the CLI entry point."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from memlens.gui import format as fmt
from memlens.gui.diff import ONLY_NEW_STYLE, SHARED_STYLE, diff_html, overlap_styles, token_highlight_html, word_diff
from memlens.gui.icons import icon, icon_names
from memlens.gui.preferences import MAX_RECENT, Preferences
from memlens.gui.qt import QtCore, QtGui, QtWidgets
from memlens.gui.scheduler import LifecycleScheduler

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


def test_word_diff_marks_changed_words_only():
    parts = word_diff("install with yarn today", "install with pnpm today")
    assert [(p.kind, p.text) for p in parts] == [("same", "install with "), ("delete", "yarn"), ("insert", "pnpm"), ("same", " today")]
    assert word_diff("same text", "same text") == [word_diff("same text", "same text")[0]]
    html = diff_html("a <b> c", "a <b> d")
    assert "&lt;b&gt;" in html and "line-through" in html


def test_token_highlighting_follows_similarity_tokens():
    styles = overlap_styles({"install", "dependencies"}, {"pnpm"}, ONLY_NEW_STYLE)
    html = token_highlight_html("Install dependencies with pnpm!", styles)
    assert f"<span style='{SHARED_STYLE}'>Install</span>" in html
    assert f"<span style='{ONLY_NEW_STYLE}'>pnpm</span>" in html
    assert "with" in html and "<span style" not in html.split("with")[0][-5:]


def test_formatting_helpers():
    assert fmt.relative(NOW - timedelta(days=3), NOW) == "3 days ago"
    assert fmt.relative(NOW + timedelta(hours=5), NOW) == "in 5 h"
    assert fmt.relative(NOW, NOW) == "just now"
    assert fmt.countdown(3599) == "59:59" and fmt.countdown(3600) == "1:00:00" and fmt.countdown(-3) == "0:00"
    assert fmt.plural(1, "memory", "memories") == "1 memory" and fmt.plural(2, "memory", "memories") == "2 memories"
    assert fmt.id_list(range(1, 12), 3) == "#1, #2, #3 and 8 more"
    html = fmt.details_html({"reason": "<x>", "count": 2, "ids": [1, 2]})
    assert "&lt;x&gt;" in html and "1, 2" in html


def test_audit_summaries_read_as_sentences(tmp_path):
    from memlens import MemoryStore

    with MemoryStore.open(tmp_path / "m.db") as store:
        a = store.remember("Use yarn to install dependencies in this project", project="web", now=NOW)
        store.remember("Use pnpm to install dependencies in this project", project="web", now=NOW)
        store.update(a.id, importance=0.9, now=NOW)
        store.forget(a.id, reason="old", now=NOW)
        entries = {e.operation: e for e in store.audit(limit=10)}
    assert fmt.audit_summary(entries["forget"]) == f"forgot 1 memory: #{a.id} - reason: old"
    assert "superseding" in fmt.audit_summary(entries["supersede"])
    assert fmt.audit_summary(entries["update"]) == f"edited #{a.id}: importance 0.50 → 0.90"


def test_preferences_round_trip_and_recent_files(tmp_path):
    settings = QtCore.QSettings(str(tmp_path / "p.ini"), QtCore.QSettings.Format.IniFormat)
    prefs = Preferences.load(settings)
    assert (prefs.refresh_seconds, prefs.sweep_seconds, prefs.theme) == (60, 3600, "system")
    for n in range(MAX_RECENT + 3):
        prefs.add_recent(tmp_path / f"s{n}.db")
    prefs.add_recent(tmp_path / "s5.db")
    prefs.sweep_seconds = 120
    prefs.sweeps_paused = True
    prefs.save(settings)
    again = Preferences.load(QtCore.QSettings(str(tmp_path / "p.ini"), QtCore.QSettings.Format.IniFormat))
    assert again.sweep_seconds == 120 and again.sweeps_paused is True
    assert len(again.recent_files) == MAX_RECENT and again.recent_files[0].endswith("s5.db")
    settings.setValue("sweep_seconds", "not a number")
    assert Preferences.load(settings).sweep_seconds == 3600  # unreadable values keep their defaults


def test_scheduler_pause_resume_and_run_now(qtbot):
    scheduler = LifecycleScheduler(60_000, 3_600_000)
    ticks: list[int] = []
    scheduler.countdown.connect(ticks.append)
    scheduler.start()
    assert scheduler.sweep_timer.isActive() and 3595 <= scheduler.seconds_to_sweep() <= 3600
    with qtbot.waitSignal(scheduler.paused_changed) as blocker:
        scheduler.pause()
    assert blocker.args == [True] and scheduler.seconds_to_sweep() == -1 and ticks[-1] == -1
    with qtbot.waitSignal(scheduler.sweep_due):
        scheduler.run_now()  # still possible while paused
    scheduler.resume()
    assert scheduler.sweep_timer.isActive()
    with qtbot.waitSignal(scheduler.strength_tick, timeout=5000):
        scheduler.set_intervals(60, 3_600_000)
    with qtbot.waitSignal(scheduler.countdown, timeout=3000):
        pass
    scheduler.stop()
    assert not any(t.isActive() for t in (scheduler.refresh_timer, scheduler.sweep_timer, scheduler.countdown_timer))


def test_every_icon_renders_sharp_at_high_dpi(qtbot):
    names = icon_names()
    assert {"forget", "consolidate", "sweep", "time", "working", "episodic", "semantic", "procedural", "audit", "sessions"} <= set(names)
    for name in names:
        if name == "app":
            continue
        ic = icon(name, "#112233")
        sizes = {(s.width(), s.height()) for s in ic.availableSizes()}
        assert (96, 96) in sizes and (16, 16) in sizes
        image = ic.pixmap(48, 48).toImage()
        assert any(image.pixelColor(x, y).alpha() > 0 for x in range(48) for y in range(48)), name


def test_themes_switch_palette(qtbot):
    from memlens.gui import theme

    app = QtWidgets.QApplication.instance()
    original = QtGui.QPalette(app.palette())
    try:
        theme.apply(app, "dark")
        assert theme.is_dark(app.palette())
        theme.apply(app, "light")
        assert not theme.is_dark(app.palette())
    finally:
        app.setPalette(original)
        app.setStyleSheet("")


def test_gui_command_registers_without_importing_qt(tmp_path):
    code = (
        "import sys; import memlens.gui.commands; import memlens.cli; p = memlens.cli.build_parser(); "
        "assert 'PySide6' not in sys.modules, 'PySide6 imported by the CLI'; "
        "a = p.parse_args(['--db', 'x.db', 'gui']); print(a.handler.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "cmd_gui"


def test_no_core_module_imports_the_gui():
    root = Path(__file__).resolve().parent.parent / "core"
    offenders = [str(p) for p in root.rglob("*.py") if "import gui" in p.read_text(encoding="utf-8") or "from gui" in p.read_text(encoding="utf-8")]
    assert offenders == []
