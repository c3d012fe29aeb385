"""Starting the desktop app: the QApplication, the theme, the main window on a store."""

from __future__ import annotations

import sys
from pathlib import Path

from core.config import default_store_path
from gui import theme
from gui.main_window import MainWindow
from gui.preferences import Preferences
from gui.qt import QtCore, QtGui, QtWidgets

ORGANIZATION = "memlens"
APPLICATION = "memlens"


def make_application(argv: list[str] | None = None) -> QtWidgets.QApplication:
    """The QApplication (created once), named so QSettings finds the person's preferences."""
    existing = QtWidgets.QApplication.instance()
    if isinstance(existing, QtWidgets.QApplication):
        return existing
    QtGui.QGuiApplication.setHighDpiScaleFactorRoundingPolicy(QtCore.Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QtWidgets.QApplication(argv if argv is not None else sys.argv[:1])
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName("memlens")
    app.setWindowIcon(QtGui.QIcon(str(Path(__file__).resolve().parent.parent / "resources" / "icons" / "app.svg")))
    return app


def main(path: str | Path | None = None, *, theme_name: str | None = None) -> int:
    """Open the inspector on ``path`` (default: ``$MEMLENS_DB`` or the user data folder) and run until closed."""
    app = make_application()
    settings = QtCore.QSettings(ORGANIZATION, APPLICATION)
    prefs = Preferences.load(settings)
    if theme_name:
        prefs.theme = theme_name
        prefs.save(settings)
    theme.apply(app, prefs.theme)
    window = MainWindow(settings)
    window.show()
    window.open_store(Path(path) if path is not None else default_store_path(), create=True)
    return int(app.exec())


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else None))
