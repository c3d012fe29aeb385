"""File dialogs that never read the files they list.

Qt's own file dialog asks the MIME database what each listed file is, to pick its icon and its "Type" column, and
for a name without a known suffix (``memory.db-wal``, ``memory.db-shm``, often ``memory.db``) that means opening
the file and reading its first bytes. In a process holding SQLite connections that is fatal: closing that
descriptor drops all of the process's locks on the file (POSIX), another process then believes it is the last
user and checkpoints and deletes the WAL under us (see :mod:`memlens.db`). These dialogs use Qt's widget dialog with
an icon provider that looks at names and stat() results only, so a dialog opened on the store's folder is safe.
"""

from __future__ import annotations

from memlens.gui.qt import QtCore, QtGui, QtWidgets


class NameOnlyIconProvider(QtWidgets.QFileIconProvider):
    """Icons and type names from what a directory listing already knows (folder or file, the suffix), never from
    the file's contents."""

    def icon(self, what: object) -> object:  # type: ignore[override]
        style = QtWidgets.QApplication.style()
        if isinstance(what, QtCore.QFileInfo):
            pixmap = QtWidgets.QStyle.StandardPixmap.SP_DirIcon if what.isDir() else QtWidgets.QStyle.StandardPixmap.SP_FileIcon
            return style.standardIcon(pixmap)
        if what == QtGui.QAbstractFileIconProvider.IconType.Folder:
            return style.standardIcon(QtWidgets.QStyle.StandardPixmap.SP_DirIcon)
        return style.standardIcon(QtWidgets.QStyle.StandardPixmap.SP_FileIcon)

    def type(self, info: QtCore.QFileInfo) -> str:
        if info.isDir():
            return "Folder"
        suffix = info.suffix()
        return f"{suffix.upper()} file" if suffix else "File"


def make_file_dialog(parent: QtWidgets.QWidget | None, caption: str, start: str, name_filter: str, *, save: bool) -> QtWidgets.QFileDialog:
    """A file dialog (not yet shown) that lists ``start`` without opening any file in it."""
    dialog = QtWidgets.QFileDialog(parent, caption, start, name_filter)
    dialog.setObjectName("saveFileDialog" if save else "openFileDialog")
    # The platform's native dialog runs out of our control (and may sniff contents); Qt's widget dialog does not.
    dialog.setOption(QtWidgets.QFileDialog.Option.DontUseNativeDialog, True)
    provider = NameOnlyIconProvider()
    dialog.setIconProvider(provider)
    dialog._icon_provider = provider  # type: ignore[attr-defined]  # the dialog does not own it: keep it alive
    if save:
        dialog.setAcceptMode(QtWidgets.QFileDialog.AcceptMode.AcceptSave)
        dialog.setFileMode(QtWidgets.QFileDialog.FileMode.AnyFile)
    else:
        dialog.setAcceptMode(QtWidgets.QFileDialog.AcceptMode.AcceptOpen)
        dialog.setFileMode(QtWidgets.QFileDialog.FileMode.ExistingFile)
    return dialog


def _choose(parent: QtWidgets.QWidget | None, caption: str, start: str, name_filter: str, *, save: bool) -> str:
    dialog = make_file_dialog(parent, caption, start, name_filter, save=save)
    try:
        if dialog.exec() != QtWidgets.QDialog.DialogCode.Accepted:
            return ""
        files = dialog.selectedFiles()
        return files[0] if files else ""
    finally:
        dialog.deleteLater()


def choose_open_file(parent: QtWidgets.QWidget | None, caption: str, start: str, name_filter: str) -> str:
    """Ask for an existing file; "" when the person cancels."""
    return _choose(parent, caption, start, name_filter, save=False)


def choose_save_file(parent: QtWidgets.QWidget | None, caption: str, start: str, name_filter: str) -> str:
    """Ask for a file to write (Qt asks before overwriting an existing one); "" when the person cancels."""
    return _choose(parent, caption, start, name_filter, save=True)
