"""The inspector shows the truth: New Memory keeps the chain's project and can save an advisory match as a new
version, Edit changes project and TTL, the demo never goes into (or sweeps) a person's store, and the smaller
texts (recall counts, decay rates, numbers against thresholds, the window title, the no-display message)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from gui_support import NOW

from memlens import MemoryStore
from memlens.demo import generate
from memlens.gui import app as gui_app
from memlens.gui.dialogs import EditDialog
from memlens.gui.main_window import MainWindow
from memlens.gui.new_memory_dialog import NewMemoryDialog
from memlens.gui.operations.edit import remember
from memlens.gui.qt import QtWidgets
from memlens.text import comparable

# The offscreen platform plugin says this whenever a top-level window is shown; it is not about our code.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def _dialog(qtbot, window: MainWindow) -> NewMemoryDialog:
    window.act_new_memory.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, NewMemoryDialog))
    return window.dialog  # type: ignore[return-value]


@pytest.fixture
def chain_path(tmp_path: Path) -> Path:
    """A store with a shop-web chain about installing dependencies (two versions)."""
    path = tmp_path / "store" / "memory.db"
    with MemoryStore.open(path) as store:
        store.remember("The shop-web project installs dependencies with yarn", project="shop-web", now=NOW - 9 * DAY)
        store.remember("The shop-web project installs dependencies with pnpm", project="shop-web", now=NOW - 5 * DAY)
    return path


# --- point 4: New Memory and Edit --------------------------------------------------------------------------------


def test_new_version_saved_under_all_projects_keeps_the_chains_project(qtbot, make_window, chain_path: Path):
    window = make_window(chain_path)
    dialog = _dialog(qtbot, window)
    dialog.project.setCurrentText("")  # "All projects": no project of its own
    with qtbot.waitSignal(dialog.previewed, timeout=10000, check_params_cb=lambda p: p is not None and p.action == "supersede"):
        qtbot.keyClicks(dialog.text, "The shop-web project installs dependencies with pnpm workspaces")
    assert "project <b>shop-web</b>" in dialog.decision.text() and "in its project" in dialog.decision.text()
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        dialog.save_button.click()
    qtbot.waitUntil(window.is_idle, timeout=15000)
    with MemoryStore.open(chain_path) as store:
        hits = store.search("pnpm workspaces", project="shop-web", now=NOW)
        assert hits and hits[0].memory.version == 3 and hits[0].memory.project == "shop-web"


def test_similar_match_can_be_saved_as_its_new_version(qtbot, make_window, chain_path: Path):
    window = make_window(chain_path)
    dialog = _dialog(qtbot, window)
    text = "The shop-web project installs its dependencies with bun workspaces"
    with qtbot.waitSignal(dialog.previewed, timeout=10000, check_params_cb=lambda p: p is not None):
        qtbot.keyClicks(dialog.text, text)
    preview = dialog.preview
    assert preview is not None and preview.action == "similar" and preview.target is not None
    assert dialog.version_button.isVisible() and dialog.version_button.text() == f"Save as new version of #{preview.target.id}"
    dialog.version_button.click()
    candidate = dialog.candidate()
    assert candidate.supersede_id == preview.target.id and candidate.project == "shop-web"
    op = remember(window, candidate.content, type=candidate.type, project=candidate.project, tags=list(candidate.tags),
                  supersede=candidate.supersede, supersede_id=candidate.supersede_id, now=NOW)  # fmt: skip
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        op.run_in_background()
    qtbot.waitUntil(window.is_idle, timeout=15000)
    with MemoryStore.open(chain_path) as store:
        latest = store.latest_of(preview.target.id)
        assert latest.content == text and latest.parent_id == preview.target.id and latest.project == "shop-web"
        assert store.audit(operation="supersede", limit=1)[0].details["chosen"] is True


def test_edit_changes_project_and_ttl(qtbot, make_window, chain_path: Path):
    window = make_window(chain_path)
    with MemoryStore.open(chain_path) as store:
        memory = store.list_memories(now=NOW)[0]
    dialog = EditDialog(memory, window, now=NOW)
    qtbot.addWidget(dialog)
    assert dialog.changes() == {}
    dialog.project.setText("shop")
    dialog.ttl.setValue(2.0)
    assert dialog.changes() == {"project": "shop", "ttl_days": 2.0}
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        window.update_memory(memory.id, dialog.changes())
    qtbot.waitUntil(window.is_idle, timeout=15000)
    with MemoryStore.open(chain_path) as store:
        edited = store.get(memory.id)
        assert edited.project == "shop" and edited.forget_after == NOW + 2 * DAY
    again = EditDialog(edited, window, now=NOW)
    qtbot.addWidget(again)
    again.project.setText("")
    again.ttl.setValue(0.0)
    assert again.changes() == {"clear_project": True, "clear_ttl": True}


# --- point 6: the demo never touches a person's store ----------------------------------------------------------


def _users_store(path: Path) -> tuple[int, int]:
    """A person's store whose observations a back-dated demo sweep would erase; (count, last audit id)."""
    with MemoryStore.open(path) as store:
        for n in range(6):
            store.observe("work-1", "Bash", {"command": f"make step{n}"}, "ok", project="mine", now=NOW - 30 * DAY + n * HOUR)
        store.remember("My own fact about the build cache", project="mine", now=NOW - 30 * DAY)
        return store.count_memories(latest_only=False, include_expired=True, now=NOW), store.audit(limit=1)[0].id


def test_demo_into_a_used_store_writes_a_demo_store_beside_it_and_opens_it(qtbot, make_window, tmp_path: Path):
    path = tmp_path / "store" / "memory.db"
    count, last_audit = _users_store(path)
    window = make_window(path)
    demo_db = path.parent / "demo.db"
    with qtbot.waitSignal(window.store_opened, timeout=120000, check_params_cb=lambda p: p == str(demo_db)):
        window.act_demo.trigger()
    qtbot.waitUntil(window.is_idle, timeout=15000)
    assert window.path == demo_db
    with MemoryStore.open(path) as store:
        assert store.count_memories(latest_only=False, include_expired=True, now=NOW) == count
        assert store.audit(limit=1)[0].id == last_audit  # nothing at all was written to the person's store
    with MemoryStore.open(demo_db) as demo_store:
        assert demo_store.count_memories(now=NOW) > 0


def test_demo_sweeps_never_touch_memories_it_did_not_write(tmp_path: Path):
    path = tmp_path / "store" / "memory.db"
    count, _ = _users_store(path)
    with MemoryStore.open(path) as store:
        before = {m.id for m in store.iter_memories()}
        summary = generate(store, now=NOW, days=21, seed=7)
        after = {m.id for m in store.iter_memories()}
        assert before <= after and len(before) == count
        assert summary.consolidations == 0  # consolidation reads every session, the person's too
        assert any("skipped the sweep" in note for note in summary.notes)


# --- point 12: the smaller texts ----------------------------------------------------------------------------------


def test_explanation_counts_recalls_and_says_half_life(tmp_path: Path):
    with MemoryStore.open(tmp_path / "m.db") as store:
        fact = store.remember("The VPN gateway is vpn-3", now=NOW - 10 * DAY)
        store.recall([fact.id], now=NOW - 9 * DAY)
        text = store.explain(fact.id, now=NOW)
    assert "recalled 1 time;" in text and "half-life" in text and "/h" not in text


def test_numbers_against_a_threshold_never_contradict_the_comparison():
    assert comparable(0.095, 0.1) == ("0.095", "0.1")
    assert comparable(0.35, 0.1) == ("0.35", "0.1")
    for value in (0.0951, 0.0999, 0.1001, 0.104, 0.1):
        shown, limit = comparable(value, 0.1)
        assert (float(shown) < float(limit)) == (value < 0.1) and (float(shown) > float(limit)) == (value > 0.1)


def test_window_title_does_not_repeat_memlens(qapp):
    gui_app.configure_application(qapp)
    name = qapp.applicationName()
    try:
        qapp.setApplicationName("probe")
        # With no display name of its own, the display name follows the application name: Qt appends nothing.
        assert QtWidgets.QApplication.applicationDisplayName() == "probe"
    finally:
        qapp.setApplicationName(name)


def test_display_problem_is_named_before_qt_starts():
    assert gui_app.display_problem({}, "linux") == gui_app.NO_DISPLAY
    assert gui_app.display_problem({"DISPLAY": ":0"}, "linux") is None
    assert gui_app.display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert gui_app.display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert gui_app.display_problem({}, "darwin") is None
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    run = subprocess.run([sys.executable, "-m", "memlens.gui"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "no display found; set DISPLAY or use QT_QPA_PLATFORM=offscreen" in run.stderr
    assert "xcb" not in run.stderr
