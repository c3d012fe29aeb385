"""The inspector shows what is in the store: New Memory and Edit wired through the real window, and every view
current when it is shown (after another process writes, an import, a sweep or the strength clock), with the
selection and the scroll position kept."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from gui_support import NOW, select_memory, select_view, wait_idle

from memlens import MemoryStore
from memlens.gui.dialogs import EditDialog
from memlens.gui.main_window import MainWindow
from memlens.gui.memory_model import ID_ROLE
from memlens.gui.new_memory_dialog import NewMemoryDialog

# The offscreen platform plugin says this whenever a top-level window is shown; it is not about our code.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

DAY = timedelta(days=1)


def table_ids(window: MainWindow) -> list[int]:
    return [window.model.index(r, 0).data(ID_ROLE) for r in range(window.model.rowCount())]


@pytest.fixture
def chain_path(tmp_path: Path) -> Path:
    """A shop-web chain about installing dependencies (two versions), the second with a TTL two days past NOW."""
    path = tmp_path / "store" / "memory.db"
    with MemoryStore.open(path) as store:
        store.remember("The shop-web project installs dependencies with yarn", project="shop-web", now=NOW - 9 * DAY)
        store.remember("The shop-web project installs dependencies with pnpm", project="shop-web", ttl_days=7, now=NOW - 5 * DAY)
    return path


# --- A: New Memory and Edit through the window -------------------------------------------------------------------


def test_save_as_new_version_from_the_window_joins_the_chain(qtbot, make_window, chain_path: Path):
    window = make_window(chain_path)
    window.act_new_memory.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, NewMemoryDialog))
    dialog = window.dialog
    assert isinstance(dialog, NewMemoryDialog)
    text = "The shop-web project installs its dependencies with bun workspaces"
    with qtbot.waitSignal(dialog.previewed, timeout=10000, check_params_cb=lambda p: p is not None):
        qtbot.keyClicks(dialog.text, text)
    preview = dialog.preview
    assert preview is not None and preview.action == "similar" and preview.target is not None
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        dialog.version_button.click()
    wait_idle(qtbot, window)
    with MemoryStore.open(chain_path) as store:
        latest = store.latest_of(preview.target.id)
        assert latest.content == text and latest.parent_id == preview.target.id and latest.project == "shop-web"


def test_edit_dialog_counts_ttl_days_from_the_windows_clock(qtbot, make_window, chain_path: Path):
    window = make_window(chain_path)
    select_view(qtbot, window, "semantic")
    with MemoryStore.open(chain_path) as store:
        memory = store.list_memories(now=NOW)[0]
    select_memory(qtbot, window, memory.id)
    assert "project" in window.act_edit.toolTip() and "TTL" in window.act_edit.toolTip()
    assert "project" in window.detail.edit_button.toolTip() and "TTL" in window.detail.edit_button.toolTip()
    window.act_edit.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, EditDialog))
    dialog = window.dialog
    assert isinstance(dialog, EditDialog)
    assert dialog.ttl.value() == pytest.approx(2.0)  # forget_after is NOW + 2 days on the window's clock
    assert dialog.changes() == {}
    dialog.reject()


# --- B: every view current when shown -----------------------------------------------------------------------------


AGENT_WRITE = """
import sys
from datetime import datetime
from memlens import MemoryStore
now = datetime.fromisoformat(sys.argv[2])
with MemoryStore.open(sys.argv[1], create=False, actor="agent") as store:
    store.remember("The staging cluster moved to eu-west-3", now=now)
    store.observe("agent-session-42", "Bash", {"command": "make deploy"}, "ok", now=now)
"""


def agent_writes(path: Path) -> None:
    """Another process (an agent) stores a fact and an observation of a new session."""
    subprocess.run([sys.executable, "-c", AGENT_WRITE, str(path), NOW.isoformat()], check=True, capture_output=True)


def sidebar_count(window: MainWindow, key: str) -> int:
    return int(window.sidebar.count_text(key).replace(",", ""))


def shown_and_counted_agree(qtbot, window: MainWindow, key: str) -> None:
    select_view(qtbot, window, key)
    assert window.model.rowCount() == sidebar_count(window, key)
    assert window.model.total == window.model.rowCount()


def scrolled_selection(qtbot, window: MainWindow) -> tuple[int, int]:
    """Select a row far down the semantic list and scroll to it: (its id, the scroll bar's value)."""
    select_view(qtbot, window, "semantic")
    window.resize(1300, 500)
    memory_id = window.model.index(window.model.rowCount() - 5, 0).data(ID_ROLE)
    select_memory(qtbot, window, memory_id)
    window.table.scrollTo(window.model.index(window.model.row_of(memory_id), 0))
    value = window.table.verticalScrollBar().value()
    assert value > 0
    return memory_id, value


def selection_and_scroll_kept(window: MainWindow, memory_id: int, value: int) -> None:
    assert window.selected_ids() == [memory_id]
    assert window.detail.data is not None and window.detail.data.memory.id == memory_id
    # The new fact sorts first (newest): the view may move by that one row, never back to the top.
    assert abs(window.table.verticalScrollBar().value() - value) <= window.table.verticalHeader().defaultSectionSize()


@pytest.mark.parametrize("page", ["audit", "sessions"])
def test_agent_write_while_another_page_is_shown(qtbot, make_window, demo_path: Path, page: str):
    window = make_window(demo_path)
    window.live_timer.setInterval(100)
    memory_id, value = scrolled_selection(qtbot, window)
    before = sidebar_count(window, "semantic")
    select_view(qtbot, window, page)
    shown = window.audit_view.model if page == "audit" else window.sessions_view.model
    rows_before = shown.rowCount()
    agent_writes(demo_path)
    qtbot.waitUntil(lambda: sidebar_count(window, "semantic") == before + 1, timeout=10000)
    wait_idle(qtbot, window)
    # The page on screen is current at once.
    qtbot.waitUntil(lambda: shown.rowCount() > rows_before, timeout=10000)
    # Back on the memories: the table agrees with the sidebar, with the new fact, and the selection and scroll kept.
    shown_and_counted_agree(qtbot, window, "semantic")
    assert any("eu-west-3" in (window.model.memory_at(r) or window.model.memory_at(0)).content for r in range(window.model.rowCount()))
    selection_and_scroll_kept(window, memory_id, value)
    # The other hidden page is current when shown too.
    other = "sessions" if page == "audit" else "audit"
    select_view(qtbot, window, other)
    with MemoryStore.open(demo_path, create=False) as store:
        expected = len(store.session_ids()) if other == "sessions" else len(store.audit_ids())
    assert (window.sessions_view.model if other == "sessions" else window.audit_view.model).rowCount() == expected


def test_sessions_page_keeps_its_selection_when_shown_again(qtbot, make_window, demo_path: Path):
    window = make_window(demo_path)
    select_view(qtbot, window, "sessions")
    view = window.sessions_view
    assert view.model.rowCount() > 2
    view.table.selectRow(2)
    session = view.model.session_at(2)
    assert session is not None
    select_view(qtbot, window, "semantic")
    select_view(qtbot, window, "sessions")
    current = view.table.selectionModel().currentIndex()
    assert current.isValid() and view.model.session_at(current.row()) == session


IMPORTED = (
    "The billing service retries failed charges three times",
    "Grafana dashboards live in the ops repository",
    "Nightly backups are kept for thirty days in cold storage",
    "The mobile app targets iOS 17 and Android 14",
    "Feature flags are managed through LaunchDarkly",
    "The search cluster runs OpenSearch 2.11 on three nodes",
)


def test_import_while_another_page_is_shown(qtbot, make_window, demo_path: Path, tmp_path: Path):
    from memlens.gui.transfer import run_import
    from memlens.io import export_file

    source = tmp_path / "other" / "memory.db"
    with MemoryStore.open(source) as other:
        for text in IMPORTED:
            other.remember(text, now=NOW - DAY)
    export = tmp_path / "other.jsonl"
    with MemoryStore.open(source, create=False) as other:
        export_file(other, export, now=NOW)
    window = make_window(demo_path)
    memory_id, _scroll = scrolled_selection(qtbot, window)
    before = sidebar_count(window, "semantic")
    select_view(qtbot, window, "audit")
    dialog = run_import(window, export)
    with qtbot.waitSignal(dialog.completed, timeout=30000):
        pass
    dialog.close()
    wait_idle(qtbot, window)
    assert sidebar_count(window, "semantic") == before + len(IMPORTED)
    shown_and_counted_agree(qtbot, window, "semantic")
    assert window.selected_ids() == [memory_id]


@pytest.fixture
def decayed_path(tmp_path: Path) -> Path:
    """A faded chitchat, an expired fact, a pinned chitchat, a fresh fact and one whose TTL runs out in an hour."""
    path = tmp_path / "decayed" / "memory.db"
    with MemoryStore.open(path) as store:
        store.remember("The user said hello and talked about the weather", type="chitchat", now=NOW - 3 * DAY)
        store.remember("A temporary staging password rotates daily", ttl_days=1, now=NOW - 2 * DAY)
        store.remember("The user likes the blue theme in the editor", type="chitchat", pinned=True, now=NOW - 3 * DAY)
        store.remember("The API lives at https://api.example.com", now=NOW - DAY)
        store.remember("The release freeze lasts until the end of the day", ttl_days=1, now=NOW - 23 * timedelta(hours=1))
    return path


def test_sweep_while_another_page_is_shown(qtbot, make_window, decayed_path: Path):
    window = make_window(decayed_path)
    select_view(qtbot, window, "semantic")
    rows = window.model.rowCount()
    select_view(qtbot, window, "sessions")
    with qtbot.waitSignal(window.sweep_finished, timeout=10000) as blocker:
        window.act_sweep.trigger()
    wait_idle(qtbot, window)
    gone = {d.memory_id for d in blocker.args[0].decisions}
    assert gone
    shown_and_counted_agree(qtbot, window, "semantic")
    assert not gone & set(table_ids(window)) and window.model.rowCount() < rows


@pytest.mark.parametrize("page", ["semantic", "audit"])
def test_ttl_running_out_leaves_the_table_on_the_strength_tick(qtbot, make_window, decayed_path: Path, page: str):
    clock = [NOW]
    window = make_window(decayed_path, clock=lambda: clock[0])
    select_view(qtbot, window, "semantic")
    assert any("release freeze" in (window.model.memory_at(r).content) for r in range(window.model.rowCount()))
    select_view(qtbot, window, page)
    before = sidebar_count(window, "semantic")
    clock[0] = NOW + 2 * timedelta(hours=1)
    with qtbot.waitSignal(window.counts_loaded, timeout=10000):
        window.scheduler.strength_tick.emit()
    wait_idle(qtbot, window)
    assert sidebar_count(window, "semantic") == before - 1
    shown_and_counted_agree(qtbot, window, "semantic")
    assert not any("release freeze" in window.model.memory_at(r).content for r in range(window.model.rowCount()))
