"""The Calibrate & Tidiness dialog (fates, proposals, the knob with previews, applying), and the Versions tab naming
the links that moved to a new version."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from gui_support import NOW, select_memory, wait_idle

from memlens import MemoryStore, tidiness
from memlens.gui.calibrate_dialog import CalibrateDialog
from memlens.gui.detail import load_detail, versions_html

# Offscreen windows cannot pass size hints on; harmless (as in the other window tests).
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")


def open_dialog(qtbot: Any, window: Any) -> CalibrateDialog:
    window.act_calibrate.trigger()
    dialog = window.findChild(CalibrateDialog)
    assert dialog is not None
    qtbot.waitUntil(lambda: dialog.data is not None, timeout=15000)
    wait_idle(qtbot, window)
    return dialog


def test_the_dialog_shows_fates_and_previews_each_position(qtbot: Any, make_window: Any, demo_path: Path) -> None:
    window = make_window(demo_path, size=(1024, 700))
    dialog = open_dialog(qtbot, window)
    assert dialog.data is not None
    kinds = [dialog.kind_table.item(r, 0).text() for r in range(dialog.kind_table.rowCount())]
    assert "working/observation" in kinds and dialog.band_table.rowCount() >= 2
    assert dialog.status.text().startswith(f"{dialog.data.report.total.total} memories as of")
    assert dialog.data.position == 3 and dialog.knob.value() == 3
    # The preview table names what each position forgets now and in 30 days, as planned by the sweep.
    with MemoryStore.open(demo_path) as store:
        expected = [p.effects[0].proposed_total for p in tidiness.preview(store, now=NOW, days=[0])]
    assert [int(dialog.preview_table.item(r, 2).text().split()[0]) for r in range(5)] == expected
    assert expected[0] <= expected[2] <= expected[4]
    dialog.knob.setValue(5)
    assert "Tidy" in dialog.position_text.text() and "would forget" in dialog.position_text.text()
    assert dialog.tidiness_button.isEnabled()


def test_applying_a_position_is_written_and_read_back(qtbot: Any, make_window: Any, demo_path: Path) -> None:
    window = make_window(demo_path)
    dialog = open_dialog(qtbot, window)
    dialog.knob.setValue(1)
    dialog.tidiness_button.click()
    qtbot.waitUntil(lambda: dialog.data is not None and dialog.data.position == 1, timeout=15000)
    wait_idle(qtbot, window)
    assert window.store_settings is not None and window.store_settings.decay.forget_threshold == 0.02
    with MemoryStore.open(demo_path) as store:
        assert store.tidiness() == 1
        assert store.audit(operation="configure", limit=1)[0].details["reason"] == "tidiness 1 (Keep almost everything)"


def test_proposals_can_be_applied_or_rejected(qtbot: Any, make_window: Any, tmp_path: Path) -> None:
    path = tmp_path / "s" / "memory.db"
    with MemoryStore.open(path) as store:
        ids = [store.observe("s", "Bash", {"command": f"ls d{i}"}, f"listing {i}", now=NOW - timedelta(days=2)).id for i in range(12)]
        for memory_id in ids[:4]:
            store.forget(memory_id, now=NOW - timedelta(days=1))
    window = make_window(path)
    dialog = open_dialog(qtbot, window)
    assert dialog.proposals.count() == 1 and "observation" in dialog.proposals.item(0).text()
    assert "would forget" in dialog.proposal_text.toPlainText()
    dialog.reject_button.click()  # rejecting writes nothing
    assert dialog.proposals.count() == 0 and not dialog.apply_button.isEnabled()
    with MemoryStore.open(path) as store:
        assert store.audit(operation="configure", limit=1) == []
    dialog.show_data(dialog.data)  # shown again, then applied
    dialog.apply_button.click()
    qtbot.waitUntil(lambda: window.store_settings is not None and window.store_settings.decay.rate_for("observation") > 0.01, timeout=15000)
    wait_idle(qtbot, window)
    with MemoryStore.open(path) as store:
        assert store.audit(operation="configure", limit=1)[0].details["reason"].startswith("calibration proposal rate:observation")


def test_the_versions_tab_names_the_links_that_moved(qtbot: Any, make_window: Any, tmp_path: Path) -> None:
    path = tmp_path / "v" / "memory.db"
    t0 = NOW - timedelta(days=1)
    with MemoryStore.open(path) as store:
        yarn = store.remember("Use yarn to install dependencies in this project", project="web", now=t0)
        summary = store.remember("The web project's tooling, summarised", type="summary", now=t0)
        store.relate(summary.id, yarn.id, "derives", now=t0)
        pnpm = store.remember("Use pnpm to install dependencies in this project", supersede_id=yarn.id, now=t0 + timedelta(minutes=5))
        data = load_detail(store, pnpm.id, NOW)
    assert [(r.src_id, r.kind) for r in data.carried[pnpm.id]] == [(summary.id, "derives")]
    assert f"Links that moved to v2:</i> source of <a href='memory:{summary.id}'>#{summary.id}</a>" in versions_html(data.history, pnpm.id, data.carried)
    window = make_window(path)
    select_memory(qtbot, window, pnpm.id)
    assert f"source of #{summary.id}" in window.detail.diff_browser.toPlainText()
