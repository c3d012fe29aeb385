"""GUI operations (memlens.gui.operations): each reports what it changed, and the real window refreshes only those views."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from gui_support import NOW

from memlens import MemoryStore
from memlens.gui.main_window import MainWindow
from memlens.gui.operations import OpChanges
from memlens.gui.operations.edit import edit_changes
from memlens.gui.operations.forget import forget_memories
from memlens.gui.operations.lifecycle import STRENGTH_TICK, sweep_changes
from memlens.gui.operations.pin import set_pinned
from memlens.gui.qt import QtCore
from memlens.llm import LLMConfig, LLMError
from memlens.models import Memory
from memlens.sweep import SweepReport

pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")



@pytest.fixture
def window(qtbot, tmp_path: Path, demo_path: Path) -> Iterator[MainWindow]:
    settings = QtCore.QSettings(str(tmp_path / "memlens.gui.ini"), QtCore.QSettings.Format.IniFormat)
    win = MainWindow(settings, clock=lambda: NOW)
    qtbot.addWidget(win)
    win.resize(1300, 800)
    win.show()
    with qtbot.waitSignal(win.store_opened, timeout=15000):
        win.open_store(demo_path, create=False)
    qtbot.waitUntil(win.is_idle, timeout=15000)
    yield win
    win.close()
    assert win.reader is None and not win.tasks.is_busy()


def _show(qtbot, win: MainWindow, view: str) -> None:
    win.sidebar.select(view)
    qtbot.waitUntil(win.is_idle, timeout=15000)


def _first_unpinned(win: MainWindow) -> Memory:
    return next(m for m in (win.model.memory_at(r) for r in range(win.model.rowCount())) if m is not None and not m.pinned)


# --- what operations report ------------------------------------------------------------------------------------


def test_changes_of_each_kind_of_operation():
    pin = edit_changes(7, {"pinned": True})
    assert pin == OpChanges(memory_ids=frozenset({7}), audit=True)
    assert not (pin.counts or pin.memory_list or pin.sessions or pin.lists)
    assert edit_changes(7, {"ttl_days": 3.0}).counts  # expiry moves the counts
    assert STRENGTH_TICK.strengths and STRENGTH_TICK.counts and not STRENGTH_TICK.memory_list
    everything = OpChanges.everything()
    assert all((everything.memory_list, everything.counts, everything.lists, everything.sessions, everything.audit))
    assert OpChanges().is_empty() and not pin.is_empty()


def test_sweep_that_did_nothing_only_touches_the_audit():
    assert sweep_changes(SweepReport(now=NOW, dry_run=False, decisions=[], counts={})) == OpChanges(audit=True)


# --- through the real window -----------------------------------------------------------------------------------


def test_pin_repaints_its_row_and_reloads_nothing_else(window, qtbot):
    _show(qtbot, window, "semantic")
    memory = _first_unpinned(window)
    row = window.model.row_of(memory.id)
    not_reloaded = (window.counts_loaded, window.lists_loaded, window.model.loaded, window.audit_view.model.loaded, window.sessions_view.model.loaded)
    op = set_pinned(window, memory.id, True, now=NOW)
    with qtbot.waitSignal(window.changes_applied, timeout=10000) as applied:
        blockers = [qtbot.assertNotEmitted(signal, wait=0) for signal in not_reloaded]
        for blocker in blockers:
            blocker.__enter__()
        op.run_in_background()
    qtbot.waitUntil(lambda: window.model.memory_at(row) is not None and window.model.memory_at(row).pinned, timeout=10000)
    qtbot.waitUntil(window.is_idle, timeout=10000)
    for blocker in blockers:
        blocker.__exit__(None, None, None)
    assert applied.args[0] == op.reported == OpChanges(memory_ids=frozenset({memory.id}), audit=True)
    assert window.model.row_of(memory.id) == row  # repainted in place
    # The audit log did change: its hidden view is marked stale and reads the new entry when next shown.
    assert "audit" in window._stale_pages
    with qtbot.waitSignal(window.audit_view.model.loaded, timeout=10000):
        window.sidebar.select("audit")
    qtbot.waitUntil(window.is_idle, timeout=10000)
    newest = window.audit_view.model.entry_at(0)
    assert newest is not None and memory.id in newest.target_ids and "audit" not in window._stale_pages


def test_pin_while_the_sessions_view_is_shown_leaves_it_alone(window, qtbot):
    _show(qtbot, window, "semantic")
    memory = _first_unpinned(window)
    _show(qtbot, window, "sessions")
    with qtbot.assertNotEmitted(window.sessions_view.model.loaded, wait=0), qtbot.assertNotEmitted(window.counts_loaded, wait=0):
        with qtbot.waitSignal(window.write_finished, timeout=10000, check_params_cb=lambda name: name == "pin"):
            set_pinned(window, memory.id, True, now=NOW).run_in_background()
        qtbot.waitUntil(window.is_idle, timeout=10000)
    with MemoryStore.open(window.path, create=False) as store:
        assert store.get(memory.id).pinned


def test_forget_refreshes_counts_and_the_list(window, qtbot):
    _show(qtbot, window, "semantic")
    memory = _first_unpinned(window)
    before = int(window.sidebar.count_text("semantic").replace(",", ""))
    op = forget_memories(window, [memory.id], reason="test", whole_chain=False, now=NOW)
    with qtbot.waitSignals([window.counts_loaded, window.model.loaded, window.write_finished], timeout=10000):
        op.run_in_background()
    qtbot.waitUntil(window.is_idle, timeout=10000)
    assert op.reported is not None and memory.id in op.reported.memory_ids
    assert op.reported.counts and op.reported.memory_list and op.reported.audit
    assert window.model.row_of(memory.id) == -1
    assert window.sidebar.count_text("semantic") == f"{before - 1:,}"


def test_writes_are_refused_while_time_travelling(window, qtbot):
    _show(qtbot, window, "semantic")
    memory = _first_unpinned(window)
    with qtbot.waitSignal(window.time_travel_changed, timeout=5000):
        window.set_time_travel(NOW + timedelta(days=7))
    with qtbot.waitSignal(window.error_shown, timeout=5000) as blocker:
        handle = set_pinned(window, memory.id, True, now=NOW).run_in_background()
    assert handle is None and "read-only" in blocker.args[0]
    qtbot.waitUntil(window.is_idle, timeout=10000)


def test_forgotten_memory_is_explained_by_core(window, qtbot):
    """The detail pane says why a memory went in the words of MemoryStore.explain, not its own reading of the log."""
    _show(qtbot, window, "semantic")
    memory = _first_unpinned(window)
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        forget_memories(window, [memory.id], reason="stale note", whole_chain=False, now=NOW).run_in_background()
    qtbot.waitUntil(window.is_idle, timeout=10000)
    with MemoryStore.open(window.path, create=False) as store:
        said = store.explain(memory.id, now=NOW)
    with qtbot.waitSignal(window.detail_shown, timeout=10000):
        window.go_to_memory(memory.id)
    text = window.detail.browser.toPlainText()
    assert said in text and "stale note" in text


# --- the LLM rule, in one place --------------------------------------------------------------------------------


def test_llm_resolve_prefers_settings_then_environment():
    env = {"MEMLENS_LLM_BASE_URL": "http://env:1/v1", "MEMLENS_LLM_MODEL": "env-model", "OPENAI_API_KEY": "k1"}
    config, note = LLMConfig.resolve("http://set:2/v1/", "set-model", env)
    assert config is not None and (config.base_url, config.model, config.api_key) == ("http://set:2/v1", "set-model", "k1")
    assert "set-model" in note
    config, note = LLMConfig.resolve("", "", {**env, "MEMLENS_LLM_API_KEY": "k2"})
    assert config is not None and (config.model, config.api_key) == ("env-model", "k2") and "environment" in note
    assert LLMConfig.resolve("", "", {}) == (None, "No LLM is configured: the built-in deterministic method will run.")
    with pytest.raises(LLMError, match="half configured"):
        LLMConfig.resolve("http://set:2/v1", "", env)


def test_transfer_does_not_import_the_window():
    import ast
    import inspect

    from memlens.gui import transfer

    tree = ast.parse(inspect.getsource(transfer))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "memlens.gui.main_window" not in imported
