"""The Conflicts view: reached from the sidebar, pairs side by side with the differing words highlighted, and the
four decisions plus undo going through the store."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from gui_support import NOW, select_view, wait_idle

from memlens import MemoryStore

# The offscreen platform says this when a window is shown; nothing of the view's making.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")


@pytest.fixture
def conflict_store(tmp_path: Path) -> Path:
    path = tmp_path / "conflicts.db"
    with MemoryStore.open(path) as store:
        t = NOW - timedelta(days=3)
        store.remember("The weekly design review is on Wednesday.", origin="user", now=t)
        store.remember("The weekly design review moved to Thursday.", now=t + timedelta(hours=1))
        store.remember("The staging API listens on port 8080.", now=t)
        store.remember("The staging API now listens on port 8443.", now=t + timedelta(hours=2))
        store.remember("Payments go through Stripe.", now=t)
        assert len(store.list_conflicts()) == 2
    return path


def _click(qtbot: Any, window: Any, button: Any) -> None:
    assert button.isEnabled(), button.objectName()
    with qtbot.waitSignal(window.write_finished, timeout=15000):
        button.click()
    wait_idle(qtbot, window)


def test_the_view_shows_pairs_side_by_side_and_the_decisions_work(qtbot: Any, make_window: Any, conflict_store: Path, tmp_path: Path):
    window = make_window(conflict_store, size=(1024, 700))
    assert window.sidebar.count_text("conflicts") == "2"
    select_view(qtbot, window, "conflicts")
    view = window.conflicts_view
    assert window.pages.currentWidget() is view and view.model.rowCount() == 2
    qtbot.waitUntil(lambda: view.current is not None, timeout=10000)
    # The newest detection first: the port pair, its differing values highlighted on each side.
    assert view.current.evidence.newer_values == ("8443",)
    assert "8443</span>" in view.newer_panel.text.toHtml() and "8443.</span>" not in view.newer_panel.text.toHtml()
    assert "8080</span>" in view.older_panel.text.toHtml() and "staging</span>" not in view.older_panel.text.toHtml()
    assert view.merge_text.text() == "The staging API now listens on port 8443."
    shot = Path(os.environ.get("MEMLENS_CONFLICTS_SHOT", tmp_path / "conflicts.png"))
    assert window.grab().save(str(shot))

    first = view.current.id
    _click(qtbot, window, view.keep_newer)
    with MemoryStore.open(conflict_store, readonly=True) as store:
        decided = store.conflicts.get(first)
    assert decided.status == "resolved" and decided.resolution and decided.resolution["winner"] == decided.newer.id
    assert view.model.rowCount() == 1 and window.sidebar.count_text("conflicts") == "1"

    view.status.setCurrentIndex(view.status.findData("all"))
    wait_idle(qtbot, window)
    row = next(r for r in range(view.model.rowCount()) if view.model.conflict_at(r).id == first)
    view.table.selectRow(row)
    qtbot.waitUntil(lambda: view.current is not None and view.current.id == first, timeout=10000)
    assert view.undo.isEnabled() and not view.keep_newer.isEnabled()
    _click(qtbot, window, view.undo)
    with MemoryStore.open(conflict_store, readonly=True) as store:
        assert store.conflicts.get(first).status == "open"

    view.status.setCurrentIndex(view.status.findData("open"))
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: view.current is not None, timeout=10000)
    other = next(view.model.conflict_at(r).id for r in range(view.model.rowCount()) if view.model.conflict_at(r).id != first)
    view.table.selectRow(next(r for r in range(view.model.rowCount()) if view.model.conflict_at(r).id == other))
    qtbot.waitUntil(lambda: view.current is not None and view.current.id == other, timeout=10000)
    view.merge_text.setText("The weekly design review is on Thursday.")
    _click(qtbot, window, view.merge)
    qtbot.waitUntil(lambda: view.current is not None and view.current.status == "open", timeout=10000)
    _click(qtbot, window, view.dismiss)
    with MemoryStore.open(conflict_store, readonly=True) as store:
        statuses = {c.id: c.status for c in store.list_conflicts(status="all")}
        merged = store.conflicts.get(other)
        assert statuses == {first: "dismissed", other: "resolved"}
        assert merged.resolution and store.get(merged.resolution["fact"]).content == "The weekly design review is on Thursday."
    assert window.sidebar.count_text("conflicts") == ""


def test_decisions_are_disabled_while_time_travelling(qtbot: Any, make_window: Any, conflict_store: Path):
    window = make_window(conflict_store)
    select_view(qtbot, window, "conflicts")
    view = window.conflicts_view
    qtbot.waitUntil(lambda: view.current is not None, timeout=10000)
    assert view.keep_newer.isEnabled()
    window.time_travel.set_date(NOW + timedelta(days=30))
    wait_idle(qtbot, window)
    assert window.read_only()
    assert not view.keep_newer.isEnabled() and not view.merge.isEnabled() and not view.scan_button.isEnabled()
    window.time_travel.set_date(None)
    wait_idle(qtbot, window)
    assert view.keep_older.isEnabled()
