"""The inspector's flows, driven through the real widgets (offscreen): browse, search, forget, supersede preview,
edit, consolidate, sweep timers, live refresh, time travel, errors, settings, import/export."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from gui_support import NOW, select_memory, select_view, wait_idle

from memlens import MemoryStore
from memlens.gui.audit_view import AuditView
from memlens.gui.consolidate_dialog import ConsolidateDialog
from memlens.gui.dialogs import EditDialog, ForgetDialog, SettingsDialog, SweepPreviewDialog
from memlens.gui.main_window import MainWindow
from memlens.gui.memory_model import ID_ROLE, SNIPPET_ROLE
from memlens.gui.new_memory_dialog import NewMemoryDialog
from memlens.gui.qt import QtCore, QtWidgets

# The offscreen platform plugin says this whenever a top-level window is shown; it is not about our code.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")



def open_store(path: Path) -> MemoryStore:
    return MemoryStore.open(path, create=False)


# --- browsing ------------------------------------------------------------------------------------------------------


def test_opens_with_counts_rows_and_detail(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    with open_store(demo_path) as store:
        counts = store.layer_counts(now=NOW)
        chain = next(m for m in store.list_memories(layers=["semantic"], limit=500, now=NOW) if m.version >= 3)
        history = store.history(chain.id)
    for layer, n in counts.items():
        assert window.sidebar.count_text(layer) == f"{n:,}"
    select_view(qtbot, window, "semantic")
    assert window.model.rowCount() == counts["semantic"]
    assert window.count_label.text().startswith(f"{counts['semantic']} memories")

    select_memory(qtbot, window, chain.id)
    assert window.detail.title.text().startswith(f"#{chain.id}")
    assert chain.content in window.detail.browser.toPlainText()
    assert "In plain words" in window.detail.browser.toPlainText()
    # Version chain: every version in order, the supersede similarity, and a word diff per neighbouring pair.
    assert window.detail.version_list.count() == len(history)
    assert all(f"v{v.version}" in window.detail.version_list.item(i).text() for i, v in enumerate(history))
    diff = window.detail.diff_browser.toPlainText()
    assert "v1 → v2" in diff and f"similarity {history[1].supersede_similarity:.2f}" in diff
    assert "<span style='background-color:rgba(248,81,73" in window.detail.diff_browser.toHtml() or "line-through" in window.detail.diff_browser.toHtml()
    # Strength curve: past, projection and the threshold line.
    names = [s.name() for s in window.detail.chart.chart.series()]
    assert "strength (past)" in names and "projected" in names and any(n.startswith("threshold") for n in names)

    # Clicking a version shows that version.
    old = history[0]
    item = window.detail.version_list.item(0)
    window.detail.tabs.setCurrentIndex(1)
    with qtbot.waitSignal(window.detail_shown, timeout=10000, check_params_cb=lambda i: i == old.id):
        window.detail.version_list.itemClicked.emit(item)
    assert window.detail.data is not None and window.detail.data.memory.id == old.id
    assert "superseded" in window.detail.badges.text()


def test_lazy_table_filters_and_sort(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    select_view(qtbot, window, "all")
    with open_store(demo_path) as store:
        total = store.count_memories(now=NOW)
        pinned = store.count_memories(pinned=True, now=NOW)
        all_versions = store.count_memories(latest_only=False, now=NOW)
    assert window.model.total == total
    assert window.model.rowCount() == total  # every id is listed; contents load in blocks as rows are painted
    window.pinned_filter.setChecked(True)
    wait_idle(qtbot, window)
    assert window.model.rowCount() == pinned and all(window.model.memory_at(r).pinned for r in range(pinned))
    window.pinned_filter.setChecked(False)
    window.all_versions.setChecked(True)
    wait_idle(qtbot, window)
    assert window.model.total == all_versions
    # Sorting by strength orders the loaded rows exactly by computed strength.
    select_view(qtbot, window, "semantic")
    from memlens.gui.memory_model import COLUMN_INDEX, STRENGTH_ROLE

    window.table.sortByColumn(COLUMN_INDEX["strength"], QtCore.Qt.SortOrder.AscendingOrder)
    wait_idle(qtbot, window)
    values = [window.model.index(r, 0).data(STRENGTH_ROLE) for r in range(window.model.rowCount())]
    assert values == sorted(values) and len(values) > 5


def test_search_is_debounced_and_highlights_matches(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    select_view(qtbot, window, "semantic")
    qtbot.keyClick(window, QtCore.Qt.Key.Key_F, QtCore.Qt.KeyboardModifier.ControlModifier)
    assert window.search_box.hasFocus()
    qtbot.keyClicks(window.search_box, "pnpm")
    assert window.search_timer.isActive()  # debounced: nothing searched per keystroke
    with qtbot.waitSignal(window.model.loaded, timeout=10000):
        pass
    wait_idle(qtbot, window)
    assert window.model.query.text == "pnpm"
    assert window.model.rowCount() >= 1
    assert window.model.headerData(1, QtCore.Qt.Orientation.Horizontal) == "Match"
    snippet = window.model.index(0, 1).data(SNIPPET_ROLE)
    assert "«pnpm»" in snippet.lower()
    memory_id = window.model.index(0, 0).data(ID_ROLE)
    select_memory(qtbot, window, memory_id)
    assert "rgba(255,200,0" in window.detail.browser.toHtml().replace(" ", "")


# --- forget ----------------------------------------------------------------------------------------------------


def test_forget_one_with_reason_is_reflected_everywhere(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    select_view(qtbot, window, "semantic")
    with open_store(demo_path) as store:
        chain = next(m for m in store.list_memories(layers=["semantic"], limit=500, now=NOW) if m.version >= 2)
        versions = store.history(chain.id)
        before = store.layer_counts(now=NOW)["semantic"]
    select_memory(qtbot, window, chain.id)
    window.table.setFocus()
    qtbot.keyClick(window.table, QtCore.Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: isinstance(window.dialog, ForgetDialog))
    dialog = window.dialog
    assert isinstance(dialog, ForgetDialog)
    assert f"#{chain.id}" in dialog.findChild(QtWidgets.QLabel, "forgetList").text()
    assert dialog.whole_chain.isEnabled() and f"{len(versions) - 1} versions" in dialog.whole_chain.text()
    assert "become latest again" in dialog.consequence.text()
    dialog.whole_chain.setChecked(True)
    assert f"{len(versions)} memory versions" in dialog.consequence.text()
    qtbot.keyClicks(dialog.reason, "outdated tooling note")
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        qtbot.mouseClick(dialog.forget_button, QtCore.Qt.MouseButton.LeftButton)
    wait_idle(qtbot, window)
    with open_store(demo_path) as store:
        assert not any(store.exists(v.id) for v in versions)
        entry = store.audit(operation="forget", limit=1)[0]
        assert entry.details["reason"] == "outdated tooling note" and entry.details["whole_chain"] is True
    assert window.model.row_of(chain.id) == -1
    assert window.sidebar.count_text("semantic") == f"{before - 1:,}"
    # The detail pane moved on to the row that took the forgotten one's place.
    assert window.detail.data is None or window.detail.data.memory.id not in {v.id for v in versions}


def test_forget_many_selected(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    select_view(qtbot, window, "working")
    ids = [window.model.index(r, 0).data(ID_ROLE) for r in range(3)]
    selection = window.table.selectionModel()
    for r in range(3):
        selection.select(window.model.index(r, 0), QtCore.QItemSelectionModel.SelectionFlag.Select | QtCore.QItemSelectionModel.SelectionFlag.Rows)
    assert window.selected_ids() == ids
    window.act_forget.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, ForgetDialog))
    dialog = window.dialog
    assert "Erase 3 memories" in dialog.findChild(QtWidgets.QLabel, "forgetHeading").text()
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        dialog.forget_button.click()
    wait_idle(qtbot, window)
    with open_store(demo_path) as store:
        assert store.get_many(ids) == []
    assert all(window.model.row_of(i) == -1 for i in ids)


def test_cancelled_forget_erases_nothing(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    select_view(qtbot, window, "semantic")
    memory_id = window.model.index(0, 0).data(ID_ROLE)
    select_memory(qtbot, window, memory_id)
    window.detail.forget_button.click()
    qtbot.waitUntil(lambda: isinstance(window.dialog, ForgetDialog))
    window.dialog.reject()
    with open_store(demo_path) as store:
        assert store.exists(memory_id)


# --- supersede preview -----------------------------------------------------------------------------------------


def _new_memory_dialog(qtbot, window: MainWindow) -> NewMemoryDialog:
    window.act_new_memory.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, NewMemoryDialog))
    return window.dialog  # type: ignore[return-value]


def test_supersede_preview_then_save(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    with open_store(demo_path) as store:
        target = store.search("Postgres port", project="etl-pipeline", now=NOW)[0].memory
    dialog = _new_memory_dialog(qtbot, window)
    dialog.project.setCurrentText("etl-pipeline")
    with qtbot.waitSignal(dialog.previewed, timeout=10000, check_params_cb=lambda p: p is not None):
        qtbot.keyClicks(dialog.text, "The etl-pipeline loads data into Postgres on port 6432")
    preview = dialog.preview
    assert preview.action == "supersede" and preview.target.id == target.id
    assert f"Supersedes #{target.id}" in dialog.decision.text()
    assert f"{preview.similarity:.2f}" in dialog.decision.text() and f"{preview.threshold:.2f}" in dialog.decision.text()
    assert dialog.bar.similarity == pytest.approx(preview.similarity)
    assert "6432" in dialog.candidate_view.toPlainText() and "5433" in dialog.target_view.toPlainText()
    html = dialog.candidate_view.toHtml()
    assert "rgba(46,160,67" in html.replace(" ", "") and "rgba(56,139,253" in html.replace(" ", "")
    assert dialog.save_button.text() == f"Save as new version of #{target.id}"
    assert dialog.separate_button.isVisible()
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        dialog.save_button.click()
    wait_idle(qtbot, window)
    with open_store(demo_path) as store:
        latest = store.latest_of(target.id)
        assert latest.id != target.id and latest.parent_id == target.id and "6432" in latest.content
        assert latest.origin == "user"
    qtbot.waitUntil(lambda: window.detail.data is not None and window.detail.data.memory.id == latest.id)


def test_supersede_preview_save_as_separate_and_similar(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    with open_store(demo_path) as store:
        target = store.search("Postgres port", project="etl-pipeline", now=NOW)[0].memory
    dialog = _new_memory_dialog(qtbot, window)
    dialog.project.setCurrentText("etl-pipeline")
    with qtbot.waitSignal(dialog.previewed, timeout=10000, check_params_cb=lambda p: p is not None):
        dialog.set_text("The etl-pipeline loads data into Postgres on port 7777")
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        dialog.separate_button.click()
    wait_idle(qtbot, window)
    with open_store(demo_path) as store:
        assert store.get(target.id).is_latest  # not superseded
        separate = store.search("7777", now=NOW)[0].memory
        assert separate.parent_id is None

    dialog = _new_memory_dialog(qtbot, window)
    dialog.project.setCurrentText("shop-web")
    dialog.type.setCurrentText("pattern")
    with qtbot.waitSignal(dialog.previewed, timeout=10000, check_params_cb=lambda p: p is not None and p.action != "new"):
        dialog.set_text("Always run the formatter and the unit tests before pushing to main")
    assert dialog.preview.action == "similar"
    assert "Similar to #" in dialog.decision.text()
    assert not dialog.separate_button.isVisible()
    dialog.reject()


def test_preview_of_empty_text_offers_nothing(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    dialog = _new_memory_dialog(qtbot, window)
    assert not dialog.save_button.isEnabled()
    with qtbot.waitSignal(dialog.previewed, timeout=5000, check_params_cb=lambda p: p is None):
        dialog.set_text("   ")
    assert not dialog.save_button.isEnabled()


# --- edit and pin ----------------------------------------------------------------------------------------------


def test_edit_importance_tags_and_pin(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    select_view(qtbot, window, "semantic")
    memory_id = next(window.model.memory_at(r).id for r in range(window.model.rowCount()) if not window.model.memory_at(r).pinned)
    select_memory(qtbot, window, memory_id)
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        window.detail.pin_button.click()
    wait_idle(qtbot, window)
    with open_store(demo_path) as store:
        assert store.get(memory_id).pinned
    assert window.detail.pin_button.isChecked()

    window.act_edit.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, EditDialog))
    dialog = window.dialog
    dialog.importance.setValue(0.35)
    dialog.tags.setText("alpha, beta")
    dialog.pinned.setChecked(False)
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        dialog.findChild(QtWidgets.QPushButton, "editSave").click()
    wait_idle(qtbot, window)
    with open_store(demo_path) as store:
        m = store.get(memory_id)
    assert (m.importance, m.tags, m.pinned) == (0.35, ("alpha", "beta"), False)
    assert "alpha, beta" in window.detail.browser.toPlainText()


# --- consolidate -----------------------------------------------------------------------------------------------


@pytest.fixture
def sessions_path(tmp_path: Path) -> Path:
    """A store with finished sessions waiting to be consolidated."""
    path = tmp_path / "sessions" / "memory.db"
    with MemoryStore.open(path) as store:
        for n in range(3):
            sid = f"s{n}"
            t = NOW - timedelta(days=3 - n)
            store.observe(sid, "Bash", {"command": "pytest -q"}, "12 passed", project="web", now=t)
            store.observe(sid, "Edit", {"file_path": "app.py"}, "ok", project="web", now=t + timedelta(minutes=2))
            store.end_session(sid, now=t + timedelta(minutes=5))
    return path


def test_consolidate_button_runs_in_background_and_lists_results(qtbot, make_window, sessions_path, monkeypatch):
    monkeypatch.delenv("MEMLENS_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("MEMLENS_LLM_MODEL", raising=False)
    window = make_window(sessions_path)
    button = window.findChild(QtWidgets.QToolBar, "mainToolbar").widgetForAction(window.act_consolidate)
    with qtbot.waitSignal(window.consolidate_finished, timeout=20000) as blocker:
        qtbot.mouseClick(button, QtCore.Qt.MouseButton.LeftButton)
    report = blocker.args[0]
    wait_idle(qtbot, window)
    dialog = window.dialog
    assert isinstance(dialog, ConsolidateDialog)
    assert report.method == "deterministic" and not report.llm_configured and len(report.episodes) == 3
    assert "deterministic" in dialog.heading.text()
    assert "No LLM is configured" in dialog.llm_label.text()
    top = dialog.results.topLevelItem(0)
    assert top.text(0) == "Episodes written (3)" and top.childCount() == 3
    child = top.child(0)
    episode_id = child.data(0, QtCore.Qt.ItemDataRole.UserRole)
    assert child.text(0).startswith(f"#{episode_id} ")
    with qtbot.waitSignal(window.detail_shown, timeout=10000, check_params_cb=lambda i: i == episode_id):
        dialog.results.itemDoubleClicked.emit(child, 0)
    assert window.sidebar.count_text("episodic") == "3"


def test_consolidate_with_unreachable_llm_says_so(qtbot, make_window, sessions_path, monkeypatch):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    window = make_window(sessions_path)
    window.prefs.llm_base_url = f"http://127.0.0.1:{port}/v1"
    window.prefs.llm_model = "test-model"
    with qtbot.waitSignal(window.error_shown, timeout=20000) as blocker:
        window.act_consolidate.trigger()
    wait_idle(qtbot, window)
    assert "refused" in blocker.args[0] or "reach" in blocker.args[0]
    assert "nothing was written" in window.dialog.heading.text().lower()
    with open_store(sessions_path) as store:
        assert store.layer_counts(now=NOW)["episodic"] == 0  # nothing lost, nothing half-written


def test_half_configured_llm_is_refused_clearly(qtbot, make_window, sessions_path):
    window = make_window(sessions_path)
    window.prefs.llm_base_url = "http://127.0.0.1:1/v1"
    window.prefs.llm_model = ""
    with qtbot.waitSignal(window.error_shown, timeout=5000) as blocker:
        window.act_consolidate.trigger()
    assert "half configured" in blocker.args[0]


# --- sweeps and timers -----------------------------------------------------------------------------------------


@pytest.fixture
def decayed_path(tmp_path: Path) -> Path:
    """A store with a faded chitchat, an expired fact, a pinned chitchat and a fresh fact."""
    path = tmp_path / "decayed" / "memory.db"
    with MemoryStore.open(path) as store:
        store.remember("The user said hello and talked about the weather", type="chitchat", now=NOW - timedelta(days=3))
        store.remember("A temporary staging password rotates daily", ttl_days=1, now=NOW - timedelta(days=2))
        store.remember("The user likes the blue theme in the editor", type="chitchat", pinned=True, now=NOW - timedelta(days=3))
        store.remember("The API lives at https://api.example.com", now=NOW - timedelta(days=1))
    return path


def test_sweep_timer_fires_a_background_sweep(qtbot, make_window, decayed_path):
    window = make_window(decayed_path)
    assert window.countdown_label.text().startswith("Next sweep in")
    timer = window.findChild(QtCore.QTimer, "sweepTimer")
    assert timer is window.scheduler.sweep_timer and timer.isActive()
    with qtbot.waitSignal(window.sweep_finished, timeout=10000) as blocker:
        window.scheduler.set_intervals(60_000, 100)  # short interval: the timer itself fires the sweep
    report = blocker.args[0]
    assert {d.rule for d in report.decisions} == {"weak", "ttl"}
    wait_idle(qtbot, window)
    with open_store(decayed_path) as store:
        assert store.count_memories(latest_only=False, include_expired=True, now=NOW) == 2
        pinned = store.list_memories(pinned=True, now=NOW)
        assert len(pinned) == 1  # pinned memories are never swept
    assert window.sidebar.count_text("semantic") == "2"


def test_sweep_preview_pause_resume_and_run_now(qtbot, make_window, decayed_path):
    window = make_window(decayed_path)
    with qtbot.waitSignal(window.sweep_previewed, timeout=10000) as blocker:
        window.act_sweep_preview.trigger()
    assert len(blocker.args[0].decisions) == 2 and blocker.args[0].dry_run
    dialog = window.dialog
    assert isinstance(dialog, SweepPreviewDialog) and dialog.table.model().rowCount() == 2
    assert "Nothing has been changed" in dialog.findChild(QtWidgets.QLabel, "sweepPreviewSummary").text()
    dialog.close()
    with open_store(decayed_path) as store:
        assert store.count_memories(latest_only=False, include_expired=True, now=NOW) == 4

    window.act_pause.trigger()
    assert window.scheduler.is_paused() and not window.scheduler.sweep_timer.isActive()
    qtbot.waitUntil(lambda: window.countdown_label.text() == "Automatic sweeps paused")
    assert window.settings.value("sweeps_paused") in (True, "true")
    window.act_pause.trigger()
    assert window.scheduler.sweep_timer.isActive()
    with qtbot.waitSignal(window.sweep_finished, timeout=10000) as blocker:
        window.act_sweep.trigger()
    assert len(blocker.args[0].decisions) == 2


def test_strength_timer_repaints(qtbot, make_window, decayed_path):
    window = make_window(decayed_path)
    assert window.findChild(QtCore.QTimer, "strengthRefreshTimer").interval() == 60_000
    # A short interval: the timer ticks, strengths are repainted and the counts reloaded (TTLs may have run out).
    with qtbot.waitSignals([window.scheduler.strength_tick, window.counts_loaded], order="strict", timeout=10000):
        window.scheduler.set_intervals(100, 3_600_000)


# --- live view -------------------------------------------------------------------------------------------------


def test_live_refresh_after_another_process_writes(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    window.live_timer.setInterval(100)
    select_view(qtbot, window, "semantic")
    memory_id = window.model.index(3, 0).data(ID_ROLE)
    select_memory(qtbot, window, memory_id)
    before = int(window.sidebar.count_text("semantic").replace(",", ""))
    # Another process (the agent) writes through the CLI.
    subprocess.run(
        [sys.executable, "-m", "memlens", "--db", str(demo_path), "remember", "The staging cluster moved to eu-west-3", "--now", NOW.isoformat(), "--yes"],
        check=True,
        capture_output=True,
    )
    qtbot.waitUntil(lambda: window.sidebar.count_text("semantic") == f"{before + 1:,}", timeout=10000)
    wait_idle(qtbot, window)
    assert any("eu-west-3" in window.model.memory_at(r).content for r in range(window.model.rowCount()))
    # The selection and the open detail survived the refresh.
    assert window.selected_ids() == [memory_id]
    assert window.detail.data is not None and window.detail.data.memory.id == memory_id
    assert window.live_label.text().startswith("updated")


# --- time travel -----------------------------------------------------------------------------------------------


def test_time_travel_previews_a_later_date_read_only(qtbot, make_window, decayed_path):
    window = make_window(decayed_path)
    select_view(qtbot, window, "semantic")
    with open_store(decayed_path) as store:
        fresh = store.search("api.example.com", now=NOW)[0].memory
    select_memory(qtbot, window, fresh.id)
    strength_now = window.detail.data.strength
    index = window.travel_combo.findText("In 1 month")
    with qtbot.waitSignal(window.time_travel_changed, timeout=5000):
        window.travel_combo.setCurrentIndex(index)
        window.travel_combo.activated.emit(index)
    assert window.travel_banner.isVisible() and not window.act_forget.isEnabled() and not window.act_new_memory.isEnabled()
    assert not window.detail.forget_button.isEnabled()
    qtbot.waitUntil(lambda: window.travel_list_button.isEnabled(), timeout=10000)
    wait_idle(qtbot, window)
    assert "would forget" in window.travel_text.text()
    # The expired fact is gone from the table at that date; strength has decayed.
    assert window.now() == NOW + timedelta(days=30)
    assert all("password" not in window.model.memory_at(r).content for r in range(window.model.rowCount()))
    qtbot.waitUntil(lambda: window.detail.data is not None and window.detail.data.now == NOW + timedelta(days=30))
    assert window.detail.data.strength < strength_now
    window.travel_list_button.click()
    assert isinstance(window.dialog, SweepPreviewDialog)
    window.dialog.close()
    with open_store(decayed_path) as store:
        assert store.count_memories(latest_only=False, include_expired=True, now=NOW) == 4  # nothing written
    with qtbot.waitSignal(window.time_travel_changed, timeout=5000):
        window.act_back_to_now.trigger()
    assert not window.travel_banner.isVisible() and window.act_forget.isEnabled()


# --- audit and sessions ----------------------------------------------------------------------------------------


def test_audit_view_filters_and_goes_to_forgotten_target(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    select_view(qtbot, window, "audit")
    audit: AuditView = window.audit_view
    assert audit.model.rowCount() > 50
    index = audit.operation.findData("forget")
    audit.operation.setCurrentIndex(index)
    wait_idle(qtbot, window)
    entries = [audit.model.entry_at(r) for r in range(audit.model.rowCount())]
    assert entries and all(e.operation == "forget" for e in entries)
    audit.table.selectRow(0)
    assert "reason" in audit.details.toPlainText()
    target = entries[0].target_ids[0]
    with qtbot.waitSignal(window.detail_shown, timeout=10000, check_params_cb=lambda i: i == target):
        audit.table.doubleClicked.emit(audit.model.index(0, 0))
    assert window.pages.currentWidget() is window.memory_splitter
    assert "was forgotten on" in window.detail.browser.toPlainText()
    assert entries[0].details["reason"] in window.detail.browser.toPlainText()

    select_view(qtbot, window, "audit")
    audit.operation.setCurrentIndex(0)
    audit.target.setText("#abc")
    audit.target.editingFinished.emit()
    assert "must be a memory id" in audit.message.text()


def test_sessions_view_shows_observations_and_episode(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    select_view(qtbot, window, "sessions")
    view = window.sessions_view
    assert view.model.rowCount() > 5
    with open_store(demo_path) as store:
        row = next(r for r in range(view.model.rowCount()) if store.session_memories(view.model.session_at(r).id, layers=["episodic"])
                   and store.session_memories(view.model.session_at(r).id, layers=["working"]))
        session = view.model.session_at(row)
        observations = store.session_memories(session.id, layers=["working"])
    view.table.selectRow(row)
    qtbot.waitUntil(lambda: view.contents is not None and view.contents.session.id == session.id)
    assert view.observations.count() == len(observations)
    assert [view.observations.item(i).data(QtCore.Qt.ItemDataRole.UserRole) for i in range(len(observations))] == [m.id for m in observations]
    assert "Session " + session.id in view.summary.toPlainText()
    first = view.observations.item(0)
    with qtbot.waitSignal(window.detail_shown, timeout=10000, check_params_cb=lambda i: i == observations[0].id):
        view.observations.itemDoubleClicked.emit(first)


# --- empty store, errors, settings, files ----------------------------------------------------------------------


def test_empty_store_offers_the_demo(qtbot, make_window, tmp_path):
    path = tmp_path / "empty" / "memory.db"
    window = make_window(path, create=True)
    assert window.is_empty and window.table_stack.currentWidget() is window.empty_state
    with qtbot.waitSignal(window.write_finished, timeout=60000, check_params_cb=lambda name: name == "demo"):
        window.empty_state.demo_button.click()
    wait_idle(qtbot, window)
    assert not window.is_empty and window.table_stack.currentWidget() is window.table
    assert all(int(window.sidebar.count_text(layer)) > 0 for layer in ("working", "episodic", "semantic", "procedural"))


def test_errors_are_clear_messages_and_nothing_is_lost(qtbot, make_window, demo_path, tmp_path):
    window = make_window(demo_path)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all")
    with qtbot.waitSignal(window.error_shown, timeout=10000) as blocker:
        window.open_store(junk, create=False)
    assert "not a SQLite database" in blocker.args[0]
    assert window.path == demo_path and window.reader is not None  # the open store stayed open
    assert junk.read_bytes() == b"not a database at all"
    box = window.findChild(QtWidgets.QMessageBox, "errorMessage")
    assert box is not None and "not a SQLite database" in box.text()
    box.close()

    newer = tmp_path / "newer.db"
    with MemoryStore.open(newer):
        pass
    conn = sqlite3.connect(newer)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    with qtbot.waitSignal(window.error_shown, timeout=10000) as blocker:
        window.open_store(newer, create=False)
    assert "newer memlens" in blocker.args[0]

    corrupt = tmp_path / "corrupt.db"
    with MemoryStore.open(corrupt) as store:
        store.remember("a fact that will be damaged")
    data = bytearray(corrupt.read_bytes())
    for i in range(100, len(data), 7):
        data[i] = 0xAB
    corrupt.write_bytes(bytes(data))
    with qtbot.waitSignal(window.error_shown, timeout=10000) as blocker:
        window.open_store(corrupt, create=False)
    assert "is damaged" in blocker.args[0]
    assert corrupt.read_bytes() == bytes(data)  # refused without writing
    assert window.path == demo_path


def test_locked_store_write_is_reported(qtbot, make_window, demo_path, monkeypatch):
    import memlens.db

    monkeypatch.setattr(memlens.db, "BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(memlens.db, "LOCK_RETRY_SECONDS", 0.2)
    window = make_window(demo_path)
    select_view(qtbot, window, "semantic")
    memory_id = window.model.index(0, 0).data(ID_ROLE)
    select_memory(qtbot, window, memory_id)
    # Another connection holds the write lock (same SQLite library: locks are per library within one process).
    blocker_conn = memlens.db.sqlite.connect(str(demo_path), isolation_level=None)
    blocker_conn.execute("BEGIN IMMEDIATE")
    try:
        with qtbot.waitSignal(window.error_shown, timeout=20000) as blocker:
            window.detail.pin_button.click()
    finally:
        blocker_conn.execute("ROLLBACK")
        blocker_conn.close()
    assert "locked" in blocker.args[0]
    with open_store(demo_path) as store:
        assert not store.get(memory_id).pinned


def test_settings_are_persisted_and_applied(qtbot, make_window, demo_path, gui_settings):
    window = make_window(demo_path)
    window.act_settings.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, SettingsDialog))
    dialog = window.dialog
    dialog.sweep_minutes.setValue(15)
    dialog.refresh_minutes.setValue(2)
    dialog.supersede.setValue(0.8)
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    with qtbot.waitSignal(window.write_finished, timeout=10000, check_params_cb=lambda n: n == "configure"):
        dialog.findChild(QtWidgets.QPushButton, "settingsSave").click()
    assert window.scheduler.sweep_timer.interval() == 15 * 60 * 1000
    assert window.scheduler.refresh_timer.interval() == 2 * 60 * 1000
    with open_store(demo_path) as store:
        assert store.settings.supersede_threshold == 0.8
    assert int(gui_settings.value("sweep_seconds")) == 900 and gui_settings.value("theme") == "dark"
    app = QtWidgets.QApplication.instance()
    assert app.palette().color(app.palette().ColorRole.Window).lightness() < 100
    window.set_theme("light")
    from memlens.gui.memory_model import COLUMN_INDEX

    window.table.horizontalHeader().hideSection(COLUMN_INDEX["expires"])
    select_view(qtbot, window, "procedural")
    window.close()
    assert isinstance(gui_settings.value("window/geometry"), QtCore.QByteArray)

    again = make_window(demo_path, size=None)
    assert again.prefs.sweep_seconds == 900 and again.prefs.theme == "light"
    assert again.sidebar.current_view() == "procedural"
    assert again.table.horizontalHeader().isSectionHidden(COLUMN_INDEX["expires"])
    assert str(demo_path.resolve()) in again.prefs.recent_files
    recent = again.recent_menu.actions()
    assert recent and str(demo_path.resolve()) in recent[0].text()


def test_bad_decay_rate_is_refused_in_the_dialog(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    window.act_settings.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, SettingsDialog))
    dialog = window.dialog
    dialog.rates.item(0, 1).setText("fast")
    dialog.findChild(QtWidgets.QPushButton, "settingsSave").click()
    assert "must be a number" in dialog.error.text() and dialog.isVisible()
    dialog.reject()


def test_export_then_import_into_a_new_store(qtbot, make_window, demo_path, tmp_path):
    from memlens.gui.transfer import run_export, run_import

    window = make_window(demo_path)
    target = tmp_path / "export.jsonl"
    dialog = run_export(window, target)
    with qtbot.waitSignal(dialog.completed, timeout=20000):
        pass
    assert target.exists() and "Exported" in dialog.label.text()
    dialog.close()
    fresh = tmp_path / "fresh" / "memory.db"
    with qtbot.waitSignal(window.store_opened, timeout=10000):
        window.open_store(fresh, create=True)
    wait_idle(qtbot, window)
    dialog = run_import(window, target)
    with qtbot.waitSignal(dialog.completed, timeout=30000):
        pass
    wait_idle(qtbot, window)
    assert "created" in dialog.label.text()
    with open_store(demo_path) as a, open_store(fresh) as b:
        assert b.count_memories(latest_only=False, include_expired=True, now=NOW) == a.count_memories(latest_only=False, include_expired=True, now=NOW)
    assert int(window.sidebar.count_text("semantic")) > 0


def test_refresh_shortcut_and_view_shortcuts(qtbot, make_window, demo_path):
    window = make_window(demo_path)
    with qtbot.waitSignal(window.refreshed, timeout=5000):
        qtbot.keyClick(window, QtCore.Qt.Key.Key_F5)
    qtbot.keyClick(window, QtCore.Qt.Key.Key_5, QtCore.Qt.KeyboardModifier.ControlModifier)
    assert window.pages.currentWidget() is window.audit_view
    qtbot.keyClick(window, QtCore.Qt.Key.Key_1, QtCore.Qt.KeyboardModifier.ControlModifier)
    assert window.sidebar.current_view() == "working"
    wait_idle(qtbot, window)
