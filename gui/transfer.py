"""File > Import and File > Export: run :mod:`memlens.io` in the background with a progress dialog.

Both are operations (:mod:`memlens.gui.operations`) on any :class:`~memlens.gui.operations.OpHost`; this module never
imports the main window.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memlens.gui.file_dialogs import choose_open_file, choose_save_file
from memlens.gui.operations import OpChanges, OpHost, StoreOp
from memlens.gui.qt import QtCore, QtWidgets, Signal
from memlens.gui.store_session import store_folder
from memlens.gui.tasks import TaskContext
from memlens.io import ExportSummary, ImportSummary, export_file, import_file
from memlens.store import MemoryStore


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


def _run(host: OpHost, dialog: TransferDialog, op: StoreOp[Any], done: Callable[[Any], str], failed: str) -> TransferDialog:
    """Show ``dialog`` and run ``op`` behind it: its progress, then ``done(summary)`` or ``failed`` and the error."""

    def finished(summary: Any) -> None:
        dialog.finish(done(summary), summary)

    def failure(error: BaseException) -> None:
        dialog.finish(f"<b>{failed}</b><br>{html.escape(str(error))}", error)
        host.show_error(op.title, error)

    host.open_dialog(dialog)
    op.success(finished).failure(failure).with_progress(dialog.set_progress).run_in_background()
    return dialog


def run_import(host: OpHost, path: str | Path) -> TransferDialog:
    """Import ``path`` (agentmemory JSON or memlens JSONL) into the open store, in the background."""
    source = Path(path)
    now = host.clock()

    def work(store: MemoryStore, ctx: TaskContext) -> ImportSummary:
        return import_file(store, source, now=now, progress=lambda done, total: ctx.progress(done, total))

    dialog = TransferDialog(f"Importing {source.name}", host.dialog_parent())
    op = StoreOp(host, "import", work, OpChanges.everything(), title="Import failed")
    return _run(host, dialog, op, lambda summary: "<pre>" + html.escape(summary.describe()) + "</pre>", "Nothing was imported.")


def run_export(host: OpHost, path: str | Path) -> TransferDialog:
    """Export every memory, session and relation of the open store to ``path`` (memlens JSONL), in the background."""
    target = Path(path)
    now = host.clock()

    def work(store: MemoryStore, ctx: TaskContext) -> ExportSummary:
        return export_file(store, target, now=now, progress=lambda done, total: ctx.progress(done, total))

    dialog = TransferDialog(f"Exporting to {target.name}", host.dialog_parent())
    op = StoreOp(host, "export", work, title="Export failed", writes=False)
    return _run(host, dialog, op, _exported, "The export failed; no file was written.")


def _exported(summary: ExportSummary) -> str:
    return (
        f"Exported {summary.memories:,} memories, {summary.sessions:,} sessions and {summary.relations:,} relations to "
        f"{html.escape(summary.path)}."
    )


def start_import(host: OpHost) -> None:
    """Ask for a file, then import it."""
    if host.path is None or host.read_only():
        return
    name = choose_open_file(host.dialog_parent(), "Import memories", str(store_folder(host.path)), "Exports (*.jsonl *.json);;All files (*)")
    if name:
        run_import(host, name)


def start_export(host: OpHost) -> None:
    """Ask where, then export."""
    if host.path is None:
        return
    # Beside a store file, named after it; a store on a server has no folder: the default store's, then.
    suggested = host.path.with_suffix(".jsonl") if isinstance(host.path, Path) else store_folder(host.path) / "memlens-export.jsonl"
    name = choose_save_file(host.dialog_parent(), "Export memories", str(suggested), "memlens export (*.jsonl)")
    if name:
        run_export(host, name)
