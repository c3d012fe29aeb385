"""``python -m memlens.gui.bench --db PATH``: how fast the inspector opens a large store and scrolls to its end, and its
peak memory. Run offscreen by ``python -m memlens.bench`` (core never imports Qt, so it starts this in a process of
its own); prints JSON with ``--json``.

``--actions`` instead drives the real window through a script of about forty things a person does (switch layers,
search, sort, select, compare, pin, edit, forget, audit log, sessions, filters, sweep preview, time travel, F5, ...)
on a copy of the store, and reports for each the longest time the UI thread was blocked: a 5 ms heartbeat timer
notes how late each of its ticks arrives, so anything that holds the event loop (a slot, a model reset, a paint)
shows up as lateness. The script finds widgets by objectName and uses only the window's public attributes, so it
keeps working when the window's insides are regrouped.

The clock starts before the window asks for the store and stops when the memory table, once it has rows, has
painted them (a synchronous repaint). Scrolling to the end presses Ctrl+End in the table, then repaints the viewport
until the last row's contents have arrived and are painted (models that page with ``fetchMore`` get Ctrl+End again
until nothing is left to fetch); capped by ``--timeout``. CPU seconds are reported beside each wall time (the
machine may be shared). The memory figure is this process's own peak resident set (``VmHWM``, which starts afresh
at exec; ``ru_maxrss`` would carry over the peak of whatever started it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtTest import QTest  # real key and mouse events, as a person sends them (not re-exported by memlens.gui.qt)

from memlens.gui.qt import QtCore, QtGui, QtWidgets


def _wait(done: Any, timeout: float) -> bool:
    """Run the event loop until ``done()`` holds (checked every 10 ms) or ``timeout`` seconds pass; whether it held.

    The answer is the check that ended the wait, never a fresh call: ``done`` may count (settled three times in a
    row), and asking again after the loop quit could see a read the live view has just started and say no.
    """
    if done():
        return True
    deadline = time.perf_counter() + timeout
    held = False
    loop = QtCore.QEventLoop()
    timer = QtCore.QTimer()
    timer.setObjectName("benchWaitTimer")
    timer.setInterval(10)

    def check() -> None:
        nonlocal held
        if done():
            held = True
            loop.quit()
        elif time.perf_counter() > deadline:
            loop.quit()

    timer.timeout.connect(check)
    timer.start()
    loop.exec()
    timer.stop()
    return held


def peak_rss_mb() -> float:
    """This process's own peak resident memory in MB, not its parent's (see :func:`memlens.bench.timing.own_peak_rss_mb`)."""
    from memlens.bench.timing import own_peak_rss_mb

    return own_peak_rss_mb()


def run(path: Path, *, timeout: float = 60.0) -> dict[str, Any]:
    """Open ``path`` in a 1280x800 main window (settings in a throw-away file), time first rows and scrolling."""
    from memlens.gui.app import make_application
    from memlens.gui.main_window import MainWindow

    app = make_application([])
    with tempfile.TemporaryDirectory(prefix="memlens-gui-bench-") as tmp:
        settings = QtCore.QSettings(str(Path(tmp) / "settings.ini"), QtCore.QSettings.Format.IniFormat)
        window = MainWindow(settings)
        window.resize(1280, 800)
        window.show()
        model = window.model
        table = window.table
        started, started_cpu = time.perf_counter(), time.process_time()
        window.open_store(path, create=False)
        opened = _wait(lambda: model.rowCount() > 0, timeout)
        first_rows = first_rows_cpu = None
        if opened:
            table.viewport().repaint()  # paints now, synchronously: the rows are on screen when it returns
            first_rows, first_rows_cpu = time.perf_counter() - started, time.process_time() - started_cpu
        table.setFocus()
        scroll_started, scroll_started_cpu = time.perf_counter(), time.process_time()

        def press_end() -> None:
            QtWidgets.QApplication.sendEvent(
                table, QtGui.QKeyEvent(QtCore.QEvent.Type.KeyPress, QtCore.Qt.Key.Key_End, QtCore.Qt.KeyboardModifier.ControlModifier)
            )

        def at_end() -> bool:
            if model.canFetchMore(QtCore.QModelIndex()):
                press_end()  # a paging model: End moves to the last loaded row, the view asks for the next page
                return False
            last = model.rowCount() - 1
            if table.rowAt(table.viewport().height() - 1) not in (last, -1) or table.indexAt(QtCore.QPoint(0, 0)).row() < 0:
                press_end()
                return False
            table.viewport().repaint()  # paints now: asks the model for the rows in view
            return not model.is_loading() and model.memory_at(last) is not None and getattr(model, "is_row_loaded", lambda _r: True)(last)

        press_end()
        reached = opened and _wait(at_end, timeout)
        if reached:
            table.viewport().repaint()  # the last rows, loaded, on screen
        scroll, scroll_cpu = time.perf_counter() - scroll_started, time.process_time() - scroll_started_cpu
        rows = model.rowCount()
        in_view = model.total if isinstance(getattr(model, "total", None), int) else None
        with_contents = model.loaded_row_count() if hasattr(model, "loaded_row_count") else rows
        window.close()
        app.processEvents()
    total: int | str | None = None
    try:
        from memlens.store import MemoryStore

        with MemoryStore.open(path, readonly=True) as store:
            total = store.count_memories()
    except Exception as exc:  # the figure is still useful without the total
        total = f"unknown ({exc})"
    return {
        "open_to_first_rows_s": round(first_rows, 3) if first_rows is not None else None,
        "open_to_first_rows_cpu_s": round(first_rows_cpu, 3) if first_rows_cpu is not None else None,
        "scroll_to_end_s": round(scroll, 3) if reached else None,
        "scroll_to_end_cpu_s": round(scroll_cpu, 3) if reached else None,
        "reached_end": bool(reached),
        "rows_loaded": rows,
        "rows_in_view": in_view,
        "rows_with_contents_in_memory": with_contents,
        "latest_memories": total,
        "timeout_s": timeout,
        "peak_rss_mb": peak_rss_mb(),
        "peak_rss_source": "VmHWM of this process" if sys.platform.startswith("linux") else "ru_maxrss",
    }


STALL_LIMIT_MS = 200.0  # issue 11: the worst stall at 200k must stay under this


class Heartbeat:
    """A timer ticking every ``interval_ms`` on the UI thread; ``worst_ms`` is the largest lateness since ``reset``.

    A tick due at t that runs at t + d means the event loop was blocked for about d: lateness is the gap between two
    ticks minus the interval.
    """

    def __init__(self, interval_ms: int = 5) -> None:
        self.interval_s = interval_ms / 1000
        self.timer = QtCore.QTimer()
        self.timer.setObjectName("benchHeartbeat")
        self.timer.setTimerType(QtCore.Qt.TimerType.PreciseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self.last = time.perf_counter()
        self.worst_ms = 0.0

    def _tick(self) -> None:
        now = time.perf_counter()
        self.worst_ms = max(self.worst_ms, (now - self.last - self.interval_s) * 1000)
        self.last = now

    def reset(self) -> None:
        """Start a new measurement now."""
        self.last = time.perf_counter()
        self.worst_ms = 0.0

    def start(self) -> None:
        """Start ticking."""
        self.reset()
        self.timer.start()

    def stop(self) -> None:
        """Stop ticking."""
        self.timer.stop()


class Driver:
    """Works the window as a person would: clicks, keys and menu actions on widgets found by objectName."""

    def __init__(self, window: Any, timeout: float) -> None:
        self.window = window
        self.timeout = timeout

    def find(self, kind: type, name: str) -> Any:
        """The window's child of ``kind`` named ``name``; a missing widget is an error in the script."""
        widget = self.window.findChild(kind, name)
        if widget is None:
            raise LookupError(f"no {kind.__name__} named {name!r} in the window")
        return widget

    def trigger(self, name: str) -> None:
        """Choose the menu or toolbar action named ``name`` (what its shortcut or a click does)."""
        action = self.find(QtGui.QAction, name)
        if not action.isEnabled():
            raise RuntimeError(f"action {name!r} is disabled")
        action.trigger()

    def table(self) -> QtWidgets.QTableView:
        """The memory table."""
        table: QtWidgets.QTableView = self.find(QtWidgets.QTableView, "memoryTable")
        return table

    def show_view(self, key: str) -> None:
        """Click the sidebar entry whose key (item data) is ``key``: "all", a layer, "audit" or "sessions"."""
        tree = self.find(QtWidgets.QTreeWidget, "sidebar")
        items = tree.findItems("*", QtCore.Qt.MatchFlag.MatchWildcard | QtCore.Qt.MatchFlag.MatchRecursive)
        item = next((i for i in items if i.data(0, QtCore.Qt.ItemDataRole.UserRole) == key), None)
        if item is None:
            raise LookupError(f"no sidebar entry {key!r}")
        rect = tree.visualItemRect(item)
        QTest.mouseClick(tree.viewport(), QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier, rect.center())
        if tree.currentItem() is not item:  # the click missed (the entry scrolled out of view): choose it as the keyboard would
            tree.setCurrentItem(item)

    def views(self) -> list[str]:
        """The sidebar's view keys, in order."""
        tree = self.find(QtWidgets.QTreeWidget, "sidebar")
        items = tree.findItems("*", QtCore.Qt.MatchFlag.MatchWildcard | QtCore.Qt.MatchFlag.MatchRecursive)
        return [key for i in items if isinstance(key := i.data(0, QtCore.Qt.ItemDataRole.UserRole), str) and key]

    def type_text(self, name: str, text: str) -> None:
        """Focus the line edit ``name`` and type ``text`` key by key."""
        edit = self.find(QtWidgets.QLineEdit, name)
        edit.setFocus()
        QTest.keyClicks(edit, text)

    def clear_text(self, name: str) -> None:
        """Select all in the line edit ``name`` and delete it."""
        edit = self.find(QtWidgets.QLineEdit, name)
        edit.setFocus()
        QTest.keyClick(edit, QtCore.Qt.Key.Key_A, QtCore.Qt.KeyboardModifier.ControlModifier)
        QTest.keyClick(edit, QtCore.Qt.Key.Key_Backspace)

    def sort_by(self, key: str) -> None:
        """Click the header of the column ``key`` (twice-clicked columns flip, as in any table)."""
        from memlens.gui.memory_model import COLUMN_INDEX

        table = self.table()
        header = table.horizontalHeader()
        column = COLUMN_INDEX[key]
        table.scrollTo(table.model().index(0, column))  # brings the column into view, as a person scrolls to it
        x = header.sectionViewportPosition(column) + header.sectionSize(column) // 2
        if header.isSectionHidden(column) or not 0 <= x < header.viewport().width():
            raise RuntimeError(f"the {key!r} column's header cannot be clicked")
        QTest.mouseClick(header.viewport(), QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier, QtCore.QPoint(x, header.height() // 2))

    def click_row(self, row: int, modifier: QtCore.Qt.KeyboardModifier = QtCore.Qt.KeyboardModifier.NoModifier) -> None:
        """Click the table's row ``row`` (in the id column), with ``modifier`` held."""
        table = self.table()
        rect = table.visualRect(table.model().index(row, 0))
        if not rect.isValid():
            raise RuntimeError(f"row {row} is not on screen")
        QTest.mouseClick(table.viewport(), QtCore.Qt.MouseButton.LeftButton, modifier, rect.center())

    def key(self, widget: QtWidgets.QWidget, key: QtCore.Qt.Key, modifier: QtCore.Qt.KeyboardModifier = QtCore.Qt.KeyboardModifier.NoModifier) -> None:
        """Press ``key`` in ``widget``."""
        widget.setFocus()
        QTest.keyClick(widget, key, modifier)

    def tab(self, name: str, text: str) -> None:
        """Click the tab labelled ``text`` of the tab widget ``name``."""
        tabs = self.find(QtWidgets.QTabWidget, name)
        index = next((i for i in range(tabs.count()) if tabs.tabText(i) == text), -1)
        if index < 0:
            raise LookupError(f"no tab {text!r} in {name!r}")
        bar = tabs.tabBar()
        QTest.mouseClick(bar, QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier, bar.tabRect(index).center())

    def toggle(self, name: str) -> None:
        """Click the check box ``name``."""
        box = self.find(QtWidgets.QCheckBox, name)
        QTest.mouseClick(box, QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier, box.rect().center())

    def choose(self, name: str, matches: Any) -> None:
        """Choose, in the combo box ``name``, the first item whose data satisfies ``matches`` (as picking it from the list)."""
        combo = self.find(QtWidgets.QComboBox, name)
        index = next((i for i in range(combo.count()) if matches(combo.itemData(i))), -1)
        if index < 0:
            raise LookupError(f"no matching item in {name!r}")
        combo.setCurrentIndex(index)
        combo.activated.emit(index)  # what a pick from the popup sends

    def dialog(self, name: str) -> QtWidgets.QDialog | None:
        """The window's visible dialog named ``name``, if any."""
        # Every dialog of that name, not the first: a closed one may linger until deleteLater has run.
        return next((d for d in self.window.findChildren(QtWidgets.QDialog, name) if d.isVisible()), None)

    def settled(self) -> bool:
        """Nothing loading, no task running, no search waiting for its debounce."""
        debounce = self.window.findChild(QtCore.QTimer, "searchDebounce")
        return bool(self.window.is_idle()) and not (debounce is not None and debounce.isActive())

    def busy(self) -> str:
        """What keeps the window from being settled, in words ("" when it is settled)."""
        window = self.window
        parts = []
        if window.reader is not None and window.reader.pending():
            parts.append(f"{window.reader.pending()} read(s) pending")
        if window.tasks.is_busy():
            parts.append("a task running")
        for name, model in (("memory table", window.model), ("audit log", window.audit_view.model), ("sessions", window.sessions_view.model)):
            if model.is_loading():
                parts.append(f"the {name} loading")
        debounce = window.findChild(QtCore.QTimer, "searchDebounce")
        if debounce is not None and debounce.isActive():
            parts.append("the search debounce running")
        return ", ".join(parts)

    def at_end(self) -> bool:
        """Ctrl+End again until the table's last row is in view with its contents loaded."""
        table = self.table()
        model = table.model()
        if model.canFetchMore(QtCore.QModelIndex()):
            self.key(table, QtCore.Qt.Key.Key_End, QtCore.Qt.KeyboardModifier.ControlModifier)
            return False
        last = model.rowCount() - 1
        if last < 0:
            return True
        if table.rowAt(table.viewport().height() - 1) not in (last, -1):
            self.key(table, QtCore.Qt.Key.Key_End, QtCore.Qt.KeyboardModifier.ControlModifier)
            return False
        loaded = getattr(model, "is_row_loaded", lambda _r: True)(last)
        return bool(loaded) and self.settled()


@dataclass(frozen=True)
class Action:
    """One step of the script: ``do`` acts on the window; the step is over when ``done`` holds (default: settled)."""

    name: str
    do: Callable[[Driver], None]
    done: Callable[[Driver], bool] | None = None


def _ctrl() -> QtCore.Qt.KeyboardModifier:
    return QtCore.Qt.KeyboardModifier.ControlModifier


def _dialog_open(name: str) -> Callable[[Driver], bool]:
    return lambda d: d.dialog(name) is not None


def _close_dialog(name: str, *, accept: bool) -> Callable[[Driver], None]:
    def close(d: Driver) -> None:
        dialog = d.dialog(name)
        if dialog is None:
            raise RuntimeError(f"the {name!r} dialog is not open")
        if accept:
            dialog.accept()
        else:
            QTest.keyClick(dialog, QtCore.Qt.Key.Key_Escape)

    return close


def _edit_importance(d: Driver) -> None:
    dialog = d.dialog("editDialog")
    if dialog is None:
        raise RuntimeError("the edit dialog is not open")
    spin = d.find(QtWidgets.QDoubleSpinBox, "editImportance")
    spin.setFocus()
    QTest.keyClick(spin, QtCore.Qt.Key.Key_Up)
    dialog.accept()


def _travel(days: int) -> Callable[[Driver], None]:
    from datetime import timedelta

    return lambda d: d.choose("timeTravel", lambda data: data == timedelta(days=days))


def _show(key: str) -> Callable[[Driver], None]:
    return lambda d: d.show_view(key)


def actions(layers: list[str]) -> list[Action]:
    """The script, in order: about forty things a person does in a session with a big store."""
    script = [Action(f"show {key}", _show(key)) for key in ["all", *layers]]
    script += [
        Action("show all memories", lambda d: d.show_view("all")),
        Action("type search 'fix test error'", lambda d: d.type_text("searchBox", "fix test error")),
        Action("select first hit", lambda d: d.click_row(0)),
        Action("clear search", lambda d: d.clear_text("searchBox")),
        Action("sort by strength", lambda d: d.sort_by("strength")),
        Action("sort by created", lambda d: d.sort_by("created")),
        Action("sort by created again (flip)", lambda d: d.sort_by("created")),
        Action("sort by title", lambda d: d.sort_by("title")),
        Action("sort by id", lambda d: d.sort_by("id")),
        Action("select row 0", lambda d: d.click_row(0)),
        Action("select row 3", lambda d: d.click_row(3)),
        Action("open Versions tab", lambda d: d.tab("detailTabs", "Versions")),
        Action("open Strength tab", lambda d: d.tab("detailTabs", "Strength")),
        Action("ctrl-click row 5 (compare 2)", lambda d: d.click_row(5, _ctrl())),
        Action("ctrl-click row 7 (compare 3)", lambda d: d.click_row(7, _ctrl())),
        Action("select row 2", lambda d: d.click_row(2)),
        Action("pin (Ctrl+P)", lambda d: d.trigger("actionPin")),
        Action("unpin (Ctrl+P)", lambda d: d.trigger("actionPin")),
        Action("open Edit (Ctrl+E)", lambda d: d.trigger("actionEdit"), _dialog_open("editDialog")),
        Action("edit importance, save", _edit_importance),
        Action("open Memory tab", lambda d: d.tab("detailTabs", "Memory")),
        Action("open audit log", lambda d: d.show_view("audit")),
        Action("open sessions", lambda d: d.show_view("sessions")),
        Action("back to all memories", lambda d: d.show_view("all")),
        Action("scroll to the end (Ctrl+End)", lambda d: d.key(d.table(), QtCore.Qt.Key.Key_End, _ctrl()), lambda d: d.at_end()),
        Action("back to the top (Ctrl+Home)", lambda d: d.key(d.table(), QtCore.Qt.Key.Key_Home, _ctrl())),
        Action("pinned filter on", lambda d: d.toggle("pinnedFilter")),
        Action("pinned filter off", lambda d: d.toggle("pinnedFilter")),
        Action("expiring filter on", lambda d: d.toggle("expiringFilter")),
        Action("expiring filter off", lambda d: d.toggle("expiringFilter")),
        Action("all versions on", lambda d: d.toggle("allVersionsFilter")),
        Action("all versions off", lambda d: d.toggle("allVersionsFilter")),
        Action("preview next sweep", lambda d: d.trigger("actionSweepPreview"), _dialog_open("sweepPreviewDialog")),
        Action("close sweep preview", _close_dialog("sweepPreviewDialog", accept=False)),
        Action("time travel +30 days", _travel(30)),
        Action("back to now", lambda d: d.trigger("actionBackToNow")),
        Action("select row 1", lambda d: d.click_row(1)),
        Action("forget (Delete)", lambda d: d.trigger("actionForget"), _dialog_open("forgetDialog")),
        Action("confirm forget", _close_dialog("forgetDialog", accept=True)),
        Action("refresh (F5)", lambda d: d.trigger("actionRefresh")),
    ]
    return script


def _copy_store(source: Path, target: Path) -> None:
    """Copy ``source`` (with anything still in its WAL) to ``target`` through SQLite's backup API.

    The benchmark writes (pin, edit, forget), so it works on a copy; no connection is open in this process yet.
    """
    import sqlite3

    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def run_actions(path: Path, *, timeout: float = 60.0, size: tuple[int, int] = (1280, 800)) -> dict[str, Any]:
    """Open a copy of ``path`` in the main window and run :func:`actions`; each action's worst UI stall in ms.

    Each step is started from the event loop and ends when its ``done`` holds and the window has stayed settled for
    a few rounds; an action that fails or times out is reported with its error and the script goes on.
    """
    from memlens.gui.app import make_application
    from memlens.gui.main_window import MainWindow

    app = make_application([])
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memlens-gui-actions-") as tmp:
        copy = Path(tmp) / "memory.db"
        _copy_store(path, copy)
        settings = QtCore.QSettings(str(Path(tmp) / "settings.ini"), QtCore.QSettings.Format.IniFormat)
        window = MainWindow(settings)
        window.resize(*size)
        window.show()
        driver = Driver(window, timeout)
        heartbeat = Heartbeat()
        heartbeat.start()
        opening = Action("open store", lambda _d: window.open_store(copy, create=False), lambda d: d.table().model().rowCount() > 0)
        layers = [k for k in driver.views() if k not in ("all", "audit", "sessions", "conflicts")]
        for action in [opening, *actions(layers)]:
            rows.append(_perform(action, driver, heartbeat, timeout))
        heartbeat.stop()
        window.close()
        app.processEvents()
    worst = max(rows, key=lambda r: r["worst_stall_ms"])
    failed = [r["action"] for r in rows if r["error"]]
    return {
        "store": str(path),
        "window": f"{size[0]}x{size[1]}",
        "platform": QtGui.QGuiApplication.platformName(),
        "actions": rows,
        "worst_stall_ms": worst["worst_stall_ms"],
        "worst_action": worst["action"],
        "limit_ms": STALL_LIMIT_MS,
        "within_limit": worst["worst_stall_ms"] < STALL_LIMIT_MS and not failed,
        "failed": failed,
        "peak_rss_mb": peak_rss_mb(),
    }


def _perform(action: Action, driver: Driver, heartbeat: Heartbeat, timeout: float) -> dict[str, Any]:
    """Run one action from the event loop; its worst stall, how long until it settled, and any error."""
    outcome: dict[str, BaseException | None] = {}

    def act() -> None:
        try:
            action.do(driver)
            outcome["error"] = None
        except Exception as exc:  # reported in the table; the script goes on
            outcome["error"] = exc

    done = action.done or (lambda _d: True)
    quiet = [0]

    def finished() -> bool:
        if "error" not in outcome:
            return False
        if outcome["error"] is not None:
            return True
        quiet[0] = quiet[0] + 1 if done(driver) and driver.settled() else 0
        return quiet[0] >= 3  # settled on three checks in a row (30 ms): follow-up reads have had their chance to start

    heartbeat.reset()
    started = time.perf_counter()
    QtCore.QTimer.singleShot(0, act)
    completed = _wait(finished, timeout)
    elapsed = time.perf_counter() - started
    error = outcome.get("error")
    if not completed and error is None:
        waiting = driver.busy() or ("its end condition unmet" if not done(driver) else "settled only just now")
        error = TimeoutError(f"not settled after {timeout:g} s ({waiting})")
    return {
        "action": action.name,
        "worst_stall_ms": round(heartbeat.worst_ms, 1),
        "settled_ms": round(elapsed * 1000, 1),
        "page": _page_name(driver),
        "table_rows": driver.table().model().rowCount(),
        "error": f"{type(error).__name__}: {error}" if error is not None else None,
    }


def _page_name(driver: Driver) -> str:
    """The objectName of the page the window shows, or of the open dialog (what the person is looking at)."""
    dialogs = [d for d in driver.window.findChildren(QtWidgets.QDialog) if d.isVisible()]
    if dialogs:
        return str(dialogs[0].objectName())
    pages = driver.find(QtWidgets.QStackedWidget, "pages")
    return str(pages.currentWidget().objectName()) if pages.currentWidget() is not None else ""


def actions_table(result: dict[str, Any]) -> str:
    """The per-action table and the overall worst, as text."""
    width = max(len(r["action"]) for r in result["actions"])
    lines = [f"{'action':<{width}}  {'worst stall ms':>14}  {'settled ms':>10}  {'table rows':>10}  showing", "-" * (width + 60)]
    for r in result["actions"]:
        note = f"  {r['error']}" if r["error"] else ""
        lines.append(f"{r['action']:<{width}}  {r['worst_stall_ms']:>14.1f}  {r['settled_ms']:>10.1f}  {r['table_rows']:>10,}  {r['page']}{note}")
    lines.append("-" * (width + 60))
    verdict = "under" if result["worst_stall_ms"] < result["limit_ms"] else "OVER"
    lines.append(
        f"worst stall: {result['worst_stall_ms']:.1f} ms ({result['worst_action']}), {verdict} the {result['limit_ms']:.0f} ms limit; "
        f"{len(result['actions'])} actions, window {result['window']} on {result['platform']}, peak RSS {result['peak_rss_mb']} MB"
    )
    if result["failed"]:
        lines.append(f"failed: {', '.join(result['failed'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m memlens.gui.bench", description="Open-and-scroll timing of the inspector on a store.")
    parser.add_argument("--db", type=Path, required=True, help="the store to open (it is not changed by the benchmark itself)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed for each of opening and scrolling (default 60)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--actions", action="store_true", help="drive the window through a script of user actions (on a copy) and report each one's worst UI stall")
    args = parser.parse_args(argv)
    if not args.db.exists():
        print(f"python -m memlens.gui.bench: {args.db} does not exist", file=sys.stderr)
        return 2
    if args.actions:
        outcome = run_actions(args.db, timeout=args.timeout)
        print(json.dumps(outcome) if args.json else actions_table(outcome))
        return 0 if not outcome["failed"] else 1
    result = run(args.db, timeout=args.timeout)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
