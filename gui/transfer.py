"""File > Import and File > Export: run :mod:`memlens.io` in the background with a progress dialog."""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlens.gui.file_dialogs import choose_open_file, choose_save_file
from memlens.gui.qt import QtCore, QtWidgets, Signal
from memlens.gui.tasks import TaskContext
from memlens.io import ExportSummary, ImportSummary, export_file, import_file
from memlens.store import MemoryStore

if TYPE_CHECKING:
    from memlens.gui.main_window import MainWindow


class TransferDialog(QtWidgets.QDialog):
    """Progress of an import or export, then its summary."""

    completed = Signal(object)

    def __init__(self, title: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transferDialog")
        self.setWindowTitle(title)
        self.label = QtWidgets.QLabel(f"{title}…")
        self.label.setObjectName("transferLabel")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setObjectName("transferProgress")
        self.progress.setRange(0, 0)
        self.buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        self.buttons.setObjectName("transferButtons")
        self.buttons.rejected.connect(self.reject)
        self.buttons.setEnabled(False)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(self.label)
        layout.addWidget(self.progress)
        layout.addWidget(self.buttons)
        self.resize(520, 180)

    def set_progress(self, done: int, total: int, _text: str) -> None:
        """Show ``done`` of ``total`` records."""
        if total > 0:
            self.progress.setRange(0, total)
            self.progress.setValue(min(done, total))
            self.label.setText(f"{self.windowTitle()}: {done:,} of {total:,}")

    def finish(self, text: str, result: Any) -> None:
        """Show the outcome and let the dialog be closed."""
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.label.setText(text)
        self.buttons.setEnabled(True)
        self.completed.emit(result)


def run_import(window: MainWindow, path: str | Path) -> TransferDialog:
    """Import ``path`` (agentmemory JSON or memlens JSONL) into the open store, in the background."""
    source = Path(path)
    dialog = TransferDialog(f"Importing {source.name}", window)
    now = window.clock()

    def work(store: MemoryStore, ctx: TaskContext) -> ImportSummary:
        return import_file(store, source, now=now, progress=lambda done, total: ctx.progress(done, total))

    def finished(summary: ImportSummary) -> None:
        dialog.finish("<pre>" + html.escape(summary.describe()) + "</pre>", summary)

    def failed(error: BaseException) -> None:
        dialog.finish(f"<b>Nothing was imported.</b><br>{html.escape(str(error))}", error)
        window.show_error("Import failed", error)

    window._open_dialog(dialog)
    window._write("import", work, finished, "Import failed", on_error=failed, on_progress=dialog.set_progress)
    return dialog


def run_export(window: MainWindow, path: str | Path) -> TransferDialog:
    """Export every memory, session and relation of the open store to ``path`` (memlens JSONL), in the background."""
    target = Path(path)
    dialog = TransferDialog(f"Exporting to {target.name}", window)
    now = window.clock()

    def work(store: MemoryStore, ctx: TaskContext) -> ExportSummary:
        return export_file(store, target, now=now, progress=lambda done, total: ctx.progress(done, total))

    def finished(summary: ExportSummary) -> None:
        dialog.finish(
            f"Exported {summary.memories:,} memories, {summary.sessions:,} sessions and {summary.relations:,} relations to "
            f"{html.escape(summary.path)}.",
            summary,
        )

    def failed(error: BaseException) -> None:
        dialog.finish(f"<b>The export failed; no file was written.</b><br>{html.escape(str(error))}", error)
        window.show_error("Export failed", error)

    window._open_dialog(dialog)
    window.tasks.start("export", work, on_done=finished, on_error=failed, on_progress=dialog.set_progress)
    return dialog


def start_import(window: MainWindow) -> None:
    """Ask for a file, then import it."""
    if window.path is None or window.read_only():
        return
    name = choose_open_file(
        window, "Import memories", str(window.path.parent), "Exports (*.jsonl *.json);;All files (*)"
    )
    if name:
        run_import(window, name)


def start_export(window: MainWindow) -> None:
    """Ask where, then export."""
    if window.path is None:
        return
    name = choose_save_file(
        window, "Export memories", str(window.path.with_suffix(".jsonl")), "memlens export (*.jsonl)"
    )
    if name:
        run_export(window, name)
