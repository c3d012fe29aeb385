"""Render the inspector's main views to PNG files, offscreen: ``python -m memlens.gui.screenshots [OUTDIR]``.

A demo store (:mod:`memlens.demo`, fixed seed, fixed clock) is written to a temporary folder and the real window is
driven through each view; nothing touches the person's own store or preferences. The README shows the result
(``resources/screenshots``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
SIZE = (1440, 900)
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "resources" / "screenshots"


def _settle(window: object, app: object, timeout: float = 20.0) -> None:
    """Run the event loop until the window has nothing left to load (a few quiet rounds in a row)."""
    from memlens.gui.main_window import MainWindow
    from memlens.gui.qt import QtCore, QtWidgets

    assert isinstance(window, MainWindow) and isinstance(app, QtWidgets.QApplication)
    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < 5:
        loop = QtCore.QEventLoop()
        QtCore.QTimer.singleShot(40, loop.quit)
        loop.exec()
        quiet = quiet + 1 if window.is_idle() else 0
        if time.monotonic() > deadline:
            raise RuntimeError("the window did not settle")


def render(out: Path, *, theme_name: str = "light") -> list[Path]:
    """Write the screenshots into ``out`` and return their paths."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["TZ"] = "UTC"  # times in the pictures do not depend on where they were taken
    if hasattr(time, "tzset"):
        time.tzset()
    from memlens.demo import generate
    from memlens.gui import icons, theme
    from memlens.gui.app import make_application
    from memlens.gui.dialogs import ForgetDialog, SweepPreviewDialog
    from memlens.gui.main_window import MainWindow
    from memlens.gui.memory_model import COLUMN_INDEX
    from memlens.gui.new_memory_dialog import NewMemoryDialog
    from memlens.gui.qt import QtCore, QtWidgets
    from memlens.store import MemoryStore

    out.mkdir(parents=True, exist_ok=True)
    app = make_application()
    theme.apply(app, theme_name)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.db"
        with MemoryStore.open(path, actor="agent") as store:
            generate(store, now=NOW, days=21, seed=7)
            chain = next(m for m in store.list_memories(layers=["semantic"], limit=500, now=NOW) if m.version >= 3)
            reminder = store.search("dentist appointment", now=NOW)[0].memory
            compare = [m.id for m in store.list_memories(layers=["semantic"], limit=500, now=NOW) if m.type in ("chitchat", "preference", "pattern")][:4]
            forgotten_entry = store.audit(operation="sweep", limit=1)
            session_id = next(s.id for s in store.sessions(limit=50) if store.session_memories(s.id, layers=["episodic"]) and store.session_memories(s.id, layers=["working"]))
        settings = QtCore.QSettings(str(Path(tmp) / "memlens.gui.ini"), QtCore.QSettings.Format.IniFormat)
        window = MainWindow(settings, clock=lambda: NOW)
        window.resize(*SIZE)
        window.show()
        window.open_store(path, create=False)
        _settle(window, app)

        def shot(name: str, widget: QtWidgets.QWidget | None = None) -> None:
            _settle(window, app)
            window.statusBar().clearMessage()
            target = out / f"{name}.png"
            (widget or window).grab().save(str(target))
            written.append(target)

        def select(memory_id: int) -> None:
            window.go_to_memory(memory_id)
            _settle(window, app)

        def dialog_of(kind: type) -> QtWidgets.QDialog:
            _settle(window, app)
            dialog = window.dialog
            if not isinstance(dialog, kind) or dialog is None:
                raise RuntimeError(f"expected a {kind.__name__} to be open")
            return dialog

        window.sidebar.select("semantic")
        select(chain.id)
        window.detail.tabs.setCurrentIndex(0)
        shot("main")
        window.detail.tabs.setCurrentIndex(1)
        shot("versions")
        select(reminder.id)
        window.detail.tabs.setCurrentIndex(2)
        shot("strength")
        window.sidebar.select("semantic")
        _settle(window, app)
        selection = window.table.selectionModel()
        selection.clearSelection()
        for memory_id in compare:
            row = window.model.row_of(memory_id)
            if row >= 0:
                selection.select(window.model.index(row, 0), QtCore.QItemSelectionModel.SelectionFlag.Select | QtCore.QItemSelectionModel.SelectionFlag.Rows)
        shot("strength-compare")

        window.search_box.setText("pnpm install")
        window.apply_query()
        _settle(window, app)
        window.table.selectRow(0)
        window.detail.tabs.setCurrentIndex(0)
        shot("search")
        window.search_box.clear()
        window.apply_query()

        window.sidebar.select("audit")
        _settle(window, app)
        if forgotten_entry:
            row = window.audit_view.model.row_of(forgotten_entry[0].id)
            if row >= 0:
                window.audit_view.table.selectRow(row)
        shot("audit")

        window.sidebar.select("sessions")
        _settle(window, app)
        window.sessions_view.select_session(session_id)
        shot("sessions")

        window.sidebar.select("semantic")
        _settle(window, app)
        window.act_new_memory.trigger()
        new_dialog = dialog_of(NewMemoryDialog)
        assert isinstance(new_dialog, NewMemoryDialog)
        new_dialog.project.setCurrentText("etl-pipeline")
        new_dialog.set_text("The etl-pipeline loads data into Postgres on port 6432")
        _wait(app, lambda: new_dialog.preview is not None)
        shot("supersede-preview", new_dialog)
        new_dialog.reject()

        select(chain.id)
        window.forget_ids([chain.id])
        forget_dialog = dialog_of(ForgetDialog)
        assert isinstance(forget_dialog, ForgetDialog)
        forget_dialog.whole_chain.setChecked(True)
        forget_dialog.reason.setText("superseded tooling note")
        shot("forget", forget_dialog)
        forget_dialog.reject()

        window.preview_sweep()
        sweep_dialog = dialog_of(SweepPreviewDialog)
        shot("sweep-preview", sweep_dialog)
        sweep_dialog.close()

        window.consolidate()
        consolidate_dialog = window.dialog
        _settle(window, app)
        if consolidate_dialog is not None:
            shot("consolidate", consolidate_dialog)
            consolidate_dialog.close()

        window.sidebar.select("working")
        window.table.sortByColumn(COLUMN_INDEX["strength"], QtCore.Qt.SortOrder.AscendingOrder)
        window.set_time_travel(NOW + timedelta(days=7))
        _settle(window, app)
        window.table.selectRow(0)
        shot("time-travel")
        window.set_time_travel(None)
        window.table.sortByColumn(COLUMN_INDEX["created"], QtCore.Qt.SortOrder.DescendingOrder)

        window.set_theme("dark" if theme_name != "dark" else "light")
        window.sidebar.select("semantic")
        _settle(window, app)
        window.table.selectRow(2)
        window.detail.tabs.setCurrentIndex(0)
        shot("dark" if theme_name != "dark" else "light")
        window.close()
        window.deleteLater()
        _settle_events()
    # Rendered icons hold pixmaps; drop them while the application still exists.
    icons.clear_cache()
    return written


def _settle_events() -> None:
    from memlens.gui.qt import QtCore

    QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
    QtCore.QCoreApplication.processEvents()


def _wait(app: object, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    from memlens.gui.qt import QtCore

    deadline = time.monotonic() + timeout
    while not condition():
        loop = QtCore.QEventLoop()
        QtCore.QTimer.singleShot(40, loop.quit)
        loop.exec()
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for the window")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: write the PNGs and list them."""
    parser = argparse.ArgumentParser(prog="python -m memlens.gui.screenshots", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("outdir", nargs="?", default=str(DEFAULT_OUT), help=f"where to write the PNGs (default {DEFAULT_OUT})")
    parser.add_argument("--theme", choices=["light", "dark"], default="light")
    args = parser.parse_args(argv)
    for path in render(Path(args.outdir), theme_name=args.theme):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
