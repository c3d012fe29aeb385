"""``python -m memlens.gui.bench --db PATH``: how fast the inspector opens a large store and scrolls to its end, and its
peak memory. Run offscreen by ``python -m memlens.bench`` (core never imports Qt, so it starts this in a process of
its own); prints JSON with ``--json``.

The clock starts before the window asks for the store and stops when the memory table, once it has rows, has
painted them (a synchronous repaint). Scrolling to the end presses Ctrl+End in the table, then repaints the viewport
until the last row's contents have arrived and are painted (models that page with ``fetchMore`` get Ctrl+End again
until nothing is left to fetch); capped by ``--timeout``. The memory figure is the process's peak resident set.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from memlens.gui.qt import QtCore, QtGui, QtWidgets


def _wait(done: Any, timeout: float) -> bool:
    """Run the event loop until ``done()`` holds (checked every 10 ms) or ``timeout`` seconds pass; whether it held."""
    deadline = time.perf_counter() + timeout
    loop = QtCore.QEventLoop()
    timer = QtCore.QTimer()
    timer.setObjectName("benchWaitTimer")
    timer.setInterval(10)

    def check() -> None:
        if done() or time.perf_counter() > deadline:
            loop.quit()

    timer.timeout.connect(check)
    timer.start()
    if not done():
        loop.exec()
    timer.stop()
    return bool(done())


def peak_rss_mb() -> float:
    """The process's peak resident memory in MB (Linux reports kilobytes, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


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
        started = time.perf_counter()
        window.open_store(path, create=False)
        opened = _wait(lambda: model.rowCount() > 0, timeout)
        first_rows = None
        if opened:
            table.viewport().repaint()  # paints now, synchronously: the rows are on screen when it returns
            first_rows = time.perf_counter() - started
        table.setFocus()
        scroll_started = time.perf_counter()

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
        scroll = time.perf_counter() - scroll_started
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
        "scroll_to_end_s": round(scroll, 3) if reached else None,
        "reached_end": bool(reached),
        "rows_loaded": rows,
        "rows_in_view": in_view,
        "rows_with_contents_in_memory": with_contents,
        "latest_memories": total,
        "timeout_s": timeout,
        "peak_rss_mb": peak_rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m memlens.gui.bench", description="Open-and-scroll timing of the inspector on a store.")
    parser.add_argument("--db", type=Path, required=True, help="the store to open (it is not changed by the benchmark itself)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed for each of opening and scrolling (default 60)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    if not args.db.exists():
        print(f"python -m memlens.gui.bench: {args.db} does not exist", file=sys.stderr)
        return 2
    result = run(args.db, timeout=args.timeout)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
